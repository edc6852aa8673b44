// The pointwise steps: RGB -> YCbCr, scale, normalize (the tail a GPU consumer can run).
#include <array>
#include <string>

#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/detail/clones.hpp"
#include "pinfeed/runtime/exception.hpp"

#include "common.hpp"
#include "kinds.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

/// The pointwise arithmetic over `pixels` RGB pixels: YCbCr, or fma(v, a[c], b[c]) per sample.
template <class In>
PINFEED_INLINE void pointwise_body(const In* in, std::size_t pixels, bool ycbcr, const float a[3], const float b[3], float* dst) {
  if (!ycbcr) {
    // Eight pixels at a time with the channels' factors laid out as the samples are, so the
    // compiler vectorises it; each sample the same single fma.
    constexpr std::size_t kRun = 24;
    float ar[kRun], br[kRun];
    for (std::size_t k = 0; k < kRun; ++k) {
      ar[k] = a[k % 3];
      br[k] = b[k % 3];
    }
    const std::size_t n = pixels * 3;
    std::size_t i = 0;
    for (; i + kRun <= n; i += kRun)
      for (std::size_t k = 0; k < kRun; ++k) dst[i + k] = std::fma(static_cast<float>(in[i + k]), ar[k], br[k]);
    for (; i < n; ++i) dst[i] = std::fma(static_cast<float>(in[i]), a[i % 3], b[i % 3]);
    return;
  }
  for (std::size_t p = 0; p < pixels; ++p) {
    float v[3];
    for (int c = 0; c < 3; ++c) v[c] = static_cast<float>(in[3 * p + c]);
    float t[3];
    for (int c = 0; c < 3; ++c)
      t[c] = std::fma(ops::detail::ycbcr_matrix(c, 0), v[0],
                      std::fma(ops::detail::ycbcr_matrix(c, 1), v[1],
                               std::fma(ops::detail::ycbcr_matrix(c, 2), v[2], ops::detail::ycbcr_offset(c))));
    for (int c = 0; c < 3; ++c) dst[3 * p + c] = t[c];
  }
}
PINFEED_FMA_CLONES void pointwise_pixels(const std::uint8_t* in, std::size_t pixels, bool ycbcr, const float a[3],
                                         const float b[3], float* dst) {
  pointwise_body(in, pixels, ycbcr, a, b, dst);
}
PINFEED_FMA_CLONES void pointwise_pixels(const float* in, std::size_t pixels, bool ycbcr, const float a[3], const float b[3],
                                         float* dst) {
  pointwise_body(in, pixels, ycbcr, a, b, dst);
}

class pointwise_transform final : public transform {
 public:
  enum class kind { ycbcr, scale, normalize };
  pointwise_transform(kind k, float factor, std::array<float, 3> mean, std::array<float, 3> std)
      : kind_(k), factor_(factor), mean_(mean), std_(std) {
    if (k == kind::scale && !std::isfinite(factor)) throw pinfeed::invalid_argument("scale: factor must be finite");
    if (k == kind::normalize)
      for (int c = 0; c < 3; ++c)
        if (!(std[c] > 0.0f) || !std::isfinite(std[c]) || !std::isfinite(mean[c]))
          throw pinfeed::invalid_argument("normalize: std[" + std::to_string(c) + "] = " + format_number(std[c]) +
                                      " must be positive and finite");
  }
  std::string name() const override {
    switch (kind_) {
      case kind::ycbcr: return "ycbcr";
      case kind::scale: return "scale(" + format_number(factor_) + ")";
      case kind::normalize: {
        std::string s = "normalize(";
        for (int c = 0; c < 3; ++c) s += format_number(mean_[c]) + ",";
        for (int c = 0; c < 3; ++c) s += format_number(std_[c]) + (c < 2 ? "," : ")");
        return s;
      }
    }
    return "?";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (in.channels != 3) throw pinfeed::invalid_argument(name() + ": needs 3 channels, input is " + shape_text(in));
    return {in.height, in.width, 3, dtype::f32};
  }
  std::optional<pointwise_step> pointwise() const override {
    pointwise_step p;
    p.which = kind_ == kind::ycbcr ? pointwise_step::kind::ycbcr
              : kind_ == kind::scale ? pointwise_step::kind::scale : pointwise_step::kind::normalize;
    p.factor = factor_;
    p.mean = mean_;
    p.std = std_;
    return p;
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const auto pixels = static_cast<std::size_t>(in.spec.height * in.spec.width);
    float a[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    if (kind_ == kind::scale) a[0] = a[1] = a[2] = factor_;
    if (kind_ == kind::normalize)
      for (int c = 0; c < 3; ++c) {
        a[c] = 1.0f / std_[c];
        b[c] = -mean_[c] / std_[c];
      }
    if (in.spec.type == dtype::u8) pointwise_pixels(in.as<std::uint8_t>(), pixels, kind_ == kind::ycbcr, a, b, out.as<float>());
    else pointwise_pixels(in.as<float>(), pixels, kind_ == kind::ycbcr, a, b, out.as<float>());
  }

 private:
  kind kind_;
  float factor_;
  std::array<float, 3> mean_, std_;
};

}  // namespace

std::shared_ptr<transform> make_convert_ycbcr() {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::ycbcr, 1.0f, std::array<float, 3>{},
                                               std::array<float, 3>{1, 1, 1});
}
std::shared_ptr<transform> make_scale(float factor) {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::scale, factor, std::array<float, 3>{},
                                               std::array<float, 3>{1, 1, 1});
}
std::shared_ptr<transform> make_normalize(std::array<float, 3> mean, std::array<float, 3> std) {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::normalize, 1.0f, mean, std);
}

void add_pointwise_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"ycbcr", "convert_color"}, 0, 0, "ycbcr", [](std::span<const double>) { return make_convert_ycbcr(); }});
  kinds.push_back({{"scale"}, 0, 1, "scale[(F)]", [](std::span<const double> a) {
                     return make_scale(a.empty() ? 1.0f / 255.0f : static_cast<float>(a[0]));
                   }});
  kinds.push_back({{"normalize"}, 6, 6, "normalize(m0,m1,m2,s0,s1,s2)", [](std::span<const double> a) {
                     return make_normalize({static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(a[2])},
                                      {static_cast<float>(a[3]), static_cast<float>(a[4]), static_cast<float>(a[5])});
                   }});
}

}  // namespace pinfeed::loaders
