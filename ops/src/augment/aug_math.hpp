#pragma once
// The arithmetic of the augmentations (colour.hpp, histogram.hpp, geometry.hpp), as functions the
// host ops, augment_batch_host and the kernels of augment.cu share: one output pixel of a job
// from its input, and the tables of the histogram ops. Every float32 step is one operation rounded
// to the nearest (ties to even), never fused: the device spells each with its _rn intrinsic, the
// host files that include this are compiled with -ffp-contract=off.
#include <cmath>
#include <cstdint>

#include "pinfeed/ops/augment.hpp"

#if defined(__USE_FAST_MATH__)
#error "the augmentations' arithmetic must be IEEE (no --use_fast_math): the device must give the host's bits"
#endif

#if defined(__CUDACC__)
#define PINFEED_AUG_HD __host__ __device__ __forceinline__
#else
#define PINFEED_AUG_HD __attribute__((always_inline)) inline
#endif

namespace pinfeed::ops::aug {

#if defined(__CUDA_ARCH__)
PINFEED_AUG_HD float mul(float a, float b) { return __fmul_rn(a, b); }
PINFEED_AUG_HD float add(float a, float b) { return __fadd_rn(a, b); }
PINFEED_AUG_HD float sub(float a, float b) { return __fsub_rn(a, b); }
PINFEED_AUG_HD float quo(float a, float b) { return __fdiv_rn(a, b); }
PINFEED_AUG_HD float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
PINFEED_AUG_HD float rne(float v) { return rintf(v); }
PINFEED_AUG_HD float flo(float v) { return floorf(v); }
PINFEED_AUG_HD float chop(float v) { return truncf(v); }
#else
PINFEED_AUG_HD float mul(float a, float b) { return a * b; }
PINFEED_AUG_HD float add(float a, float b) { return a + b; }
PINFEED_AUG_HD float sub(float a, float b) { return a - b; }
PINFEED_AUG_HD float quo(float a, float b) { return a / b; }
PINFEED_AUG_HD float fma(float a, float b, float c) { return std::fmaf(a, b, c); }
PINFEED_AUG_HD float rne(float v) { return std::nearbyint(v); }
PINFEED_AUG_HD float flo(float v) { return std::floor(v); }
PINFEED_AUG_HD float chop(float v) { return std::trunc(v); }
#endif
/// fmod(v, 1) for |v| < 2^23 (hue's, whose values stay under 2): v - trunc(v) is exact there, so
/// it is fmod's value (a zero's sign aside, which no later step sees). Not fmodf: its device
/// version is a loop of approximations the simulator's PTX does not take.
PINFEED_AUG_HD float mod1(float v) { return sub(v, chop(v)); }

/// An unsigned 64-bit integer to float32, rounded to the nearest (ties to even), in integer steps:
/// what static_cast<float> gives, spelled out because the simulator's PTX converts 64-bit integers
/// wrongly (it reads an unset register).
PINFEED_AUG_HD float u64_to_float(std::uint64_t v) {
  if (v < (std::uint64_t{1} << 24)) return static_cast<float>(static_cast<std::uint32_t>(v));  // exact
#if defined(__CUDA_ARCH__)
  const int top = 63 - __clzll(static_cast<long long>(v));
#else
  const int top = 63 - __builtin_clzll(v);
#endif
  int shift = top - 23;  // the bits below a 24-bit significand
  std::uint64_t m = v >> shift;
  const std::uint64_t rest = v & ((std::uint64_t{1} << shift) - 1), half = std::uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (m & 1) != 0)) ++m;
  if (m == (std::uint64_t{1} << 24)) {
    m >>= 1;
    ++shift;
  }
  const std::uint32_t scale_bits = static_cast<std::uint32_t>(127 + shift) << 23;  // 2^shift, shift in 1..40
  float scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  return static_cast<float>(static_cast<std::uint32_t>(m)) * scale;  // exact: a power of two
}

