// Host side of normalize.hpp and encode.hpp.
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/normalize.hpp"

#include "encode_checks.hpp"
#include "pinfeed/runtime/detail/parallel.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::ops {

namespace detail {
void normalize_coefficients(const normalize_params& p, float a[3], float b[3]) {
  if (p.out != dtype::f32 && p.out != dtype::f16 && p.out != dtype::bf16)
    throw pinfeed::invalid_argument("normalize: output type must be float32, float16 or bfloat16, got " +
                                std::string(dtype_name(p.out)));
  for (int c = 0; c < 3; ++c) {
    if (!(p.std[c] > 0.0f) || !std::isfinite(p.std[c]))
      throw pinfeed::invalid_argument("normalize: std[" + std::to_string(c) + "] = " + std::to_string(p.std[c]) +
                                  " must be a positive finite number");
    if (!std::isfinite(p.mean[c]) || !std::isfinite(p.scale))
      throw pinfeed::invalid_argument("normalize: mean and scale must be finite");
    a[c] = p.scale / p.std[c];
    b[c] = -p.mean[c] / p.std[c];
  }
}
}  // namespace detail

namespace {

/// One image, HWC uint8 -> CHW float, with the rounding rule of the header. Out is float, or
/// uint16 holding half/bfloat16 bits.
template <class Out>
[[gnu::always_inline]] inline void normalize_image_body(const std::uint8_t* src, Out* dst, std::size_t h, std::size_t w,
                                 const normalize_params& p, const float a[3], const float b[3]) {
  const std::size_t plane = h * w;
  float m[3][3], off[3];
  for (int c = 0; c < 3; ++c) {
    off[c] = detail::ycbcr_offset(c);
    for (int j = 0; j < 3; ++j) m[c][j] = detail::ycbcr_matrix(c, j);
  }
  // Row by row through three planar float rows: every loop below is a plain stride-1 loop the
  // compiler vectorizes (the fma builtin becomes vfmadd with FMA enabled).
  auto& rows = pinfeed::detail::thread_scratch<std::vector<float>, struct normalize_rows>();
  rows.resize(6 * w);
  float* in_c[3] = {rows.data(), rows.data() + w, rows.data() + 2 * w};
  float* t_c[3] = {rows.data() + 3 * w, rows.data() + 4 * w, rows.data() + 5 * w};
  for (std::size_t y = 0; y < h; ++y) {
    const std::uint8_t* row = src + 3 * y * w;
    if (p.hflip) {
      for (std::size_t x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c) in_c[c][x] = static_cast<float>(row[3 * (w - 1 - x) + c]);
    } else {
      for (std::size_t x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c) in_c[c][x] = static_cast<float>(row[3 * x + c]);
    }
    float** v = in_c;
    if (p.ycbcr) {
      for (int c = 0; c < 3; ++c) {
        const float m0 = m[c][0], m1 = m[c][1], m2 = m[c][2], o = off[c];
        float* t = t_c[c];
        const float *r = in_c[0], *g = in_c[1], *bl = in_c[2];
        for (std::size_t x = 0; x < w; ++x) t[x] = __builtin_fmaf(m0, r[x], __builtin_fmaf(m1, g[x], __builtin_fmaf(m2, bl[x], o)));
      }
      v = t_c;
    }
    for (int c = 0; c < 3; ++c) {
      Out* d = dst + c * plane + y * w;
      const float* s = v[c];
      const float ac = a[c], bc = b[c];
      if constexpr (sizeof(Out) == 4) {
        for (std::size_t x = 0; x < w; ++x) d[x] = __builtin_fmaf(s[x], ac, bc);
      } else {
        for (std::size_t x = 0; x < w; ++x) {
          const float r = __builtin_fmaf(s[x], ac, bc);
          d[x] = p.out == dtype::f16 ? float_to_half(r) : float_to_bfloat16(r);
        }
      }
    }
  }
}

// Without the FMA instruction set __builtin_fmaf is a libm call per value; with it, one
// instruction. Both round once, so both give the same bits.
template <class Out>
void normalize_image_portable(const std::uint8_t* src, Out* dst, std::size_t h, std::size_t w,
                              const normalize_params& p, const float a[3], const float b[3]) {
  normalize_image_body(src, dst, h, w, p, a, b);
}
#if defined(__x86_64__)
template <class Out>
__attribute__((target("avx2,fma"))) void normalize_image_fma(const std::uint8_t* src, Out* dst, std::size_t h,
                                                             std::size_t w, const normalize_params& p, const float a[3],
                                                             const float b[3]) {
  normalize_image_body(src, dst, h, w, p, a, b);
}
#endif

template <class Out>
void normalize_image(const std::uint8_t* src, Out* dst, std::size_t h, std::size_t w, const normalize_params& p,
                     const float a[3], const float b[3]) {
#if defined(__x86_64__)
  static const bool fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  if (fma && simd_level_in_use() != simd_level::scalar) return normalize_image_fma(src, dst, h, w, p, a, b);
#endif
  normalize_image_portable(src, dst, h, w, p, a, b);  // aarch64: __builtin_fmaf is one fmadd
}

}  // namespace

