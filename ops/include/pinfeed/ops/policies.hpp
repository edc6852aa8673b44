#pragma once
/// @file policies.hpp
/// The auto-augment policies' ops and magnitude tables (torchvision.transforms.v2's
/// TrivialAugmentWide, RandAugment and AutoAugment, _apply_image_or_video_transform), on 8-bit
/// images of 1 or 3 channels:
///
/// - An op at magnitude m (a double: a float32 table entry, negated where the policy drew the
///   sign): identity; shear_x(m), shear_y(m), translate_x(m), translate_y(m), rotate(m) (geometry.hpp,
///   with the policy's interpolation and fill); brightness, saturation ("Color"), contrast and
///   sharpness at the factor 1 + m (colour.hpp); posterize(int(m)); solarize(255 m);
///   autocontrast, equalize, invert.
/// - Signed (the sign drawn whenever the op has a table, bin 0 too): the shears, translations,
///   rotate, brightness, saturation, contrast, sharpness.
/// - Tables: torch.linspace(a, b, n) in float32 as PyTorch's vectorised CPU kernel computes it:
///   step = f32((f32(b) - f32(a)) / (n - 1)), entry i = fma(step, i, f32(a)) for i < n / 2, else
///   fma(-step, n - 1 - i, f32(b)); posterize's f32(8 - f32(i / f32((n - 1) / k))) rounded to the
///   nearest (ties to even), k = 6 (TrivialAugmentWide) or 4; an end of 150 / 331 W (or H) is that
///   product in double.

#include <array>
#include <cstdint>
#include <optional>

#include "pinfeed/ops/geometry.hpp"

namespace pinfeed::ops {

enum class aug_op : std::uint8_t {
  identity, shear_x, shear_y, translate_x, translate_y, rotate, brightness, saturation, contrast, sharpness,
  posterize, solarize, autocontrast, equalize, invert
};
inline constexpr int kAugOps = 15;

/// Its pipeline spelling's name ("shear_x", "saturation", ...).
[[nodiscard]] const char* aug_op_name(aug_op op);
/// Whether a policy draws the op's sign.
[[nodiscard]] bool aug_op_signed(aug_op op);

/// Entry i of torch.linspace(start, end, n) in float32 (above); n >= 1, 0 <= i < n.
[[nodiscard]] float torch_linspace_at(double start, double end, int n, int i);

/// A policy's table for one op: none (the op takes no magnitude), a linspace from `start` to
/// `end` (times the image's width or height where `by` says so), or posterize's bits with divisor
/// denominator `start` (6 or 4).
struct magnitude_table {
  enum class kind : std::uint8_t { none, linspace, posterize } type = kind::none;
  double start = 0, end = 0;
  enum class scale : std::uint8_t { none, width, height } by = scale::none;
  /// Entry `bin` of `bins` for an image of height x width.
  [[nodiscard]] float at(int bins, int bin, std::int64_t height, std::int64_t width) const;
};

/// The tables of TrivialAugmentWide, RandAugment and AutoAugment (AutoAugment's: RandAugment's at 10 bins).
enum class policy_family : std::uint8_t { trivial_augment_wide, rand_augment, auto_augment };
[[nodiscard]] magnitude_table policy_table(policy_family family, aug_op op);

/// Applies `op` at magnitude `m` (above) to height x width pixels of `channels` at `in`, into
/// `out` (which must not overlap `in`). Throws std::invalid_argument as the op it calls.
void apply_aug_op_u8(aug_op op, double m, const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels,
                     interpolation mode, std::optional<double> fill, std::uint8_t* out);

}  // namespace pinfeed::ops