/// v clamped to [lo, hi]; NaN (a warp's grid past float's range) gives lo, on both sides alike.
/// The double steps of normal_noise, each rounded to the nearest, never fused.
#if defined(__CUDA_ARCH__)
PINFEED_AUG_HD double dmul(double a, double b) { return __dmul_rn(a, b); }
PINFEED_AUG_HD double dadd(double a, double b) { return __dadd_rn(a, b); }
PINFEED_AUG_HD double dquo(double a, double b) { return __ddiv_rn(a, b); }
PINFEED_AUG_HD double dsqrt(double a) { return __dsqrt_rn(a); }
PINFEED_AUG_HD int top_bit(std::uint64_t v) { return 63 - __clzll(static_cast<long long>(v)); }
#else
PINFEED_AUG_HD double dmul(double a, double b) { return a * b; }
PINFEED_AUG_HD double dadd(double a, double b) { return a + b; }
PINFEED_AUG_HD double dquo(double a, double b) { return a / b; }
PINFEED_AUG_HD double dsqrt(double a) { return std::sqrt(a); }
PINFEED_AUG_HD int top_bit(std::uint64_t v) { return 63 - __builtin_clzll(v); }
#endif

/// log(n / 2^32) for n in [1, 2^32]: n = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s)
/// with s = (m - 1) / (m + 1), |s| < 0.1716, as its series to s^23 (the next term is below 1e-19).
PINFEED_AUG_HD double log_fraction(std::uint64_t n) {
  int e = top_bit(n);
  // n / 2^e, exact: two 16-bit halves as doubles (the simulator converts 64-bit integers wrongly).
  const double whole = dadd(dmul(static_cast<double>(static_cast<std::uint32_t>(n >> 16)), 65536.0),
                            static_cast<double>(static_cast<std::uint32_t>(n & 0xFFFFu)));
  const std::uint64_t scale_bits = static_cast<std::uint64_t>(1023 - e) << 52;  // 2^-e, e in 0..32
  double scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  double m = dmul(whole, scale);
  if (m > 1.4142135623730951) {
    m = dmul(m, 0.5);
    ++e;
  }
  const double s = dquo(dadd(m, -1.0), dadd(m, 1.0)), s2 = dmul(s, s);
  double series = dquo(1.0, 23.0);
  for (int k = 21; k >= 1; k -= 2) series = dadd(dquo(1.0, static_cast<double>(k)), dmul(s2, series));
  return dadd(dmul(static_cast<double>(e - 32), 0.69314718055994530942), dmul(dmul(2.0, s), series));
}

/// cos(2 pi b / 2^32): the quadrant from the top two bits, the rest as an angle t in [0, pi/4]
/// (exactly: the quarter's bits are an integer), cos t or sin t by their series to t^20 and t^21.
PINFEED_AUG_HD double cos_turn(std::uint32_t b) {
  const std::uint32_t quadrant = b >> 30, f = b & 0x3FFFFFFFu;
  const bool past_eighth = f > (1u << 29);  // cos(pi/2 - t) = sin t
  const double t = dmul(static_cast<double>(past_eighth ? (1u << 30) - f : f), 6.283185307179586 / 4294967296.0);
  const double t2 = dmul(t, t);
  // cos t = 1 + t^2 (kCos[0] + t^2 (kCos[1] + ...)), sin t = t + t^3 (kSin[0] + t^2 (...)), Horner
  constexpr double kCos[10] = {-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600,
                               -1.0 / 87178291200.0, 1.0 / 20922789888000.0, -1.0 / 6402373705728000.0,
                               1.0 / 2432902008176640000.0};
  constexpr double kSin[10] = {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800, 1.0 / 6227020800.0,
                               -1.0 / 1307674368000.0, 1.0 / 355687428096000.0, -1.0 / 121645100408832000.0,
                               1.0 / 51090942171709440000.0};
  double c = kCos[9], sn = kSin[9];
  for (int k = 8; k >= 0; --k) {
    c = dadd(kCos[k], dmul(t2, c));
    sn = dadd(kSin[k], dmul(t2, sn));
  }
  const double cos_t = dadd(1.0, dmul(t2, c)), sin_t = dadd(t, dmul(dmul(t, t2), sn));
  const double cos_theta = past_eighth ? sin_t : cos_t, sin_theta = past_eighth ? cos_t : sin_t;  // theta = 2 pi f / 2^32
  switch (quadrant) {
    case 0: return cos_theta;
    case 1: return -sin_theta;
    case 2: return -cos_theta;
    default: return sin_theta;
  }
}

