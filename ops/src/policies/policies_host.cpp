// The policies' ops and tables of policies.hpp.
#include "pinfeed/ops/policies.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "pinfeed/ops/colour.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

const char* aug_op_name(aug_op op) {
  switch (op) {
    case aug_op::identity: return "identity";
    case aug_op::shear_x: return "shear_x";
    case aug_op::shear_y: return "shear_y";
    case aug_op::translate_x: return "translate_x";
    case aug_op::translate_y: return "translate_y";
    case aug_op::rotate: return "rotate";
    case aug_op::brightness: return "brightness";
    case aug_op::saturation: return "saturation";
    case aug_op::contrast: return "contrast";
    case aug_op::sharpness: return "sharpness";
    case aug_op::posterize: return "posterize";
    case aug_op::solarize: return "solarize";
    case aug_op::autocontrast: return "autocontrast";
    case aug_op::equalize: return "equalize";
    case aug_op::invert: return "invert";
  }
  return "?";
}

bool aug_op_signed(aug_op op) {
  switch (op) {
    case aug_op::shear_x:
    case aug_op::shear_y:
    case aug_op::translate_x:
    case aug_op::translate_y:
    case aug_op::rotate:
    case aug_op::brightness:
    case aug_op::saturation:
    case aug_op::contrast:
    case aug_op::sharpness: return true;
    default: return false;
  }
}

float torch_linspace_at(double start, double end, int n, int i) {
  if (n < 1 || i < 0 || i >= n)
    throw pinfeed::invalid_argument("linspace: entry " + std::to_string(i) + " of " + std::to_string(n));
  const float a = static_cast<float>(start), b = static_cast<float>(end);
  if (n == 1) return a;
  const float step = (b - a) / static_cast<float>(n - 1);
  return i < n / 2 ? std::fmaf(step, static_cast<float>(i), a) : std::fmaf(-step, static_cast<float>(n - 1 - i), b);
}

float magnitude_table::at(int bins, int bin, std::int64_t height, std::int64_t width) const {
  if (bins < 1 || bin < 0 || bin >= bins)
    throw pinfeed::invalid_argument("policy table: bin " + std::to_string(bin) + " of " + std::to_string(bins));
  switch (type) {
    case kind::none: return 0.0f;
    case kind::linspace: {
      const double e = by == scale::width ? end * static_cast<double>(width) : by == scale::height ? end * static_cast<double>(height) : end;
      return torch_linspace_at(start, e, bins, bin);
    }
    case kind::posterize: {
      const float divisor = static_cast<float>(static_cast<double>(bins - 1) / start);
      const float v = 8.0f - static_cast<float>(bin) / divisor;
      return std::nearbyint(v);
    }
  }
  return 0.0f;
}

magnitude_table policy_table(policy_family family, aug_op op) {
  using k = magnitude_table::kind;
  using s = magnitude_table::scale;
  const bool wide = family == policy_family::trivial_augment_wide;
  switch (op) {
    case aug_op::shear_x:
    case aug_op::shear_y: return {k::linspace, 0.0, wide ? 0.99 : 0.3};
    case aug_op::translate_x: return wide ? magnitude_table{k::linspace, 0.0, 32.0} : magnitude_table{k::linspace, 0.0, 150.0 / 331.0, s::width};
    case aug_op::translate_y: return wide ? magnitude_table{k::linspace, 0.0, 32.0} : magnitude_table{k::linspace, 0.0, 150.0 / 331.0, s::height};
    case aug_op::rotate: return {k::linspace, 0.0, wide ? 135.0 : 30.0};
    case aug_op::brightness:
    case aug_op::saturation:
    case aug_op::contrast:
    case aug_op::sharpness: return {k::linspace, 0.0, wide ? 0.99 : 0.9};
    case aug_op::posterize: return {k::posterize, wide ? 6.0 : 4.0, 0.0};
    case aug_op::solarize: return {k::linspace, 1.0, 0.0};
    default: return {};
  }
}

void apply_aug_op_u8(aug_op op, double m, const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels,
                     interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  const std::int64_t pixels = height * width;
  switch (op) {
    case aug_op::identity:
      if (channels != 1 && channels != 3)
        throw pinfeed::invalid_argument("identity: images of 1 or 3 channels, not " + std::to_string(channels));
      if (pixels > 0) std::memcpy(out, in, static_cast<std::size_t>(pixels * channels));
      return;
    case aug_op::shear_x: return shear_x_u8(in, height, width, channels, m, mode, fill, out);
    case aug_op::shear_y: return shear_y_u8(in, height, width, channels, m, mode, fill, out);
    case aug_op::translate_x: return translate_x_u8(in, height, width, channels, m, mode, fill, out);
    case aug_op::translate_y: return translate_y_u8(in, height, width, channels, m, mode, fill, out);
    case aug_op::rotate: return rotate_u8(in, height, width, channels, m, mode, fill, out);
    case aug_op::brightness: return brightness_u8(in, pixels, channels, 1.0 + m, out);
    case aug_op::saturation: return saturation_u8(in, pixels, channels, 1.0 + m, out);
    case aug_op::contrast: return contrast_u8(in, pixels, channels, 1.0 + m, out);
    case aug_op::sharpness: return sharpness_u8(in, height, width, channels, 1.0 + m, out);
    case aug_op::posterize: return posterize_u8(in, pixels, channels, static_cast<int>(m), out);
    case aug_op::solarize: return solarize_u8(in, pixels, channels, 255.0 * m, out);
    case aug_op::autocontrast: return autocontrast_u8(in, pixels, channels, out);
    case aug_op::equalize: return equalize_u8(in, pixels, channels, out);
    case aug_op::invert: return invert_u8(in, pixels, channels, out);
  }
}

}  // namespace pinfeed::ops
