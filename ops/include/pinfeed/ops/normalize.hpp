#pragma once
/// @file normalize.hpp
/// uint8 HWC images -> float32 / float16 / bfloat16 CHW over a whole batch, with an optional
/// horizontal flip, an optional RGB -> YCbCr conversion, then a scale or a per-channel mean/std.
///
/// Rounding rule (CPU == GPU bit for bit): with x the (flipped) RGB values as floats,
///   ycbcr: v[c] = fma(M[c][0], R, fma(M[c][1], G, fma(M[c][2], B, offset[c])))   (else v = x)
///   out[c] = fma(v[c], a[c], b[c]) with a[c] = scale / std[c], b[c] = -mean[c] / std[c]
/// computed once on the host in float, each fma rounded once; float16/bfloat16 outputs round the
/// float32 result to nearest even (float_to_half / float_to_bfloat16 below).
/// M and offset are full-range BT.601 (JPEG's): [[0.299, 0.587, 0.114], [-0.16874, -0.33126, 0.5],
/// [0.5, -0.41869, -0.08131]] and [0, 128, 128].

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD
#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed::ops {

struct normalize_params {
  float scale = 1.0f / 255.0f;               ///< applied to the (converted) value first
  std::array<float, 3> mean{0.f, 0.f, 0.f};  ///< in scaled units (e.g. ImageNet 0.485, 0.456, 0.406)
  std::array<float, 3> std{1.f, 1.f, 1.f};   ///< in scaled units, each > 0
  bool ycbcr = false;                        ///< convert RGB -> YCbCr first (ConvertColor)
  bool hflip = false;                        ///< mirror every image left-right
  dtype out = dtype::f32;                    ///< f32, f16 or bf16
};

/// The shape of a batch of images: [batch, height, width, 3] uint8 in, [batch, 3, height, width] out.
struct image_batch_shape {
  std::size_t batch = 0, height = 0, width = 0;
  [[nodiscard]] std::size_t pixels() const noexcept { return batch * height * width; }
};

/// What a normalize call works on: `shape.batch` uint8 HWC images at `in`, written as CHW to `out`
/// (host pointers for the host version, device pointers for the device one).
struct normalize_args {
  const std::uint8_t* in = nullptr;
  void* out = nullptr;
  image_batch_shape shape{};
};

/// Host reference, parallel over images with TBB. Throws std::invalid_argument for null pointers
/// with a non-empty shape, a std that is not positive, an unsupported output type, or an output
/// not aligned to its element size (4 bytes for float32, 2 for float16 and bfloat16).
void normalize_hwc_to_chw_host(const normalize_args& a, const normalize_params& params);

/// The same on the device, asynchronous on `stream` (no host synchronization, capturable in a graph).
/// Throws std::invalid_argument before launching anything on bad arguments (the host version's),
/// cuda_error on launch failure.
void normalize_hwc_to_chw_device(const normalize_args& a, const normalize_params& params, cudaStream_t stream);

/// The bits of a float (host and device).
PINFEED_HD std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
#endif
}

/// float -> IEEE binary16 bits, round to nearest even (overflow to inf, NaN kept quiet).
PINFEED_HD std::uint16_t float_to_half(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // below half the smallest subnormal
    const std::uint32_t e = abs >> 23, m = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // 14 + (113 - e) ... right shift to the subnormal grid
    const std::uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    const std::uint32_t rounded = r + (rem > half || (rem == half && (r & 1u)));
    return static_cast<std::uint16_t>(sign | rounded);
  }
  const std::uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);  // round to nearest even at bit 13
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

/// float -> bfloat16 bits, round to nearest even (NaN kept quiet).
PINFEED_HD std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

namespace detail {
/// Per-channel (a, b) of the rounding rule above; validates params.
void normalize_coefficients(const normalize_params& p, float a[3], float b[3]);
/// The full-range BT.601 RGB -> YCbCr matrix M[c][j] and offset[c] (functions: usable in device code).
PINFEED_HD constexpr float ycbcr_matrix(int c, int j) {
  constexpr float m[3][3] = {{0.299f, 0.587f, 0.114f}, {-0.16874f, -0.33126f, 0.5f}, {0.5f, -0.41869f, -0.08131f}};
  return m[c][j];
}
PINFEED_HD constexpr float ycbcr_offset(int c) { return c == 0 ? 0.f : 128.f; }
}  // namespace detail

}  // namespace pinfeed::ops