/// normal_noise of augment.hpp.
PINFEED_AUG_HD float box_muller(std::uint32_t a, std::uint32_t b) {
  const double radius = dsqrt(dmul(-2.0, log_fraction(std::uint64_t{a} + 1)));
  return static_cast<float>(dmul(radius, cos_turn(b)));
}

/// Word `i` of the erase job's noise stream (philox_stream::word_at of it).
PINFEED_AUG_HD std::uint32_t noise_word(const aug_job& j, std::uint64_t i) {
  const philox_block ctr{{static_cast<std::uint32_t>(i >> 2), j.noise_counter[0], j.noise_counter[1], j.noise_counter[2]}};
  return philox4x32_10(ctr, j.noise_key[0], j.noise_key[1]).v[i & 3];
}

/// Whether (y, x) lies in the erase job's box.
PINFEED_AUG_HD bool in_box(const aug_job& j, std::int64_t y, std::int64_t x) {
  const std::int64_t top = j.box[0], left = j.box[1];
  return y >= top && y < top + j.box[2] && x >= left && x < left + j.box[3];
}
/// The erase job's noise for channel k of (y, x) in its box: value n of the box (row by row,
/// channel by channel) takes words first + 2n and first + 2n + 1.
PINFEED_AUG_HD float erase_noise(const aug_job& j, std::int64_t y, std::int64_t x, int k) {
  const std::uint64_t n = (static_cast<std::uint64_t>(y - j.box[0]) * j.box[3] + static_cast<std::uint64_t>(x - j.box[1])) * j.channels +
                          static_cast<std::uint64_t>(k);
  const std::uint64_t w = j.noise_first + 2 * n;
  return box_muller(noise_word(j, w), noise_word(j, w + 1));
}
/// Value n of a float image's erase box, whose sides are the box's (HWC or CHW): its place in the
/// image and its value.
PINFEED_AUG_HD void erase_float_value(const aug_job& j, std::uint64_t n, bool chw, float* image) {
  const std::uint64_t bw = j.box[3], c = j.channels;
  std::uint64_t yy, xx, k;
  if (chw) {  // n counts channel by channel, then rows: the writes of a row run along memory
    k = n / (std::uint64_t{j.box[2]} * bw);
    const std::uint64_t in_plane = n % (std::uint64_t{j.box[2]} * bw);
    yy = in_plane / bw;
    xx = in_plane % bw;
  } else {
    k = n % c;
    yy = n / c / bw;
    xx = n / c % bw;
  }
  const std::uint64_t y = j.box[0] + yy, x = j.box[1] + xx;
  const std::uint64_t at = chw ? (k * j.height + y) * j.width + x : (y * j.width + x) * c + k;
  image[at] = j.has_fill ? j.grid[k] : erase_noise(j, static_cast<std::int64_t>(y), static_cast<std::int64_t>(x), static_cast<int>(k));
}

PINFEED_AUG_HD float clamp(float v, float lo, float hi) { return !(v >= lo) ? lo : (hi < v ? hi : v); }
/// A float to a sample: clamped to [0, 255], then truncated (the colour ops).
PINFEED_AUG_HD std::uint8_t to_u8(float v) { return static_cast<std::uint8_t>(static_cast<int>(clamp(v, 0.0f, 255.0f))); }
/// A float to a sample: rounded to the nearest (ties to even), clamped (the warps).
PINFEED_AUG_HD std::uint8_t to_u8_rne(float v) { return static_cast<std::uint8_t>(static_cast<int>(clamp(rne(v), 0.0f, 255.0f))); }

