#pragma once
// What the warps of geometry.hpp decide before the pixels, shared by geometry_host.cpp and the
// augmentation jobs (augment_host.cpp): each op's inverse matrix, Python's angle modulo and the
// grid's float32 factors.
#include <array>
#include <cmath>
#include <cstdint>

#include "pinfeed/ops/geometry.hpp"

namespace pinfeed::ops::warp {

constexpr double kRadToDeg = 180.0 / 3.141592653589793;  // math.degrees

/// Python's float modulo 360: the result in [0, 360) with the divisor's sign (-9 -> 351).
inline double python_mod_360(double a) {
  double r = std::fmod(a, 360.0);
  if (r != 0.0 && r < 0.0) r += 360.0;
  return r == 0.0 ? 0.0 : r;
}

/// The grid's factors of `m` for an image of height x width (geometry.hpp): A, B, C over f32(w / 2),
/// D, E, F over f32(h / 2), then grid_sample's f32(w) / 2 and f32(h) / 2.
inline std::array<float, 8> grid_of(const std::array<double, 6>& m, std::int64_t height, std::int64_t width) {
  const float half_w = static_cast<float>(0.5 * static_cast<double>(width));
  const float half_h = static_cast<float>(0.5 * static_cast<double>(height));
  return {static_cast<float>(m[0]) / half_w, static_cast<float>(m[1]) / half_w, static_cast<float>(m[2]) / half_w,
          static_cast<float>(m[3]) / half_h, static_cast<float>(m[4]) / half_h, static_cast<float>(m[5]) / half_h,
          static_cast<float>(width) / 2.0f, static_cast<float>(height) / 2.0f};
}

/// The policies' shears (a factor, about the top-left corner) and translations (truncated pixels).
inline std::array<double, 6> shear_matrix(bool along_x, double factor, std::int64_t height, std::int64_t width) {
  const double cx = 0.0 - static_cast<double>(width) * 0.5, cy = 0.0 - static_cast<double>(height) * 0.5;
  const double degrees = std::atan(factor) * kRadToDeg;
  return inverse_affine_matrix(cx, cy, 0.0, 0.0, 0.0, 1.0, along_x ? degrees : 0.0, along_x ? 0.0 : degrees);
}
inline std::array<double, 6> translate_matrix(bool along_x, double pixels) {
  const double t = std::trunc(pixels);
  return inverse_affine_matrix(0.0, 0.0, 0.0, along_x ? t : 0.0, along_x ? 0.0 : t, 1.0, 0.0, 0.0);
}

/// How rotate_u8 turns an image by `angle` degrees counter-clockwise: quarter turns where exact
/// (0: a copy; 2: 180 degrees; 1 and 3 on a square image), else -1 (the grid, by rotate_matrix).
inline int rotate_quarters(double angle, std::int64_t height, std::int64_t width) {
  const double a = python_mod_360(angle);
  if (a == 0.0) return 0;
  if (a == 180.0) return 2;
  if (height == width && a == 90.0) return 1;
  if (height == width && a == 270.0) return 3;
  return -1;
}
inline std::array<double, 6> rotate_matrix(double angle) {
  return inverse_affine_matrix(0.0, 0.0, -python_mod_360(angle), 0.0, 0.0, 1.0, 0.0, 0.0);
}

}  // namespace pinfeed::ops::warp
