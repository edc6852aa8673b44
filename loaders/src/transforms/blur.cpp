// The blur step: gaussian_blur (pinfeed/ops/blur.hpp states its arithmetic, torchvision v2's on
// uint8 tensors).
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/blur.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

/// A kernel size from the text (odd, 1..1023), argument `index` where it is not one.
int kernel_size(double k, std::size_t index) {
  if (!(k >= 1.0 && k <= 1023.0) || k != std::floor(k) || std::fmod(k, 2.0) != 1.0)
    throw bad_transform_argument(index, "gaussian_blur: the kernel size must be an odd whole number from 1 to 1023, got " +
                                            format_number(k));
  return static_cast<int>(k);
}

/// Whether a sigma > 0 stays so as the float32 the kernel is computed with (neither 0 nor past float's range).
bool float_sigma(double s) { return static_cast<float>(s) > 0.0f && std::isfinite(static_cast<float>(s)); }

/// A sigma from the text (> 0, or 0 for torchvision's default 0.15 k + 0.35, in double).
double sigma_for(double s, int k, std::size_t index) {
  if (!std::isfinite(s) || s < 0.0 || (s == 0.0 && std::signbit(s)) || (s > 0.0 && !float_sigma(s)))
    throw bad_transform_argument(index, "gaussian_blur: sigma must be greater than 0 and a float32's (or 0 for torchvision's default "
                                        "0.15 k + 0.35), got " + format_number(s));
  return s > 0.0 ? s : k * 0.15 + 0.35;
}

/// The blur's device job on a uint8 image (none for other types).
std::optional<std::vector<ops::aug_job>> blur_jobs(const image_spec& in, int kx, int ky, double sx, double sy) {
  if (in.type != dtype::u8) return std::nullopt;
  return std::vector<ops::aug_job>{ops::blur_job(kx, ky, sx, sy, static_cast<std::uint32_t>(in.height),
                                                 static_cast<std::uint32_t>(in.width), static_cast<int>(in.channels))};
}

class gaussian_blur_transform final : public transform {
 public:
  gaussian_blur_transform(int kx, int ky, double sx, double sy) : kx_(kx), ky_(ky), sx_(sx), sy_(sy) {}
  std::string name() const override {
    if (kx_ == ky_ && sx_ == sy_) return "gaussian_blur(" + std::to_string(kx_) + "," + format_number(sx_) + ")";
    return "gaussian_blur(" + std::to_string(kx_) + "," + format_number(sx_) + "," + std::to_string(ky_) + "," +
           format_number(sy_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    // Each size that is known (a negative one is not: a variable-size dataset) is checked.
    if ((in.width >= 0 && kx_ / 2 >= in.width) || (in.height >= 0 && ky_ / 2 >= in.height))
      throw pinfeed::invalid_argument(name() + ": the image must be wider than " + std::to_string(kx_ / 2) +
                                      " and taller than " + std::to_string(ky_ / 2) + " pixels (the reflected border), input is " +
                                      shape_text(in));
    return in;
  }
  bool in_place() const override { return true; }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream) const override {
    return blur_jobs(in, kx_, ky_, sx_, sy_);
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    ops::gaussian_blur_u8(in.as<std::uint8_t>(), in.spec.height, in.spec.width, in.spec.channels, kx_, ky_, sx_, sy_,
                          out.as<std::uint8_t>());
  }

 private:
  int kx_ = 1, ky_ = 1;
  double sx_ = 0, sy_ = 0;
};

/// GaussianBlur(kernel, (smin, smax)): each sample's sigma drawn from [smin, smax], both axes.
class random_gaussian_blur_transform final : public transform {
 public:
  random_gaussian_blur_transform(int k, double smin, double smax) : k_(k), smin_(smin), smax_(smax) {}
  std::string name() const override {
    return "random_gaussian_blur(" + std::to_string(k_) + "," + format_number(smin_) + "," + format_number(smax_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    return gaussian_blur_transform(k_, k_, smin_, smin_).output_spec(in);
  }
  bool in_place() const override { return true; }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    const double sigma = uniform_between(rng, smin_, smax_);
    return blur_jobs(in, k_, k_, sigma, sigma);
  }
  std::string explain(const image_spec&, philox_stream rng) const override {
    return "gaussian_blur(" + std::to_string(k_) + "," + format_double(uniform_between(rng, smin_, smax_)) + ")";
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const double sigma = uniform_between(rng, smin_, smax_);
    ops::gaussian_blur_u8(in.as<std::uint8_t>(), in.spec.height, in.spec.width, in.spec.channels, k_, k_, sigma, sigma,
                          out.as<std::uint8_t>());
  }

 private:
  int k_;
  double smin_, smax_;
};

}  // namespace

std::shared_ptr<transform> make_random_gaussian_blur(int kernel, double sigma_min, double sigma_max) {
  const int k = kernel_size(kernel, 0);
  if (!(sigma_min > 0.0) || !float_sigma(sigma_min))
    throw bad_transform_argument(1, "random_gaussian_blur: sigma's least must be greater than 0 and a float32's, got " + format_number(sigma_min));
  if (!(sigma_max >= sigma_min) || !float_sigma(sigma_max))
    throw bad_transform_argument(2, "random_gaussian_blur: sigma's greatest must be finite and at least its least, got " +
                                        format_number(sigma_max));
  return std::make_shared<random_gaussian_blur_transform>(k, sigma_min, sigma_max);
}

std::shared_ptr<transform> make_gaussian_blur(int kx, int ky, double sx, double sy) {
  const int x = kernel_size(kx, 0), y = kernel_size(ky, 0);
  return std::make_shared<gaussian_blur_transform>(x, y, sigma_for(sx, x, 1), sigma_for(sy, y, 1));
}

void add_blur_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"gaussian_blur"}, 1, 4, "gaussian_blur(KERNEL[, SIGMA]) or gaussian_blur(KX, SX, KY, SY)",
                   [](std::span<const double> a) -> std::shared_ptr<transform> {
                     if (a.size() == 3)
                       throw bad_transform_argument(2, "gaussian_blur: a kernel and a sigma, or both per axis (KX, SX, KY, SY): "
                                                       "1, 2 or 4 numbers, not 3");
                     const int kx = kernel_size(a[0], 0);
                     const double sx = sigma_for(a.size() > 1 ? a[1] : 0.0, kx, 1);
                     if (a.size() < 4) return std::make_shared<gaussian_blur_transform>(kx, kx, sx, sx);
                     const int ky = kernel_size(a[2], 2);
                     return std::make_shared<gaussian_blur_transform>(kx, ky, sx, sigma_for(a[3], ky, 3));
                   }});
  kinds.push_back({{"random_gaussian_blur"}, 1, 3, "random_gaussian_blur(KERNEL[, SIGMA_MIN, SIGMA_MAX])",
                   [](std::span<const double> a) {
                     if (a.size() == 2) throw bad_transform_argument(1, "random_gaussian_blur: both sigma's least and greatest, or neither");
                     return make_random_gaussian_blur(kernel_size(a[0], 0), a.size() > 1 ? a[1] : 0.1, a.size() > 2 ? a[2] : 2.0);
                   }});
}

}  // namespace pinfeed::loaders
