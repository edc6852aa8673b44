// Resize (shorter side) and the bilinear resize the other steps share: pinfeed's for uint8
// (pinfeed/ops/resize.hpp: the same bytes on every host and on the device), OpenCV's INTER_LINEAR
// for float.
#include <cstring>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

class resize_transform final : public transform {
 public:
  explicit resize_transform(std::int64_t shorter) : shorter_(shorter) {
    if (shorter <= 0) throw pinfeed::invalid_argument("resize: size must be positive, got " + std::to_string(shorter));
  }
  std::string name() const override { return "resize(" + std::to_string(shorter_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (!in.fixed()) return {-1, -1, in.channels, in.type};
    return shape_for(in);
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    resize_window(in, 0, 0, in.spec.height, in.spec.width, out);
  }
  std::int64_t min_short_side(std::int64_t, std::int64_t, philox_stream) const override { return shorter_; }

 private:
  image_spec shape_for(const image_spec& in) const {
    if (in.height <= in.width) return {shorter_, shorter_ * in.width / in.height, in.channels, in.type};
    return {shorter_ * in.height / in.width, shorter_, in.channels, in.type};
  }
  std::int64_t shorter_;
};

}  // namespace

namespace detail {
void resize_window(const image_view& in, std::int64_t y0, std::int64_t x0, std::int64_t h, std::int64_t w,
                   const image_view& out, bool flip) {
  if (in.spec.type == dtype::u8) {  // pinfeed's arithmetic, the device's too (pinfeed/ops/resize.hpp)
    const auto c = static_cast<std::size_t>(in.spec.channels);
    const std::size_t stride = static_cast<std::size_t>(in.spec.width) * c;
    ops::resize_bilinear_u8(reinterpret_cast<const std::uint8_t*>(in.data) + static_cast<std::size_t>(y0) * stride + static_cast<std::size_t>(x0) * c,
                            stride, h, w, static_cast<int>(c), reinterpret_cast<std::uint8_t*>(out.data), out.spec.height, out.spec.width, flip);
    return;
  }
  const int type = CV_MAKETYPE(in.spec.type == dtype::u8 ? CV_8U : CV_32F, static_cast<int>(in.spec.channels));
  const cv::Mat src(static_cast<int>(in.spec.height), static_cast<int>(in.spec.width), type, in.data);
  cv::Mat dst(static_cast<int>(out.spec.height), static_cast<int>(out.spec.width), type, out.data);
  cv::resize(src(cv::Rect(static_cast<int>(x0), static_cast<int>(y0), static_cast<int>(w), static_cast<int>(h))), dst,
             dst.size(), 0, 0, cv::INTER_LINEAR);
  if (flip) cv::flip(dst, dst, 1);
}
}  // namespace detail

void resize_into(const image_view& in, const image_view& out) {
  if (in.spec.height == out.spec.height && in.spec.width == out.spec.width) {
    std::memcpy(out.data, in.data, out.spec.bytes());
    return;
  }
  resize_window(in, 0, 0, in.spec.height, in.spec.width, out);
}

std::shared_ptr<transform> make_resize(std::int64_t shorter) { return std::make_shared<resize_transform>(shorter); }

void add_resize_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"resize"}, 1, 1, "resize(N)",
                   [](std::span<const double> a) { return make_resize(size_argument("resize", a[0])); }});
}

}  // namespace pinfeed::loaders