void normalize_hwc_to_chw_host(const normalize_args& args, const normalize_params& params) {
  float a[3], b[3];
  if (!detail::validate_normalize(args.in, args.out, args.shape, params, a, b)) return;
  const std::uint8_t* in = args.in;
  void* out = args.out;
  const image_batch_shape shape = args.shape;
  const std::size_t image = shape.height * shape.width * 3;
  pinfeed::detail::parallel_for(0, shape.batch, [&](std::size_t n) {
    const std::uint8_t* src = in + n * image;
    if (params.out == dtype::f32)
      normalize_image(src, static_cast<float*>(out) + n * image, shape.height, shape.width, params, a, b);
    else
      normalize_image(src, static_cast<std::uint16_t*>(out) + n * image, shape.height, shape.width, params, a, b);
  });
}

namespace detail {
void validate_one_hot(const one_hot_args& a) {
  if (a.label_type != dtype::i32 && a.label_type != dtype::i64)
    throw pinfeed::invalid_argument("one_hot: labels must be int32 or int64, got " + std::string(dtype_name(a.label_type)));
  if (a.out_type != dtype::u8 && a.out_type != dtype::f16 && a.out_type != dtype::bf16 && a.out_type != dtype::f32)
    throw pinfeed::invalid_argument("one_hot: output must be uint8, float16, bfloat16 or float32, got " +
                                std::string(dtype_name(a.out_type)));
  if (a.classes <= 0) throw pinfeed::invalid_argument("one_hot: classes must be positive, got " + std::to_string(a.classes));
  if (a.count == 0) return;
  if (a.labels == nullptr || a.out == nullptr) throw pinfeed::invalid_argument("one_hot: null labels or output pointer");
  validate_alignment(a.labels, dtype_size(a.label_type), "one_hot", "the labels");
  validate_alignment(a.out, dtype_size(a.out_type), "one_hot", "the output");
}
void validate_bits(const void* in, const void* out, bit_planes_shape s, const char* what) {
  if (s.count * s.pixels > 0 && (in == nullptr || out == nullptr))
    throw pinfeed::invalid_argument(std::string(what) + ": null input or output pointer");
}
void validate_alignment(const void* p, std::size_t align, const char* what, const char* name) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (align <= 1 || at % align == 0) return;
  std::ostringstream msg;
  msg << what << ": " << name << " must be aligned to " << align << " bytes (its element size); address " << at
      << " is " << at % align << " past a multiple";
  throw pinfeed::invalid_argument(msg.str());
}
bool validate_normalize(const void* in, const void* out, image_batch_shape shape, const normalize_params& params,
                        float a[3], float b[3]) {
  normalize_coefficients(params, a, b);
  if (shape.pixels() == 0) return false;
  if (in == nullptr || out == nullptr) throw pinfeed::invalid_argument("normalize: null input or output pointer");
  validate_alignment(out, dtype_size(params.out), "normalize", "the output");
  return true;
}
}  // namespace detail

void one_hot_host(const one_hot_args& a) {
  detail::validate_one_hot(a);
  const std::size_t esize = dtype_size(a.out_type);
  const auto classes = static_cast<std::size_t>(a.classes);
  // The bits of 1 in each output type.
  const std::uint32_t one = a.out_type == dtype::u8 ? 1u : a.out_type == dtype::f16 ? 0x3C00u
                            : a.out_type == dtype::bf16 ? 0x3F80u : 0x3F800000u;
  auto* out = static_cast<std::byte*>(a.out);
  std::memset(out, 0, a.count * classes * esize);
  for (std::size_t i = 0; i < a.count; ++i) {
    const std::int64_t l = a.label_type == dtype::i64 ? static_cast<const std::int64_t*>(a.labels)[i]
                                                      : static_cast<const std::int32_t*>(a.labels)[i];
    if (l < 0 || l >= a.classes) continue;
    std::memcpy(out + (i * classes + static_cast<std::size_t>(l)) * esize, &one, esize);  // little-endian
  }
}

namespace {
/// fn(packed byte, plane of bit 0, pixels between planes) for every pixel of every image: image n's
/// pixel p is bit b of packed byte n * pixels + p and byte (n * 8 + b) * pixels + p of the planes.
template <class Fn>
void for_each_packed_pixel(const bit_planes_shape& s, Fn&& fn) {
  for (std::size_t n = 0; n < s.count; ++n)
    for (std::size_t p = 0; p < s.pixels; ++p) fn(n * s.pixels + p, n * 8 * s.pixels + p, s.pixels);
}
}  // namespace

void unpack_bits_host(const bit_planes_args& a) {
  detail::validate_bits(a.in, a.out, a.shape, "unpack_bits");
  const std::uint8_t* packed = a.in;
  std::uint8_t* planes = a.out;
  for_each_packed_pixel(a.shape, [&](std::size_t byte, std::size_t plane0, std::size_t stride) {
    for (int b = 0; b < 8; ++b) planes[plane0 + b * stride] = (packed[byte] >> b) & 1u;
  });
}

void pack_bits_host(const bit_planes_args& a) {
  detail::validate_bits(a.in, a.out, a.shape, "pack_bits");
  const std::uint8_t* planes = a.in;
  std::uint8_t* packed = a.out;
  for_each_packed_pixel(a.shape, [&](std::size_t byte, std::size_t plane0, std::size_t stride) {
    std::uint8_t v = 0;
    for (int b = 0; b < 8; ++b) v |= static_cast<std::uint8_t>((planes[plane0 + b * stride] != 0) << b);
    packed[byte] = v;
  });
}

}  // namespace pinfeed::ops