/// grey(p) of colour.hpp, a float.
PINFEED_AUG_HD float grey(const std::uint8_t* p) {
  return fma(static_cast<float>(p[2]), 0.114f, fma(static_cast<float>(p[1]), 0.587f, mul(static_cast<float>(p[0]), 0.2989f)));
}
/// blend(x, o, r) of colour.hpp with f32(r) and f32(1 - r).
PINFEED_AUG_HD std::uint8_t blend(std::uint8_t x, float other, float r, float rest) {
  return to_u8(fma(other, rest, mul(static_cast<float>(x), r)));
}
/// sharpness's sample from its 3 x 3 neighbourhood sum S (centre weighed 5) and the sample x.
PINFEED_AUG_HD std::uint8_t sharpen(int sum, std::uint8_t x, float rest) {
  const int b = (2 * sum + 13) / 26;
  const float fx = static_cast<float>(x);
  return to_u8(fma(sub(static_cast<float>(b), fx), rest, fx));
}
/// hue's pixel (colour.hpp): `in` and `out` 3 samples each (may be the same).
PINFEED_AUG_HD void hue_pixel(const std::uint8_t* in, float shift, std::uint8_t* out) {
  const float to_unit = static_cast<float>(1.0 / 255.0), sixth = static_cast<float>(1.0 / 6.0);
  const float to_u8_scale = static_cast<float>(255.999);
  const float r = mul(static_cast<float>(in[0]), to_unit), g = mul(static_cast<float>(in[1]), to_unit),
              b = mul(static_cast<float>(in[2]), to_unit);
  const float hi = r > (g > b ? g : b) ? r : (g > b ? g : b), lo = r < (g < b ? g : b) ? r : (g < b ? g : b);
  const bool eq = hi == lo;
  const float s = quo(sub(hi, lo), eq ? 1.0f : hi);
  const float d = eq ? 1.0f : sub(hi, lo);
  const float rc = quo(sub(hi, r), d), gc = quo(sub(hi, g), d), bc = quo(sub(hi, b), d);
  const float hg = hi == g && hi != r ? sub(add(rc, 2.0f), bc) : 0.0f;
  const float hr = hi == r ? sub(bc, gc) : 0.0f;
  const float hb = hi != r && hi != g ? sub(add(gc, 4.0f), rc) : 0.0f;
  float h = mod1(add(mul(add(add(hr, hg), hb), sixth), 1.0f));
  h = mod1(add(h, shift));
  if (h < 0.0f) h = add(h, 1.0f);  // torch.remainder: the divisor's sign
  const float h6 = mul(h, 6.0f), whole = flo(h6), f = sub(h6, whole);
  const int sector = static_cast<int>(whole) % 6;
  const float sf = mul(s, f), u = sub(1.0f, s), v = hi;
  const float vpqt[4] = {v, clamp(mul(u, v), 0.0f, 1.0f), clamp(mul(sub(1.0f, sf), v), 0.0f, 1.0f),
                         clamp(mul(add(sf, u), v), 0.0f, 1.0f)};
  constexpr int kSelect[3][6] = {{0, 2, 1, 1, 3, 0}, {3, 0, 0, 2, 1, 1}, {1, 1, 3, 0, 0, 2}};
  for (int c = 0; c < 3; ++c) out[c] = static_cast<std::uint8_t>(static_cast<int>(mul(vpqt[kSelect[c][sector]], to_u8_scale)));
}
/// autocontrast's table entry for sample x of a channel with extremes lo, hi.
PINFEED_AUG_HD std::uint8_t autocontrast_entry(int x, int lo, int hi) {
  if (lo >= hi) return static_cast<std::uint8_t>(x);
  const float inv = mul(static_cast<float>(hi - lo), static_cast<float>(1.0 / 255.0));
  return to_u8(quo(sub(static_cast<float>(x), static_cast<float>(lo)), inv));
}
/// equalize's table of a channel from its 256 counts over `pixels` pixels.
template <class Count>
PINFEED_AUG_HD void equalize_table(const Count* hist, std::uint64_t pixels, std::uint8_t* lut) {
  int top = 255;
  while (top > 0 && hist[top] == 0) --top;
  // (In 32 bits where it fits, as it always does on the device: the simulator's PTX has no 64-bit
  // multiply-high, which a 64-bit division by 255 compiles to.)
  const std::uint64_t rest = pixels - static_cast<std::uint64_t>(hist[top]);
  const std::uint64_t step = rest < (std::uint64_t{1} << 32) ? static_cast<std::uint32_t>(rest) / 255u : rest / 255;
  std::uint64_t cum = 0;
  for (int x = 0; x < 256; ++x) {
    if (step == 0) {
      lut[x] = static_cast<std::uint8_t>(x);
      continue;
    }
    const std::uint64_t v = (cum + step / 2) / step;
    lut[x] = static_cast<std::uint8_t>(x == 0 ? 0 : (v < 255 ? v : 255));
    cum += static_cast<std::uint64_t>(hist[x]);
  }
}
/// contrast's mean: f32(f32(S) / f32(N)).
PINFEED_AUG_HD float contrast_mean(std::uint64_t sum, std::uint64_t pixels) {
  return quo(u64_to_float(sum), u64_to_float(pixels));
}

