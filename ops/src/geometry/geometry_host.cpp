// The affine warps of geometry.hpp, on the host: the header's statement, pixel by pixel (the
// coordinates once a pixel, then each channel).
#include "pinfeed/ops/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../augment/aug_math.hpp"
#include "pinfeed/runtime/detail/clones.hpp"
#include "warp_plan.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kDegToRad = kPi / 180.0;  // CPython's math.radians: x * (pi / 180)

void check(const char* op, const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels,
           std::optional<double> fill, const std::uint8_t* out) {
  if (channels != 1 && channels != 3)
    throw pinfeed::invalid_argument(std::string(op) + ": images of 1 or 3 channels, not " + std::to_string(channels));
  if (height < 0 || width < 0)
    throw pinfeed::invalid_argument(std::string(op) + ": a negative size " + std::to_string(height) + "x" +
                                    std::to_string(width));
  if (fill && !(*fill >= 0.0 && *fill <= 255.0))
    throw pinfeed::invalid_argument(std::string(op) + ": the fill must be in [0, 255], not " + std::to_string(*fill));
  if (height * width > 0 && (in == nullptr || out == nullptr)) throw pinfeed::invalid_argument(std::string(op) + ": a null image");
  if (height * width > 0 && in == out) throw pinfeed::invalid_argument(std::string(op) + ": the output must not be the input");
}

void check_finite(const char* op, const char* what, double v) {
  if (!std::isfinite(v)) throw pinfeed::invalid_argument(std::string(op) + ": " + what + " must be finite, not " + std::to_string(v));
}

using aug::to_u8_rne;

}  // namespace

std::array<double, 6> inverse_affine_matrix(double cx, double cy, double angle, double tx, double ty, double scale,
                                             double shear_x, double shear_y) {
  const double rot = angle * kDegToRad, sx = shear_x * kDegToRad, sy = shear_y * kDegToRad;
  const double cos_sy = std::cos(sy), tan_sx = std::tan(sx), rot_minus_sy = rot - sy;
  const double cx_plus_tx = cx + tx, cy_plus_ty = cy + ty;
  const double a = std::cos(rot_minus_sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot_minus_sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  std::array<double, 6> m{d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0};
  m[2] += cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty;
  m[5] += cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty;
  return m;
}

namespace {

/// An input image and how to sample it (the header's sampling and fill).
struct sampler {
  const std::uint8_t* in;
  std::int64_t height, width, c;
  std::optional<double> fill;
  float fw, fh, fill_v;

  /// Nearest: the pixel at (rne(iy), rne(ix)), else 0 or the fill (aug_math.hpp's, as the device's).
  PINFEED_INLINE void nearest(float ix, float iy, std::uint8_t* o) const {
    aug::nearest_sample({in, height, width, c, fill.has_value(), fill_v}, ix, iy, o);
  }
  /// Bilinear: the four corners' fused sum, corners outside counting 0; with a fill, the mask blend.
  PINFEED_INLINE void bilinear(float ix, float iy, std::uint8_t* o) const {
    aug::bilinear_sample({in, height, width, c, fill.has_value(), fill_v}, ix, iy, o);
  }
};

/// The nearest warp of one output row, `C` channels, a run of columns at a time: first each
/// column's source pixel (the same float arithmetic as warp_affine_u8's, vectorised by the
/// compiler; -1 where it falls outside), then the copies. Images under 2^31 pixels and 2^23 wide.
template <int C>
PINFEED_INLINE void nearest_row(const sampler& at, float A, float C_, float D, float F, float yB, float yE, float scale_x,
                                float scale_y, std::uint8_t* o) {
  constexpr std::int32_t kRun = 64;
  const auto width = static_cast<std::int32_t>(at.width);
  // j - (width - 1) / 2 is a multiple of 1/2 under 2^23: exact in float32 as in the double the
  // other loop rounds from.
  const float mid = static_cast<float>(width - 1) * 0.5f;
  const std::uint8_t fill = to_u8_rne(at.fill_v);
  const float last_x = at.fw - 1.0f, last_y = at.fh - 1.0f;
  std::int32_t src[kRun];
  for (std::int32_t j0 = 0; j0 < width; j0 += kRun) {
    const std::int32_t n = std::min(kRun, width - j0);
    // Branch-free, so the compiler vectorises it: the index is taken from the coordinates clamped
    // into the image (NaN to 0), and kept where they were inside.
    for (std::int32_t t = 0; t < n; ++t) {
      const float x = static_cast<float>(j0 + t) - mid;
      const float ix = std::fmaf(((x * A + yB) + C_) + 1.0f, scale_x, -0.5f);
      const float iy = std::fmaf(((x * D + yE) + F) + 1.0f, scale_y, -0.5f);
      const float rx = std::nearbyint(ix), ry = std::nearbyint(iy);
      const bool inside = (rx >= 0.0f) & (rx < at.fw) & (ry >= 0.0f) & (ry < at.fh);  // false for NaN too
      const float cx = rx > 0.0f ? (rx < last_x ? rx : last_x) : 0.0f, cy = ry > 0.0f ? (ry < last_y ? ry : last_y) : 0.0f;
      const std::int32_t k = static_cast<std::int32_t>(cy) * width + static_cast<std::int32_t>(cx);
      src[t] = inside ? k : -1;
    }
    for (std::int32_t t = 0; t < n; ++t, o += C) {
      if (src[t] < 0) {
        for (int k = 0; k < C; ++k) o[k] = fill;
        continue;
      }
      const std::uint8_t* p = at.in + static_cast<std::int64_t>(src[t]) * C;
      for (int k = 0; k < C; ++k) o[k] = p[k];
    }
  }
}

}  // namespace

PINFEED_FMA_CLONES void warp_affine_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels,
                    const std::array<double, 6>& matrix, interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check("affine", in, height, width, channels, fill, out);
  for (const double v : matrix) check_finite("affine", "the matrix", v);
  if (height * width == 0) return;
  // The grid's factors: theta over (w / 2, h / 2), in float32, and grid_sample's scaling.
  const auto g = warp::grid_of(matrix, height, width);
  const float A = g[0], B = g[1], C = g[2], D = g[3], E = g[4], F = g[5], scale_x = g[6], scale_y = g[7];
  const sampler at{in, height, width, channels, fill, static_cast<float>(width), static_cast<float>(height),
                   fill ? static_cast<float>(*fill) : 0.0f};
  const bool runs = mode == interpolation::nearest && height * width < (std::int64_t{1} << 31) && width < (std::int64_t{1} << 23);
  for (std::int64_t i = 0; i < height; ++i) {
    const float y = static_cast<float>(static_cast<double>(i) - static_cast<double>(height - 1) * 0.5);
    const float yB = y * B, yE = y * E;
    std::uint8_t* o = out + i * width * channels;
    if (runs) {
      if (channels == 3) nearest_row<3>(at, A, C, D, F, yB, yE, scale_x, scale_y, o);
      else nearest_row<1>(at, A, C, D, F, yB, yE, scale_x, scale_y, o);
      continue;
    }
    for (std::int64_t j = 0; j < width; ++j, o += channels) {
      float ix, iy;
      aug::grid_position(g.data(), height, width, i, j, ix, iy);
      if (mode == interpolation::nearest) at.nearest(ix, iy, o);
      else at.bilinear(ix, iy, o);
    }
  }
}

