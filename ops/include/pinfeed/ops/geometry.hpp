#pragma once
/// @file geometry.hpp
/// pinfeed's affine warps on 8-bit images (rows of pixels, 1 or 3 samples a pixel, packed):
/// torchvision.transforms.v2.functional's affine, rotate and the auto-augment policies' shear and
/// translate on a uint8 tensor on the CPU, stated here. f32 rounds to float32 (ties to even);
/// fma(a, b, c) = a b + c rounded once (std::fmaf); every other step one float32 operation.
///
/// - The matrix (torchvision's _get_inverse_affine_matrix, in double, Python's order): rot =
///   angle (pi / 180), sx, sy likewise from the shears; a = cos(rot - sy) / cos(sy), b = -(a tan(sx)
///   + sin(rot)), c = sin(rot - sy) / cos(sy), d = cos(rot) - c tan(sx); m = [d / s, -b / s, 0,
///   -c / s, a / s, 0] (s the scale); m2 += (cx - m0 (cx + tx)) - m1 (cy + ty), m5 += (cy - m3 (cx
///   + tx)) - m4 (cy + ty), with (cx, cy) the centre relative to the image's middle. m maps an
///   output position to an input one, both relative to the middle: a positive angle turns the
///   picture clockwise in affine; rotate passes -angle (counter-clockwise).
/// - The grid (torchvision's _affine_grid): t = f32(m); A = f32(t0 / f32(w / 2)), B, C likewise
///   from t1, t2; D, E, F from t3, t4, t5 over f32(h / 2). For output pixel (i, j): x = j - (w - 1)
///   / 2, y = i - (h - 1) / 2 (exact), gx = f32(f32(x A) + f32(y B)) + C, gy likewise with D, E, F.
/// - Sampling (PyTorch's grid_sample, zeros padding, align_corners false, as its AVX2 and AVX512
///   kernels compute it): ix = fma(gx + 1, w / 2, -0.5), iy = fma(gy + 1, h / 2, -0.5).
///   nearest: the pixel at (rne(iy), rne(ix)), 0 outside the image. bilinear: x0 = floor(ix),
///   y0 = floor(iy), u = ix - x0, e = 1 - u, n = iy - y0, s = 1 - n; weights nw = s e, ne = s u,
///   sw = n e, se = n u; v = fma(p_se, se, fma(p_sw, sw, fma(p_ne, ne, p_nw nw))), a corner
///   outside the image counting 0.
/// - Fill (torchvision's mask trick), only where one is given: the mask k is the same sum over the
///   corners inside the image with p = 1 (nearest: 1 inside, 0 outside); nearest: k < 0.5 gives
///   the fill; bilinear: v = f32(f32(v - fill) k) + fill. Without a fill, outside is 0 (bilinear
///   blends the border toward 0).
/// - Out: rne(v), then to uint8 (clamped to [0, 255]).
/// - rotate first takes the angle modulo 360 as Python does (in [0, 360)); then 0 copies, 180
///   turns the image over, and on a square image 90 and 270 turn it a quarter (torch.rot90):
///   exact, as torchvision's fast paths. Every other angle takes the grid.
/// - shear_x(f): affine(0, 0, 0, 1, degrees(atan(f)), 0) about the top-left corner; shear_y(f)
///   likewise with the second shear; translate_x(p): affine(0, trunc(p), 0, 1, 0, 0) about the
///   middle, translate_y likewise: the policies' ShearX, ShearY, TranslateX and TranslateY.

#include <array>
#include <cstdint>
#include <optional>

namespace pinfeed::ops {

enum class interpolation { nearest, bilinear };

/// torchvision's inverse affine matrix (above); (cx, cy) relative to the image's middle.
[[nodiscard]] std::array<double, 6> inverse_affine_matrix(double cx, double cy, double angle, double tx, double ty,
                                                          double scale, double shear_x, double shear_y);

/// Each takes height x width pixels of `channels` (1 or 3) at `in` and writes as many to `out`,
/// which must not overlap `in`. `fill`: none (outside is 0, as torchvision's None) or a value in
/// [0, 255] for every channel. Throws std::invalid_argument naming a bad value: channels, a
/// negative size, a scale not > 0, a fill outside [0, 255], a non-finite number, or `out` == `in`.
void warp_affine_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels,
                    const std::array<double, 6>& matrix, interpolation mode, std::optional<double> fill, std::uint8_t* out);
void affine_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double angle, double tx,
               double ty, double scale, double shear_x, double shear_y, interpolation mode, std::optional<double> fill,
               std::uint8_t* out);
void rotate_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double angle,
               interpolation mode, std::optional<double> fill, std::uint8_t* out);
void shear_x_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                interpolation mode, std::optional<double> fill, std::uint8_t* out);
void shear_y_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                interpolation mode, std::optional<double> fill, std::uint8_t* out);
void translate_x_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double pixels,
                    interpolation mode, std::optional<double> fill, std::uint8_t* out);
void translate_y_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double pixels,
                    interpolation mode, std::optional<double> fill, std::uint8_t* out);

}  // namespace pinfeed::ops