/// The warps' sampling of `in` (height x width x c) at (ix, iy), into o (geometry.hpp).
struct warp_input {
  const std::uint8_t* in;
  std::int64_t height, width, c;
  bool has_fill;
  float fill;
};
PINFEED_AUG_HD void nearest_sample(const warp_input& w, float ix, float iy, std::uint8_t* o) {
  const float rx = rne(ix), ry = rne(iy);
  const float fw = static_cast<float>(static_cast<std::int32_t>(w.width)), fh = static_cast<float>(static_cast<std::int32_t>(w.height));
  if (rx >= 0.0f && rx < fw && ry >= 0.0f && ry < fh) {  // false for NaN too
    const std::uint8_t* p =
        w.in + (std::int64_t{static_cast<std::int32_t>(ry)} * w.width + std::int64_t{static_cast<std::int32_t>(rx)}) * w.c;
    for (std::int64_t k = 0; k < w.c; ++k) o[k] = p[k];
    return;
  }
  const std::uint8_t f = to_u8_rne(w.fill);  // 0 without a fill
  for (std::int64_t k = 0; k < w.c; ++k) o[k] = f;
}
PINFEED_AUG_HD float weigh(float p_nw, float p_ne, float p_sw, float p_se, float nw, float ne, float sw, float se) {
  return fma(p_se, se, fma(p_sw, sw, fma(p_ne, ne, mul(p_nw, nw))));
}
PINFEED_AUG_HD void bilinear_sample(const warp_input& w, float ix, float iy, std::uint8_t* o) {
  const float fw = static_cast<float>(static_cast<std::int32_t>(w.width)), fh = static_cast<float>(static_cast<std::int32_t>(w.height));
  const float x0 = flo(ix), y0 = flo(iy);
  const float u = sub(ix, x0), e = sub(1.0f, u), n = sub(iy, y0), s = sub(1.0f, n);
  const float nw = mul(s, e), ne = mul(s, u), sw = mul(n, e), se = mul(n, u);
  // Inside tested as floats (a coordinate far outside is no index); where any corner is inside,
  // x0 is in [-1, width) and y0 in [-1, height).
  const bool x0_in = x0 >= 0.0f && x0 < fw, x1_in = x0 >= -1.0f && add(x0, 1.0f) < fw;
  const bool y0_in = y0 >= 0.0f && y0 < fh, y1_in = y0 >= -1.0f && add(y0, 1.0f) < fh;
  const bool in_nw = y0_in && x0_in, in_ne = y0_in && x1_in, in_sw = y1_in && x0_in, in_se = y1_in && x1_in;
  const bool any = in_nw || in_ne || in_sw || in_se;
  const std::int64_t xi = any ? std::int64_t{static_cast<std::int32_t>(x0)} : 0, yi = any ? std::int64_t{static_cast<std::int32_t>(y0)} : 0;
  const float mask = w.has_fill ? weigh(in_nw ? 1.0f : 0.0f, in_ne ? 1.0f : 0.0f, in_sw ? 1.0f : 0.0f, in_se ? 1.0f : 0.0f,
                                        nw, ne, sw, se)
                                : 1.0f;
  for (std::int64_t k = 0; k < w.c; ++k) {
    const auto at = [&](bool inside, std::int64_t yy, std::int64_t xx) {
      return inside ? static_cast<float>(w.in[(yy * w.width + xx) * w.c + k]) : 0.0f;
    };
    float v = weigh(at(in_nw, yi, xi), at(in_ne, yi, xi + 1), at(in_sw, yi + 1, xi), at(in_se, yi + 1, xi + 1), nw, ne, sw, se);
    if (w.has_fill) v = add(mul(sub(v, w.fill), mask), w.fill);
    o[k] = to_u8_rne(v);
  }
}
/// The grid's input position of output pixel (i, j) (geometry.hpp): g = {A, B, C, D, E, F, w / 2, h / 2}.
PINFEED_AUG_HD void grid_position(const float* g, std::int64_t height, std::int64_t width, std::int64_t i, std::int64_t j,
                                  float& ix, float& iy) {
  // j - (w - 1) / 2 is a multiple of 1/2 under 2^22: exact in float32 (sides under 2^22, checked),
  // as in the double geometry.hpp states it.
  // (Through 32-bit integers: the simulator's PTX converts 64-bit ones to float wrongly.)
  const float x = sub(static_cast<float>(static_cast<std::int32_t>(j)), mul(static_cast<float>(static_cast<std::int32_t>(width - 1)), 0.5f));
  const float y = sub(static_cast<float>(static_cast<std::int32_t>(i)), mul(static_cast<float>(static_cast<std::int32_t>(height - 1)), 0.5f));
  ix = fma(add(add(add(mul(x, g[0]), mul(y, g[1])), g[2]), 1.0f), g[6], -0.5f);
  iy = fma(add(add(add(mul(x, g[3]), mul(y, g[4])), g[5]), 1.0f), g[7], -0.5f);
}

