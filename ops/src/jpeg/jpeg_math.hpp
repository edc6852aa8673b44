#pragma once
// libjpeg-turbo's arithmetic after the entropy decoder, as functions the host reference and the
// device kernels share (pinfeed/ops/jpeg_planes.hpp says what each follows).

#include <cstdint>

#include "pinfeed/ops/detail/jpeg_compact.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD

namespace pinfeed::ops::jpeg {

/// check_jpeg_batch, which reads the quantization tables' steps only where `tables_here` (the
/// device version has them in device memory; their count and indexes are checked all the same).
void check_batch(const jpeg_batch_view& b, std::uint64_t out_bytes, std::uint64_t scratch_bytes, bool tables_here);
/// What unpack_jpeg_blocks_device checks before it queues anything: no null pointer where there
/// are blocks (in a CPU-only build too).
void check_unpack_call(const std::uint8_t* bytes, std::uint64_t size, const std::uint32_t* starts, std::uint64_t block_count,
                       const std::int16_t* blocks, const std::uint32_t* malformed);
/// What decode_jpeg_batch_device checks before it queues anything (in a CPU-only build too).
void check_device_call(const jpeg_batch_view& device, const jpeg_image* host_images, std::uint64_t out_bytes,
                       std::uint64_t scratch_bytes);

/// The natural (row-major) index of zigzag position z (0..63), as JPEG orders coefficients.
PINFEED_HD std::uint8_t natural_of(int z) {
  constexpr std::uint8_t order[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                      12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                      35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                      58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  return order[z];
}

// The accurate integer IDCT's constants: cosines in 13-bit fixed point, and the bits kept between
// the column pass and the row pass.
constexpr int kConstBits = 13;
constexpr int kPass1Bits = 2;
constexpr std::int32_t k0_298631336 = 2446, k0_390180644 = 3196, k0_541196100 = 4433, k0_765366865 = 6270,
                       k0_899976223 = 7373, k1_175875602 = 9633, k1_501321110 = 12299, k1_847759065 = 15137,
                       k1_961570560 = 16069, k2_053119869 = 16819, k2_562915447 = 20995, k3_072711026 = 25172;

/// x / 2^n rounded half up (an arithmetic shift after adding half).
PINFEED_HD std::int64_t descale(std::int64_t x, int n) { return (x + (std::int64_t{1} << (n - 1))) >> n; }

/// The eight outputs of one 1-D pass before descaling, in output order 0..7. Like libjpeg's C code
/// on 64-bit Linux (its JLONG is long), the pass computes in 64 bits: no product of a crafted
/// file's coefficients overflows.
struct pass_sums {
  std::int64_t v[8];
};

/// One 1-D pass of the IDCT (the Loeffler-Ligtenberg-Moschytz butterfly libjpeg uses) on s0..s7.
PINFEED_HD pass_sums idct_pass(std::int64_t s0, std::int64_t s1, std::int64_t s2, std::int64_t s3, std::int64_t s4,
                               std::int64_t s5, std::int64_t s6, std::int64_t s7) {
  // Even part.
  const std::int64_t z1e = (s2 + s6) * k0_541196100;
  const std::int64_t e2 = z1e + s6 * -k1_847759065;
  const std::int64_t e3 = z1e + s2 * k0_765366865;
  const std::int64_t e0 = (s0 + s4) * (std::int64_t{1} << kConstBits);
  const std::int64_t e1 = (s0 - s4) * (std::int64_t{1} << kConstBits);
  const std::int64_t t10 = e0 + e3, t13 = e0 - e3, t11 = e1 + e2, t12 = e1 - e2;
  // Odd part.
  const std::int64_t z5 = (s7 + s3 + s5 + s1) * k1_175875602;
  const std::int64_t z1 = (s7 + s1) * -k0_899976223, z2 = (s5 + s3) * -k2_562915447;
  const std::int64_t z3 = (s7 + s3) * -k1_961570560 + z5, z4 = (s5 + s1) * -k0_390180644 + z5;
  const std::int64_t o0 = s7 * k0_298631336 + z1 + z3, o1 = s5 * k2_053119869 + z2 + z4;
  const std::int64_t o2 = s3 * k3_072711026 + z2 + z3, o3 = s1 * k1_501321110 + z1 + z4;
  return {{t10 + o3, t11 + o2, t12 + o1, t13 + o0, t13 - o0, t12 - o1, t11 - o2, t10 - o3}};
}

/// libjpeg's post-IDCT range limit: the 10 low bits of x (the value before the +128 level shift)
/// index a table that is x + 128 on [-128, 127], 255 on [128, 511], 0 on [-512, -129], and repeats
/// every 1024.
PINFEED_HD std::uint8_t range_limit(std::int64_t x) {
  const std::int32_t v = static_cast<std::int32_t>(x & 1023);
  return static_cast<std::uint8_t>(v < 128 ? v + 128 : v < 512 ? 255 : v < 896 ? 0 : v - 896);
}

/// Dequantizes block `coef` with table `q` and writes its 8x8 samples at `out` (rows `stride` apart).
PINFEED_HD void idct_islow(const std::int16_t* coef, const std::uint16_t* q, std::uint8_t* out, std::uint32_t stride) {
  std::int32_t ws[64];
  for (int c = 0; c < 8; ++c) {  // columns: dequantize, transform, keep kPass1Bits more bits
    std::int64_t s[8];
    for (int r = 0; r < 8; ++r) s[r] = static_cast<std::int64_t>(coef[r * 8 + c]) * q[r * 8 + c];
    const pass_sums p = idct_pass(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    // The workspace is int, as libjpeg's: the low 32 bits of the descaled sum.
    for (int r = 0; r < 8; ++r) ws[r * 8 + c] = static_cast<std::int32_t>(static_cast<std::uint32_t>(descale(p.v[r], kConstBits - kPass1Bits)));
  }
  for (int r = 0; r < 8; ++r) {  // rows: transform, remove the scaling (and the 8 of the 2-D DCT), limit
    const std::int32_t* w = ws + r * 8;
    const pass_sums p = idct_pass(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
    for (int c = 0; c < 8; ++c) out[r * stride + c] = range_limit(descale(p.v[c], kConstBits + kPass1Bits + 3));
  }
}

// The reduced IDCTs' constants (libjpeg's jidctred.c), 13-bit like the ones above.
constexpr std::int32_t k0_211164243 = 1730, k0_509795579 = 4176, k0_601344887 = 4926, k0_720959822 = 5906,
                       k0_850430095 = 6967, k1_061594337 = 8697, k1_272758580 = 10426, k1_451774981 = 11893,
                       k2_172734803 = 17799, k3_624509785 = 29692;

/// One 1-D pass of a reduced IDCT on s[0..7] (a column of coefficients or a row between the
/// passes), before descaling: N = 4 (a 1/2 decode's 4 outputs; s[4] is not read) or N = 2 (a 1/4
/// decode's 2; s[2], s[4], s[6] are not read). libjpeg computes in JLONG (64 bits) here too.
template <int N>
PINFEED_HD void reduced_pass(const std::int64_t* s, std::int64_t* out) {
  if constexpr (N == 4) {
    const std::int64_t e0 = s[0] * (std::int64_t{1} << (kConstBits + 1));
    const std::int64_t e2 = s[2] * k1_847759065 + s[6] * -k0_765366865;
    const std::int64_t t10 = e0 + e2, t12 = e0 - e2;
    const std::int64_t o0 = s[7] * -k0_211164243 + s[5] * k1_451774981 + s[3] * -k2_172734803 + s[1] * k1_061594337;
    const std::int64_t o2 = s[7] * -k0_509795579 + s[5] * -k0_601344887 + s[3] * k0_899976223 + s[1] * k2_562915447;
    out[0] = t10 + o2;
    out[1] = t12 + o0;
    out[2] = t12 - o0;
    out[3] = t10 - o2;
  } else {
    static_assert(N == 2);
    const std::int64_t e = s[0] * (std::int64_t{1} << (kConstBits + 2));
    const std::int64_t o = s[7] * -k0_720959822 + s[5] * k0_850430095 + s[3] * -k1_272758580 + s[1] * k3_624509785;
    out[0] = e + o;
    out[1] = e - o;
  }
}

/// The bits a reduced pass descales by beyond the accurate IDCT's (its outputs are sums of 8/N
/// samples' worth): 1 for N = 4, 2 for N = 2.
template <int N>
constexpr int kReducedBits = N == 4 ? 1 : 2;

/// The values between a reduced IDCT's passes, as libjpeg keeps them (int: the low 32 bits of the
/// descaled sums), row r of N at ws[r * 8 + column]; columns its second pass does not read are
/// computed all the same (their values are never used).
template <int N>
PINFEED_HD void reduced_columns(const std::int16_t* coef, const std::uint16_t* q, std::int64_t* ws) {
  for (int c = 0; c < 8; ++c) {
    std::int64_t s[8], p[N];
    for (int r = 0; r < 8; ++r) s[r] = static_cast<std::int64_t>(coef[r * 8 + c]) * q[r * 8 + c];
    reduced_pass<N>(s, p);
    for (int r = 0; r < N; ++r)
      ws[r * 8 + c] = static_cast<std::int32_t>(static_cast<std::uint32_t>(descale(p[r], kConstBits - kPass1Bits + kReducedBits<N>)));
  }
}

/// Row r of a reduced IDCT's second pass: its N samples before the range limit.
template <int N>
PINFEED_HD void reduced_row(const std::int64_t* ws, int r, std::int64_t* samples) {
  std::int64_t p[N];
  reduced_pass<N>(ws + r * 8, p);
  for (int c = 0; c < N; ++c) samples[c] = descale(p[c], kConstBits + kPass1Bits + 3 + kReducedBits<N>);
}

/// libjpeg's reduced IDCT of a 1/2 (N = 4) or 1/4 (N = 2) decode: block `coef` dequantized with
/// `q` into N x N samples at `out` (rows `stride` apart). Its shortcuts for all-zero AC terms give
/// what the full computation gives, so there are none here.
template <int N>
PINFEED_HD void idct_reduced(const std::int16_t* coef, const std::uint16_t* q, std::uint8_t* out, std::uint32_t stride) {
  std::int64_t ws[8 * N];
  reduced_columns<N>(coef, q, ws);
  for (int r = 0; r < N; ++r) {
    std::int64_t v[N];
    reduced_row<N>(ws, r, v);
    for (int c = 0; c < N; ++c) out[r * stride + c] = range_limit(v[c]);
  }
}

/// libjpeg's 1x1 "IDCT" of a 1/8 decode: the dequantized DC / 8, rounded, range-limited.
PINFEED_HD std::uint8_t idct_1x1(const std::int16_t* coef, const std::uint16_t* q) {
  return range_limit(descale(static_cast<std::int64_t>(coef[0]) * q[0], 3));
}

/// The IDCT of size `n` (8, 4, 2 or 1) of one block into n x n samples at `out`.
PINFEED_HD void idct(int n, const std::int16_t* coef, const std::uint16_t* q, std::uint8_t* out, std::uint32_t stride) {
  if (n == 8) idct_islow(coef, q, out, stride);
  else if (n == 4) idct_reduced<4>(coef, q, out, stride);
  else if (n == 2) idct_reduced<2>(coef, q, out, stride);
  else out[0] = idct_1x1(coef, q);
}

/// ceil(full x n / d) in 64 bits: a size at a scale, as libjpeg's jdiv_round_up gives it.
PINFEED_HD std::uint32_t scaled_extent(std::uint64_t full, std::uint64_t n, std::uint64_t d) {
  return static_cast<std::uint32_t>((full * n + d - 1) / d);
}

/// A component's plane as the upsampler sees it: its stored samples (pw wide, the first at sample
/// (ox, oy) of the whole component), the real samples (dw x dh of them: the image's size at the
/// component's sampling and scale), the factors to the image's pixels (fh, fv), and whether libjpeg
/// filters (fancy: not in a 1/8 decode). Coordinates are the whole component's; the batch's
/// checks make sure every sample read is stored.
struct plane_view {
  const std::uint8_t* p;
  std::uint32_t pw, dw, dh, fh, fv, ox, oy;
  bool fancy;
  PINFEED_HD std::int32_t at(std::uint32_t x, std::int32_t y) const {  // rows past the edges repeat it
    const std::int32_t row = y < 0 ? 0 : y >= static_cast<std::int32_t>(dh) ? static_cast<std::int32_t>(dh) - 1 : y;
    return p[static_cast<std::uint64_t>(row - static_cast<std::int32_t>(oy)) * pw + (x - ox)];
  }
};

/// The component's value at image pixel (x, y), upsampled as libjpeg does: where it filters, h2v1
/// and h2v2 "fancy" (triangle) filters where the component is more than 2 samples wide and h1v2
/// fancy always; replication for every other case.
PINFEED_HD std::int32_t upsampled(const plane_view& c, std::uint32_t x, std::uint32_t y) {
  if (c.fh == 1 && c.fv == 1) return c.at(x, static_cast<std::int32_t>(y));
  if (!c.fancy) return c.at(x / c.fh, static_cast<std::int32_t>(y / c.fv));
  const std::uint32_t i = x / 2;
  const std::int32_t r = static_cast<std::int32_t>(y / 2), other = (y % 2 == 0) ? r - 1 : r + 1;
  if (c.fh == 2 && c.fv == 1 && c.dw > 2) {
    const std::int32_t yy = static_cast<std::int32_t>(y);
    if (x % 2 == 0) return i == 0 ? c.at(0, yy) : (c.at(i, yy) * 3 + c.at(i - 1, yy) + 1) >> 2;
    return i == c.dw - 1 ? c.at(i, yy) : (c.at(i, yy) * 3 + c.at(i + 1, yy) + 2) >> 2;
  }
  if (c.fh == 2 && c.fv == 2 && c.dw > 2) {
    const auto col = [&](std::uint32_t k) { return c.at(k, r) * 3 + c.at(k, other); };
    if (x % 2 == 0) return i == 0 ? (col(0) * 4 + 8) >> 4 : (col(i) * 3 + col(i - 1) + 8) >> 4;
    return i == c.dw - 1 ? (col(i) * 4 + 7) >> 4 : (col(i) * 3 + col(i + 1) + 7) >> 4;
  }
  if (c.fh == 1 && c.fv == 2) return (c.at(x, r) * 3 + c.at(x, other) + (y % 2 == 0 ? 1 : 2)) >> 2;
  return c.at(x / c.fh, static_cast<std::int32_t>(y / c.fv));
}

/// A sample clamped to 0..255.
PINFEED_HD std::uint8_t clamp_sample(std::int32_t v) { return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

/// libjpeg's YCbCr -> RGB: R = Y + 1.402 Cr', B = Y + 1.772 Cb' (each rounded in 16-bit fixed
/// point), G = Y + (-0.34414 Cb' - 0.71414 Cr' + 1/2) >> 16, with Cb' = Cb - 128, Cr' = Cr - 128.
PINFEED_HD void ycc_to_rgb(std::int32_t y, std::int32_t cb, std::int32_t cr, std::uint8_t* rgb) {
  cb -= 128;
  cr -= 128;
  constexpr std::int32_t half = 1 << 15;
  rgb[0] = clamp_sample(y + ((91881 * cr + half) >> 16));
  rgb[1] = clamp_sample(y + ((-22554 * cb + half - 46802 * cr) >> 16));
  rgb[2] = clamp_sample(y + ((116130 * cb + half) >> 16));
}

/// What is wrong with a packed block, where unpack_block stopped.
enum class unpack_error : std::uint8_t {
  none,
  ends_inside_block,  ///< no end byte
  bad_byte,           ///< low nibble 8, but neither the end nor 16 zeros
  index_past_63,
  zeros_before_end,   ///< 16 zeros right before the end byte
  ends_inside_wide,   ///< a 2-byte value cut short
  wide_fits_nibble,   ///< a 2-byte value within +-7 (or 0)
};
struct unpack_result {
  unpack_error error;
  std::uint64_t at;    ///< the byte after the block, or where it went wrong
  std::int32_t value;  ///< the byte, index or value that was wrong
};

/// Unpacks one block of the compact form (jpeg_planes.hpp) from bytes[begin, end) into `block`
/// (64 int16, natural order; zero where the block names nothing, and all zero when it is
/// malformed). The host's unpack and the device's share it, so both accept exactly the same data.
PINFEED_HD unpack_result unpack_block(const std::uint8_t* bytes, std::uint64_t begin, std::uint64_t end, std::int16_t* block) {
  for (int i = 0; i < 64; ++i) block[i] = 0;
  const auto fail = [&](unpack_error e, std::uint64_t at, std::int32_t value) {
    for (int i = 0; i < 64; ++i) block[i] = 0;
    return unpack_result{e, at, value};
  };
  std::uint64_t at = begin;
  std::int32_t k = 0;  // the next zigzag index
  bool zeros = false;  // the byte before was 16 zeros
  while (true) {
    if (at >= end) return fail(unpack_error::ends_inside_block, at, 0);
    const std::uint8_t b = bytes[at++];
    const std::int32_t run = b >> 4, lo = b & 15;
    if (lo == 8) {
      if (b == kEndOfBlock) return zeros ? fail(unpack_error::zeros_before_end, at - 1, 0) : unpack_result{unpack_error::none, at, 0};
      if (b != kSixteenZeros) return fail(unpack_error::bad_byte, at - 1, b);
      k += 16;
      if (k > 63) return fail(unpack_error::index_past_63, at - 1, k);
      zeros = true;
      continue;
    }
    k += run;
    if (k > 63) return fail(unpack_error::index_past_63, at - 1, k);
    std::int16_t v;
    if (lo == 0) {
      if (end - at < 2) return fail(unpack_error::ends_inside_wide, at, 0);
      v = static_cast<std::int16_t>(static_cast<std::uint16_t>(bytes[at] | (bytes[at + 1] << 8)));
      if (v >= -7 && v <= 7) return fail(unpack_error::wide_fits_nibble, at, v);
      at += 2;
    } else {
      v = static_cast<std::int16_t>(lo < 8 ? lo : lo - 16);
    }
    block[natural_of(k)] = v;
    ++k;
    zeros = false;
  }
}

/// The blocks component `k` of `image` stores.
PINFEED_HD std::uint64_t blocks_of(const jpeg_image& image, int k) {
  return std::uint64_t{image.comp[k].width_in_blocks} * image.comp[k].height_in_blocks;
}
/// The blocks `image` stores, over its components (3 at most).
PINFEED_HD std::uint64_t blocks_of(const jpeg_image& image) {
  std::uint64_t n = 0;
  for (int k = 0; k < image.components && k < 3; ++k) n += blocks_of(image, k);
  return n;
}

/// Block `b` of `image` (0 to blocks_of(image) - 1: component after component, row by row)
/// dequantized and through its component's IDCT into the component's plane in `scratch`.
PINFEED_HD void decode_block(const jpeg_image& image, std::uint64_t b, const std::int16_t* blocks, const std::uint16_t* quant,
                             std::uint8_t* scratch) {
  int k = 0;
  std::uint64_t plane = image.plane_offset;
  while (b >= blocks_of(image, k)) {
    b -= blocks_of(image, k);
    plane += blocks_of(image, k) * image.comp[k].dct * image.comp[k].dct;
    ++k;
  }
  const jpeg_component& c = image.comp[k];
  const std::uint32_t n = c.dct, pw = c.width_in_blocks * n;
  const std::uint64_t bx = b % c.width_in_blocks, by = b / c.width_in_blocks;
  idct(n, blocks + (c.first_block + b) * 64, quant + (std::uint64_t{image.first_quant} + c.quant) * 64,
       scratch + plane + by * n * pw + bx * n, pw);
}

/// The plane of component `k` of `image` without its samples (p null): its sizes and factors.
PINFEED_HD plane_view plane_shape(const jpeg_image& image, int k) {
  const jpeg_component& c = image.comp[k];
  const std::uint32_t n = c.dct, s = image.scale;
  return {nullptr,
          c.width_in_blocks * n,
          scaled_extent(image.width, std::uint64_t{c.h} * n, std::uint64_t{image.max_h} * 8),
          scaled_extent(image.height, std::uint64_t{c.v} * n, std::uint64_t{image.max_v} * 8),
          static_cast<std::uint32_t>(image.max_h * s / (c.h * n)),
          static_cast<std::uint32_t>(image.max_v * s / (c.v * n)),
          image.mcu_x * c.h * n,
          image.mcu_y * c.v * n,
          s > 1};
}

/// The plane of component `k` of `image` at `scratch` (the image's planes start at plane_offset).
PINFEED_HD plane_view plane_of(const jpeg_image& image, int k, const std::uint8_t* scratch) {
  std::uint64_t offset = image.plane_offset;
  for (int j = 0; j < k; ++j) offset += blocks_of(image, j) * image.comp[j].dct * image.comp[j].dct;
  plane_view v = plane_shape(image, k);
  v.p = scratch + offset;
  return v;
}

/// The window `image` decodes: its crop, or the whole image.
struct window {
  std::uint32_t x, y, width, height;
};
PINFEED_HD window window_of(const jpeg_image& image) {
  if (image.crop_width == 0) return {0, 0, scaled_extent(image.width, image.scale, 8), scaled_extent(image.height, image.scale, 8)};
  return {image.crop_x, image.crop_y, image.crop_width, image.crop_height};
}

/// The planes of `image`'s components (components of them), found once for all its pixels.
struct planes {
  plane_view c[3];
  int components;
};
PINFEED_HD planes planes_of(const jpeg_image& image, const std::uint8_t* scratch) {
  planes p{};
  p.components = image.components == 1 ? 1 : 3;
  for (int k = 0; k < p.components; ++k) p.c[k] = plane_of(image, k, scratch);
  return p;
}

/// Pixel (x, y) of the whole image as RGB, from its planes.
PINFEED_HD void pixel(const planes& p, std::uint32_t x, std::uint32_t y, std::uint8_t* rgb) {
  if (p.components == 1) {
    const std::uint8_t v = static_cast<std::uint8_t>(upsampled(p.c[0], x, y));
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  ycc_to_rgb(upsampled(p.c[0], x, y), upsampled(p.c[1], x, y), upsampled(p.c[2], x, y), rgb);
}

}  // namespace pinfeed::ops::jpeg
