// RandomCrop and CenterCrop.
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

class crop_transform final : public transform {
 public:
  crop_transform(std::int64_t size, bool random) : size_(size), random_(random) {
    if (size <= 0)
      throw pinfeed::invalid_argument(std::string(random ? "crop" : "center_crop") + ": size must be positive, got " +
                                  std::to_string(size));
  }
  std::string name() const override {
    return std::string(random_ ? "crop(" : "center_crop(") + std::to_string(size_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (in.fixed() && (in.height < size_ || in.width < size_))
      throw pinfeed::invalid_argument(name() + ": input " + shape_text(in) + " is smaller than the crop");
    return {size_, size_, in.channels, in.type};
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    if (in.spec.height < size_ || in.spec.width < size_)
      throw pinfeed::runtime_error(name() + ": image " + std::to_string(in.spec.height) + "x" +
                               std::to_string(in.spec.width) + " is smaller than the crop");
    const auto w = *window(in.spec.height, in.spec.width, rng);
    copy_window(in, out, w.window.y, w.window.x);
  }
  std::optional<window_plan> window(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    if (height < size_ || width < size_) return std::nullopt;  // apply() reports it
    std::int64_t y0 = (height - size_) / 2, x0 = (width - size_) / 2;
    if (random_) {
      y0 = rng.below(static_cast<std::uint32_t>(height - size_ + 1));
      x0 = rng.below(static_cast<std::uint32_t>(width - size_ + 1));
    }
    return window_plan{{y0, x0, size_, size_}, size_, size_};
  }

 private:
  std::int64_t size_;
  bool random_;
};

}  // namespace

std::shared_ptr<transform> make_random_crop(std::int64_t size) { return std::make_shared<crop_transform>(size, true); }
std::shared_ptr<transform> make_center_crop(std::int64_t size) { return std::make_shared<crop_transform>(size, false); }

void add_crop_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"crop", "random_crop"}, 1, 1, "crop(N)",
                   [](std::span<const double> a) { return make_random_crop(size_argument("crop", a[0])); }});
  kinds.push_back({{"center_crop"}, 1, 1, "center_crop(N)",
                   [](std::span<const double> a) { return make_center_crop(size_argument("center_crop", a[0])); }});
}

}  // namespace pinfeed::loaders
