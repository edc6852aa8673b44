#pragma once
// The arithmetic of the Gaussian blur (pinfeed/ops/blur.hpp states it), as functions the host op
// (blur_host.cpp), augment_batch_host and the blur kernel of augment.cu share: the taps of the
// 1-D kernel, in steps the device can take in parallel (each tap's exponent, the largest, each
// tap's exp, their sum in order, each tap over the sum), and one output sample of a blur job, the
// rows' sums then the column's in the order of the host op's two passes. Every float step is
// aug_math.hpp's, rounded to the nearest and never fused; the exp is pinfeed's own (double steps,
// then rounded to float), so the two sides compute the same taps.
#include <cstdint>

#include "aug_math.hpp"

namespace pinfeed::ops::aug {

/// The most taps a blur kernel has along an axis (gaussian_blur's sizes: odd, 1 to 1023).
inline constexpr int kMostBlurTaps = 1023;

#if defined(__CUDA_ARCH__)
PINFEED_AUG_HD double drne(double v) { return rint(v); }
#else
PINFEED_AUG_HD double drne(double v) { return std::nearbyint(v); }
#endif

/// A float below float's least normal (2^-126) as 0: no tap is subnormal, so a process that
/// flushes subnormals (a framework's flush-denormal mode) computes the same taps and sums.
PINFEED_AUG_HD float normal_or_zero(float v) { return v < 1.17549435e-38f && v > -1.17549435e-38f ? 0.0f : v; }

/// exp(v) for a float v <= 0, rounded to float: v = n ln 2 + r (n the nearest whole number to
/// v / ln 2, ln 2 in two parts whose first times n is exact), e^r by its series to r^14 (|r| <
/// 0.35: the next term is below 1e-18), times 2^n. A result below float's least normal is 0 (so
/// from v below about -87.3); NaN stays NaN.
PINFEED_AUG_HD float exp_float(float v) {
  if (v != v) return v;
  if (!(v > -110.0f)) return 0.0f;
  const double x = v;
  const double n = drne(dmul(x, 1.4426950408889634074));
  const double r = dadd(dadd(x, -dmul(n, 6.93147180369123816490e-01)), -dmul(n, 1.90821492927058770002e-10));
  constexpr double kInverseFactorial[15] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                            1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
                                            1.0 / 6227020800.0, 1.0 / 87178291200.0};
  double p = kInverseFactorial[14];
  for (int k = 13; k >= 0; --k) p = dadd(kInverseFactorial[k], dmul(r, p));
  const std::uint64_t scale_bits = static_cast<std::uint64_t>(1023 + static_cast<int>(n)) << 52;  // 2^n, n in -159..0
  double scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  return normal_or_zero(static_cast<float>(dmul(p, scale)));
}

/// Tap i's exponent of the kernel of `size` taps and float sigma `sigma`: -(x_i / sigma)^2, x_i
/// torch.linspace's point (blur.hpp).
PINFEED_AUG_HD float tap_exponent(int i, int size, float sigma) {
  const double lim = dquo(static_cast<double>(size - 1), dmul(2.0, dsqrt(2.0)));
  const float a = static_cast<float>(-lim), b = static_cast<float>(lim);
  const float step = size > 1 ? quo(sub(b, a), static_cast<float>(size - 1)) : 0.0f;
  const float x = i < size / 2 ? add(a, mul(step, static_cast<float>(i))) : sub(b, mul(step, static_cast<float>(size - 1 - i)));
  const float t = quo(x, sigma);
  return -mul(t, t);
}
/// The largest of v[0, n) (the first where they tie; std::max_element's).
PINFEED_AUG_HD float largest(const float* v, int n) {
  float top = v[0];
  for (int i = 1; i < n; ++i)
    if (top < v[i]) top = v[i];
  return top;
}
/// The float sum of v[0, n), in order from 0.
PINFEED_AUG_HD float sum_in_order(const float* v, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s = add(s, v[i]);
  return s;
}
/// The kernel's taps into v[0, size), one step after the other (the host's).
PINFEED_AUG_HD void blur_taps(int size, float sigma, float* v) {
  for (int i = 0; i < size; ++i) v[i] = tap_exponent(i, size, sigma);
  const float top = largest(v, size);
  for (int i = 0; i < size; ++i) v[i] = exp_float(sub(v[i], top));
  const float sum = sum_in_order(v, size);
  for (int i = 0; i < size; ++i) v[i] = normal_or_zero(quo(v[i], sum));
}

/// The reflected index of p in [0, n): -1 -> 1, n -> n - 2 (n larger than the kernel's reach).
PINFEED_AUG_HD std::int64_t reflect(std::int64_t p, std::int64_t n) { return p < 0 ? -p : p >= n ? 2 * (n - 1) - p : p; }

/// The blur job's kernel sizes: across (box[0]) and down (box[1]); its sigmas are r and rest.
PINFEED_AUG_HD int blur_kx(const aug_job& j) { return static_cast<int>(j.box[0]); }
PINFEED_AUG_HD int blur_ky(const aug_job& j) { return static_cast<int>(j.box[1]); }

/// Output pixel (y, x) of blur job j from its input `in` into o, with the taps wx (across) and wy
/// (down): for each channel, the column's sum over i of wy[i] times row (y + i - ry)'s sum over t
/// of wx[t] times its sample (x + t - rx), reflected, each sum from 0 in tap order; rounded to
/// the nearest and clamped to a sample.
PINFEED_AUG_HD void blur_pixel(const aug_job& j, const std::uint8_t* in, const float* wx, const float* wy, std::int64_t y,
                               std::int64_t x, std::uint8_t* o) {
  const int c = j.channels, kx = blur_kx(j), ky = blur_ky(j);
  const std::int64_t h = j.height, w = j.width, rx = kx / 2, ry = ky / 2;
  for (int k = 0; k < c; ++k) {
    float column = 0.0f;
    for (int i = 0; i < ky; ++i) {
      const std::uint8_t* row = in + reflect(y + i - ry, h) * w * c + k;
      float across = 0.0f;
      for (int t = 0; t < kx; ++t) across = add(across, mul(wx[t], static_cast<float>(row[reflect(x + t - rx, w) * c])));
      column = add(column, mul(wy[i], across));
    }
    o[k] = to_u8_rne(column);
  }
}

}  // namespace pinfeed::ops::aug