void affine_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double angle, double tx,
               double ty, double scale, double shear_x, double shear_y, interpolation mode, std::optional<double> fill,
               std::uint8_t* out) {
  for (const double v : {angle, tx, ty, shear_x, shear_y}) check_finite("affine", "every parameter", v);
  if (!(scale > 0.0) || !std::isfinite(scale))
    throw pinfeed::invalid_argument("affine: the scale must be finite and greater than 0, not " + std::to_string(scale));
  warp_affine_u8(in, height, width, channels, inverse_affine_matrix(0.0, 0.0, angle, tx, ty, scale, shear_x, shear_y), mode,
                 fill, out);
}

void rotate_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double angle,
               interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check("rotate", in, height, width, channels, fill, out);
  check_finite("rotate", "the angle", angle);
  if (height * width == 0) return;
  const std::int64_t c = channels;
  const auto px = static_cast<std::size_t>(c);
  const int quarters = warp::rotate_quarters(angle, height, width);
  if (quarters == 0) {
    std::memcpy(out, in, static_cast<std::size_t>(height * width) * px);
    return;
  }
  if (quarters == 2) {
    for (std::int64_t i = 0; i < height; ++i)
      for (std::int64_t j = 0; j < width; ++j)
        std::memcpy(out + (i * width + j) * c, in + ((height - 1 - i) * width + (width - 1 - j)) * c, px);
    return;
  }
  if (quarters > 0) {  // torch.rot90, a quarter counter-clockwise (or three), on a square image
    for (std::int64_t i = 0; i < height; ++i)
      for (std::int64_t j = 0; j < width; ++j) {
        const std::int64_t from = quarters == 1 ? j * width + (width - 1 - i) : (height - 1 - j) * width + i;
        std::memcpy(out + (i * width + j) * c, in + from * c, px);
      }
    return;
  }
  warp_affine_u8(in, height, width, channels, warp::rotate_matrix(angle), mode, fill, out);
}

void shear_x_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check_finite("shear_x", "the factor", factor);
  warp_affine_u8(in, height, width, channels, warp::shear_matrix(true, factor, height, width), mode, fill, out);
}

void shear_y_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check_finite("shear_y", "the factor", factor);
  warp_affine_u8(in, height, width, channels, warp::shear_matrix(false, factor, height, width), mode, fill, out);
}

void translate_x_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double pixels,
                    interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check_finite("translate_x", "the offset", pixels);
  warp_affine_u8(in, height, width, channels, warp::translate_matrix(true, pixels), mode, fill, out);
}

void translate_y_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double pixels,
                    interpolation mode, std::optional<double> fill, std::uint8_t* out) {
  check_finite("translate_y", "the offset", pixels);
  warp_affine_u8(in, height, width, channels, warp::translate_matrix(false, pixels), mode, fill, out);
}

}  // namespace pinfeed::ops
