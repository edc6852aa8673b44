// RandomResizedCrop, drawn as torchvision draws it.
#include <algorithm>
#include <cmath>
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

class rrc_transform final : public transform {
 public:
  rrc_transform(std::int64_t size, double smin, double smax, double rmin, double rmax)
      : size_(size), smin_(smin), smax_(smax), rmin_(rmin), rmax_(rmax) {
    if (size <= 0) throw pinfeed::invalid_argument("rrc: size must be positive, got " + std::to_string(size));
    if (!(smin > 0 && smin <= smax && smax <= 1))
      throw pinfeed::invalid_argument("rrc: scale range (" + format_number(smin) + ", " + format_number(smax) +
                                  ") must satisfy 0 < min <= max <= 1");
    if (!(rmin > 0 && rmin <= rmax))
      throw pinfeed::invalid_argument("rrc: ratio range (" + format_number(rmin) + ", " + format_number(rmax) +
                                  ") must satisfy 0 < min <= max");
  }
  std::string name() const override {
    return "rrc(" + std::to_string(size_) + "," + format_number(smin_) + "," + format_number(smax_) + "," +
           format_number(rmin_) + "," + format_number(rmax_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return {size_, size_, in.channels, in.type};
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const box b = draw(in.spec.height, in.spec.width, rng);
    resize_window(in, b.y, b.x, b.h, b.w, out);
  }
  std::optional<window_plan> window(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    const box b = draw(height, width, rng);
    return window_plan{{b.y, b.x, b.h, b.w}, size_, size_};
  }
  std::int64_t min_short_side(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    // Keep the drawn window at least `size` on its shorter side after the decoder shrinks the image.
    const box b = draw(height, width, rng);
    const double shrink = static_cast<double>(std::min(b.h, b.w)) / static_cast<double>(size_);
    if (shrink <= 1.0) return 0;
    return static_cast<std::int64_t>(std::ceil(static_cast<double>(std::min(height, width)) / shrink));
  }

 private:
  struct box {
    std::int64_t y, x, h, w;
  };
  /// torchvision's RandomResizedCrop.get_params, with the sample's stream.
  box draw(std::int64_t height, std::int64_t width, philox_stream& rng) const {
    const double area = static_cast<double>(height) * static_cast<double>(width);
    const double lr0 = std::log(rmin_), lr1 = std::log(rmax_);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * (smin_ + (smax_ - smin_) * rng.uniform());
      const double aspect = std::exp(lr0 + (lr1 - lr0) * rng.uniform());
      const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * aspect)));
      const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / aspect)));
      if (w > 0 && w <= width && h > 0 && h <= height) {
        const auto y = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(height - h + 1)));
        const auto x = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(width - w + 1)));
        return {y, x, h, w};
      }
    }
    const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
    std::int64_t w = width, h = height;
    if (in_ratio < rmin_) h = std::lround(static_cast<double>(w) / rmin_);
    else if (in_ratio > rmax_) w = std::lround(static_cast<double>(h) * rmax_);
    // A ratio range far from the image's rounds a side to 0 (torchvision's crop is then empty and
    // its resize fails): one pixel at least.
    h = std::max<std::int64_t>(h, 1);
    w = std::max<std::int64_t>(w, 1);
    return {(height - h) / 2, (width - w) / 2, h, w};
  }
  std::int64_t size_;
  double smin_, smax_, rmin_, rmax_;
};

}  // namespace

std::shared_ptr<transform> make_random_resized_crop(std::int64_t size, double smin, double smax, double rmin, double rmax) {
  return std::make_shared<rrc_transform>(size, smin, smax, rmin, rmax);
}

void add_random_resized_crop_kinds(std::vector<transform_kind>& kinds) {
  // size[, scale min, max[, ratio min, max]]: 1, 3 or 5 arguments (checked in make).
  kinds.push_back({{"rrc", "random_resized_crop"}, 1, 5, "rrc(N[, scale min, max[, ratio min, max]])",
                   [](std::span<const double> a) {
                     if (a.size() != 1 && a.size() != 3 && a.size() != 5)
                       throw pinfeed::invalid_argument("rrc takes 1, 3 or 5 arguments (size[, scale min, max[, ratio min, "
                                                   "max]]), got " + std::to_string(a.size()));
                     return make_random_resized_crop(size_argument("rrc", a[0]), a.size() > 1 ? a[1] : 0.08,
                                                a.size() > 1 ? a[2] : 1.0, a.size() > 3 ? a[3] : 3.0 / 4.0,
                                                a.size() > 3 ? a[4] : 4.0 / 3.0);
                   }});
}

}  // namespace pinfeed::loaders