/// What a round counts of an image whose job needs it: equalize's and autocontrast's histograms
/// (autocontrast's extremes are its least and greatest counted values), contrast's sum.
struct image_counts {
  std::uint32_t hist[3][256];
  unsigned long long sum;
};
/// The tables a job reads, made from its counts.
struct image_tables {
  std::uint8_t lut[3][256];
  float mean;
};
PINFEED_AUG_HD bool needs_counts(aug_kind k) {
  return k == aug_kind::contrast || k == aug_kind::autocontrast || k == aug_kind::equalize;
}
PINFEED_AUG_HD bool needs_histogram(aug_kind k) { return k == aug_kind::autocontrast || k == aug_kind::equalize; }
/// contrast's per-pixel term: floor(grey(p)), or the sample of a grey image.
PINFEED_AUG_HD std::uint32_t contrast_term(const std::uint8_t* p, int channels) {
  return channels == 1 ? p[0] : static_cast<std::uint32_t>(flo(grey(p)));
}
PINFEED_AUG_HD void make_tables(const aug_job& j, const image_counts& n, image_tables& t) {
  const std::uint64_t pixels = std::uint64_t{j.height} * j.width;
  if (j.kind == aug_kind::contrast) t.mean = pixels > 0 ? contrast_mean(n.sum, pixels) : 0.0f;
  for (int c = 0; c < j.channels; ++c) {
    if (j.kind == aug_kind::equalize) equalize_table(n.hist[c], pixels, t.lut[c]);
    if (j.kind == aug_kind::autocontrast) {
      int lo = 0, hi = 255;
      while (lo < 255 && n.hist[c][lo] == 0) ++lo;
      while (hi > 0 && n.hist[c][hi] == 0) --hi;
      for (int x = 0; x < 256; ++x) t.lut[c][x] = autocontrast_entry(x, lo, hi);  // none counted: lo > hi, as it is
    }
  }
}

/// A warp's output pixel (y, x) of job j from its input image `in`, into o.
PINFEED_AUG_HD void warp_pixel(const aug_job& j, const std::uint8_t* in, std::int64_t y, std::int64_t x, std::uint8_t* o) {
  float ix, iy;
  grid_position(j.grid, j.height, j.width, y, x, ix, iy);
  const warp_input at{in, j.height, j.width, j.channels, j.has_fill != 0, j.fill};
  if (j.bilinear) bilinear_sample(at, ix, iy, o);
  else nearest_sample(at, ix, iy, o);
}
/// A quarter turn's output pixel (y, x) (j.mask quarters counter-clockwise: torch.rot90's).
PINFEED_AUG_HD void turn_pixel(const aug_job& j, const std::uint8_t* in, std::int64_t y, std::int64_t x, std::uint8_t* o) {
  const std::int64_t h = j.height, w = j.width, c = j.channels;
  const std::int64_t from = j.mask == 2 ? (h - 1 - y) * w + (w - 1 - x) : j.mask == 1 ? x * w + (w - 1 - y) : (h - 1 - x) * w + y;
  for (std::int64_t k = 0; k < c; ++k) o[k] = in[from * c + k];
}
/// sharpness's pixel inside the border: `s` its input pixel (its neighbours around it), o its output.
PINFEED_AUG_HD void sharpen_pixel(const aug_job& j, const std::uint8_t* s, std::uint8_t* o) {
  const int c = j.channels;
  const std::uint64_t row = std::uint64_t{j.width} * static_cast<std::uint64_t>(c);
  for (int k = 0; k < c; ++k) {
    const std::uint8_t* m = s + k;
    const std::uint8_t* up = m - row;
    const std::uint8_t* dn = m + row;
    const int sum = up[-c] + up[0] + up[c] + m[-c] + 5 * m[0] + m[c] + dn[-c] + dn[0] + dn[c];
    o[k] = sharpen(sum, m[0], j.rest);
  }
}

/// Output pixel `p` (row-major) of job j: from its input image `in` into its output image `out`.
PINFEED_AUG_HD void apply_pixel(const aug_job& j, const std::uint8_t* in, const image_tables& t, std::uint64_t p,
                                std::uint8_t* out) {
  const int c = j.channels;
  const std::int64_t h = j.height, w = j.width;
  const std::int64_t y = static_cast<std::int64_t>(p / j.width), x = static_cast<std::int64_t>(p % j.width);
  const std::uint8_t* s = in + p * static_cast<std::uint64_t>(c);
  std::uint8_t* o = out + p * static_cast<std::uint64_t>(c);
  switch (j.kind) {
    case aug_kind::warp: return warp_pixel(j, in, y, x, o);
    case aug_kind::turn: return turn_pixel(j, in, y, x, o);
    case aug_kind::brightness:
      for (int k = 0; k < c; ++k) o[k] = to_u8(mul(static_cast<float>(s[k]), j.r));
      return;
    case aug_kind::saturation: {
      if (c == 1) break;
      const float g = flo(grey(s));
      for (int k = 0; k < 3; ++k) o[k] = blend(s[k], g, j.r, j.rest);
      return;
    }
    case aug_kind::contrast:
      for (int k = 0; k < c; ++k) o[k] = blend(s[k], t.mean, j.r, j.rest);
      return;
    case aug_kind::sharpness:
      if (h <= 2 || w <= 2 || y == 0 || x == 0 || y == h - 1 || x == w - 1) break;  // the border as it is
      return sharpen_pixel(j, s, o);
    case aug_kind::posterize:
      for (int k = 0; k < c; ++k) o[k] = s[k] & j.mask;
      return;
    case aug_kind::solarize:
      for (int k = 0; k < c; ++k) o[k] = static_cast<float>(s[k]) >= j.r ? static_cast<std::uint8_t>(255 - s[k]) : s[k];
      return;
    case aug_kind::autocontrast:
    case aug_kind::equalize:
      for (int k = 0; k < c; ++k) o[k] = t.lut[k][s[k]];
      return;
    case aug_kind::invert:
      for (int k = 0; k < c; ++k) o[k] = static_cast<std::uint8_t>(255 - s[k]);
      return;
    case aug_kind::hue:
      hue_pixel(s, j.r, o);
      return;
    case aug_kind::erase: {
      if (!in_box(j, y, x)) break;
      // the noise into uint8 truncated toward zero, modulo 256 (|noise| < 10: an int holds it)
      for (int k = 0; k < c; ++k) o[k] = j.has_fill ? j.value[k] : static_cast<std::uint8_t>(static_cast<int>(erase_noise(j, y, x, k)) & 0xFF);
      return;
    }
    case aug_kind::grayscale: {
      if (c == 1) break;
      const auto v = static_cast<std::uint8_t>(static_cast<int>(grey(s)));  // trunc, no clamp
      o[0] = o[1] = o[2] = v;
      return;
    }
    default: break;
  }
  for (int k = 0; k < c; ++k) o[k] = s[k];  // copy, and the ops' pixels left as they are
}

}  // namespace pinfeed::ops::aug
