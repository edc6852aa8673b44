// pinfeed's bilinear resize on the host (pinfeed/ops/resize.hpp), in one of two orders that give the
// same integers: columns first (each source row taken across once, two rows kept, then blended
// down) or rows first (two rows weighed down, then taken across). The arithmetic is
// resize_math.hpp's, shared with the device.
#include <cstring>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/detail/clones.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/random.hpp"
#include "resize_math.hpp"

namespace pinfeed::ops {

namespace {

void check_sides(const char* what, std::int64_t h, std::int64_t w) {
  if (h < 1 || w < 1 || h > resize::kMostSide || w > resize::kMostSide)
    throw pinfeed::invalid_argument(std::string("resize: ") + what + " " + std::to_string(w) + "x" + std::to_string(h) +
                                    ": sides must be 1 to " + std::to_string(resize::kMostSide));
}

struct row_scratch {
  std::vector<std::int32_t> x0, x1, w1;  ///< each output column's taps: byte offsets and weight
  std::vector<std::int32_t> rows[2];
  std::int64_t row_of[2] = {-1, -1};  ///< the source row each holds
  std::vector<std::int32_t> at0, at1, wv;  ///< rows first: each output value's two columns (of `column`) and weight
  std::vector<std::int32_t> column;        ///< rows first: the two source rows weighed down, over the columns read
};

/// One source row taken across: each output column's samples (mirrored where `flip`).
template <int C>
PINFEED_INLINE void across_row(const std::uint8_t* p, const row_scratch& s, std::int64_t out_w, int channels, bool flip,
                               std::int32_t* dst) {
  const int ch = C > 0 ? C : channels;
  for (std::int64_t d = 0; d < out_w; ++d) {
    const auto k = static_cast<std::size_t>(d);
    const std::uint8_t* a = p + s.x0[k];
    const std::uint8_t* b = p + s.x1[k];
    const std::int32_t f = s.w1[k];
    std::int32_t* o = dst + (flip ? out_w - 1 - d : d) * ch;
    for (int c = 0; c < ch; ++c) o[c] = resize::across(a[c], b[c], f);
  }
}

/// Columns first: each source row a column tap reads is taken across once (two rows kept), then the
/// rows are blended down. Best where rows are read more than once (growing) or a row is much wider
/// than the output.
PINFEED_INLINE void columns_first(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, int channels,
                                  std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip, row_scratch& s) {
  const std::size_t values = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(channels);
  for (auto& r : s.rows) r.resize(values);
  s.row_of[0] = s.row_of[1] = -1;
  const auto across = [&](std::int64_t src) -> const std::int32_t* {  // source row `src` taken across
    for (int k = 0; k < 2; ++k)
      if (s.row_of[k] == src) return s.rows[k].data();
    const int k = s.row_of[0] < s.row_of[1] ? 0 : 1;  // the older row (rows come in order)
    const std::uint8_t* p = in + static_cast<std::size_t>(src) * in_stride;
    if (channels == 3)
      across_row<3>(p, s, out_w, 3, flip, s.rows[k].data());
    else
      across_row<0>(p, s, out_w, channels, flip, s.rows[k].data());
    s.row_of[k] = src;
    return s.rows[k].data();
  };
  for (std::int64_t y = 0; y < out_h; ++y) {
    const resize::tap t = resize::tap_at(y, in_h, out_h);
    const std::int32_t* top = across(t.i0);
    const std::int32_t* bottom = across(t.i1);
    std::uint8_t* o = out + static_cast<std::size_t>(y) * values;
    for (std::size_t i = 0; i < values; ++i) o[i] = resize::down(top[i], bottom[i], t.w1);
  }
}

/// Rows first's second pass: each output value from its two columns of `col`, as resize::down.
PINFEED_INLINE void take_across(const std::int32_t* col, const std::int32_t* at0, const std::int32_t* at1, const std::int32_t* wv,
                                std::size_t values, std::uint8_t* o) {
  for (std::size_t i = 0; i < values; ++i) o[i] = resize::down(col[at0[i]], col[at1[i]], wv[i]);
}
#if defined(__x86_64__)
/// take_across eight values at a time with AVX2's gathers (the compiler does not gather here): the
/// same 32-bit products and sums, so the same bytes. A call a row.
__attribute__((target("avx2"))) void take_across_avx2(const std::int32_t* col, const std::int32_t* at0,
                                                                              const std::int32_t* at1, const std::int32_t* wv,
                                                                              std::size_t values, std::uint8_t* o) {
  const __m256i full = _mm256_set1_epi32(2048), half = _mm256_set1_epi32(1 << 21);
  std::size_t i = 0;
  for (; i + 8 <= values; i += 8) {
    const __m256i a = _mm256_i32gather_epi32(col, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at0 + i)), 4);
    const __m256i b = _mm256_i32gather_epi32(col, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at1 + i)), 4);
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wv + i));
    const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a, _mm256_sub_epi32(full, w)), _mm256_mullo_epi32(b, w)), half);
    const __m256i v = _mm256_srai_epi32(sum, 22);  // 0 to 255
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + i), _mm_packus_epi16(words, words));
  }
  take_across(col, at0 + i, at1 + i, wv + i, values - i, o + i);
}

/// Rows first's first pass with AVX2: top * (2048 - fy) + bottom * fy, sixteen samples at a time,
/// each sample and weight a 16-bit lane of one multiply-add (the same exact 32-bit sum).
__attribute__((target("avx2"))) void weigh_down_avx2(const std::uint8_t* top, const std::uint8_t* bottom, std::int32_t fy,
                                                     std::size_t width, std::int32_t* col) {
  const __m256i weights = _mm256_set1_epi32(static_cast<std::int32_t>((static_cast<std::uint32_t>(fy) << 16) | static_cast<std::uint32_t>(2048 - fy)));
  std::size_t j = 0;
  for (; j + 16 <= width; j += 16) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(top + j));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bottom + j));
    const __m256i lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(t, b));  // t0 b0 t1 b1 ... t7 b7
    const __m256i hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(t, b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(col + j), _mm256_madd_epi16(lo, weights));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(col + j + 8), _mm256_madd_epi16(hi, weights));
  }
  for (; j < width; ++j) col[j] = resize::across(top[j], bottom[j], fy);
}

/// Pixels p and p + 1 of take_across_rgb_avx2: [r g b - | r g b -], each 0 to 255.
__attribute__((target("avx2"), always_inline)) inline __m256i two_rgb_avx2(const std::int32_t* col, const std::int32_t* at0,
                                                                             const std::int32_t* at1, const std::int32_t* wv,
                                                                             std::size_t p) {
  const __m256i full = _mm256_set1_epi32(2048), half = _mm256_set1_epi32(1 << 21);
  const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + at0[3 * p]))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + at0[3 * p + 3])), 1);
  const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + at1[3 * p]))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(col + at1[3 * p + 3])), 1);
  const __m256i w = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32(wv[3 * p])), _mm_set1_epi32(wv[3 * p + 3]), 1);
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a, _mm256_sub_epi32(full, w)), _mm256_mullo_epi32(b, w)), half);
  return _mm256_srai_epi32(sum, 22);
}

/// take_across for RGB, four pixels at a time: each pixel's two columns loaded as four values (the
/// fourth, the next pixel's or the padding after `col`, is dropped), so no gathers. The same
/// products and sums as resize::down.
__attribute__((target("avx2"))) void take_across_rgb_avx2(const std::int32_t* col, const std::int32_t* at0, const std::int32_t* at1,
                                                          const std::int32_t* wv, std::size_t pixels, std::uint8_t* o) {
  // Bytes 0-2 of each of the four pixels' words, then nothing.
  const __m128i keep = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  std::size_t p = 0;
  for (; p + 4 <= pixels; p += 4) {
    // Packing works within 128-bit halves: the low half holds pixels p and p + 2, the high p + 1, p + 3.
    const __m256i words = _mm256_packus_epi32(two_rgb_avx2(col, at0, at1, wv, p), two_rgb_avx2(col, at0, at1, wv, p + 2));
    const __m256i bytes = _mm256_packus_epi16(words, words);
    const __m128i four = _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
    const __m128i rgb = _mm_shuffle_epi8(four, keep);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 3 * p), rgb);
    const auto tail = static_cast<std::uint32_t>(_mm_extract_epi32(rgb, 2));
    std::memcpy(o + 3 * p + 8, &tail, 4);
  }
  take_across(col, at0 + 3 * p, at1 + 3 * p, wv + 3 * p, 3 * (pixels - p), o + 3 * p);
}
#endif

/// Rows first: for each output row its two source rows are weighed down over the columns read (one
/// pass the compiler vectorises), then each output value takes its two columns across. The same
/// four products summed, so the same bytes as columns_first (resize_math.hpp): best where each
/// output row reads rows of its own (shrinking) and the rows are not much wider than the output.
template <bool Avx2>
PINFEED_INLINE void rows_first(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, int channels,
                               std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip, row_scratch& s) {
  const std::size_t values = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(channels);
  s.at0.resize(values);
  s.at1.resize(values);
  s.wv.resize(values);
  // The columns read, in bytes of a row: [first, last).
  const std::int32_t first = s.x0[0], last = s.x1[static_cast<std::size_t>(out_w) - 1] + channels;
  for (std::int64_t d = 0; d < out_w; ++d) {
    const auto k = static_cast<std::size_t>(d);
    const std::size_t o = static_cast<std::size_t>(flip ? out_w - 1 - d : d) * static_cast<std::size_t>(channels);
    for (int c = 0; c < channels; ++c) {
      s.at0[o + static_cast<std::size_t>(c)] = s.x0[k] - first + c;
      s.at1[o + static_cast<std::size_t>(c)] = s.x1[k] - first + c;
      s.wv[o + static_cast<std::size_t>(c)] = s.w1[k];
    }
  }
  const auto width = static_cast<std::size_t>(last - first);
  s.column.resize(width + 1);  // + 1: take_across_rgb_avx2 loads four values a pixel
  std::int32_t* col = s.column.data();
  const std::int32_t* at0 = s.at0.data();
  const std::int32_t* at1 = s.at1.data();
  const std::int32_t* wv = s.wv.data();
  for (std::int64_t y = 0; y < out_h; ++y) {
    const resize::tap t = resize::tap_at(y, in_h, out_h);
    const std::uint8_t* top = in + static_cast<std::size_t>(t.i0) * in_stride + first;
    const std::uint8_t* bottom = in + static_cast<std::size_t>(t.i1) * in_stride + first;
    const std::int32_t fy = t.w1;
    std::uint8_t* o = out + static_cast<std::size_t>(y) * values;
#if defined(__x86_64__)
    if constexpr (Avx2) {
      weigh_down_avx2(top, bottom, fy, width, col);
      if (channels == 3) take_across_rgb_avx2(col, at0, at1, wv, static_cast<std::size_t>(out_w), o);
      else take_across_avx2(col, at0, at1, wv, values, o);
      continue;
    }
#endif
    for (std::size_t j = 0; j < width; ++j) col[j] = resize::across(top[j], bottom[j], fy);
    take_across(col, at0, at1, wv, values, o);
  }
}

/// The whole resize; compiled twice on x86-64 (baseline, and AVX2 with its own kernels: the same
/// integers either way).
template <bool Avx2>
PINFEED_INLINE void resize_body(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels,
                                std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip, row_scratch& s) {
  const auto n = static_cast<std::size_t>(out_w);
  s.x0.resize(n);
  s.x1.resize(n);
  s.w1.resize(n);
  for (std::size_t d = 0; d < n; ++d) {
    const resize::tap t = resize::tap_at(static_cast<std::int64_t>(d), in_w, out_w);
    s.x0[d] = t.i0 * channels;
    s.x1[d] = t.i1 * channels;
    s.w1[d] = t.w1;
  }
  // Rows first reads each output row's source rows afresh over the columns read: worth it where
  // the rows are not reused (shrinking in height) and are at most 4 output rows wide.
  if (in_h >= out_h && in_w <= 4 * out_w)
    rows_first<Avx2>(in, in_stride, in_h, channels, out, out_h, out_w, flip, s);
  else
    columns_first(in, in_stride, in_h, channels, out, out_h, out_w, flip, s);
}

void resize_portable(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels, std::uint8_t* out,
                     std::int64_t out_h, std::int64_t out_w, bool flip, row_scratch& s) {
  resize_body<false>(in, in_stride, in_h, in_w, channels, out, out_h, out_w, flip, s);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void resize_avx2(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w,
                                                 int channels, std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip,
                                                 row_scratch& s) {
  resize_body<true>(in, in_stride, in_h, in_w, channels, out, out_h, out_w, flip, s);
}
#endif

}  // namespace

void resize_bilinear_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels,
                        std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip) {
  check_sides("input", in_h, in_w);
  check_sides("output", out_h, out_w);
  if (channels < 1 || channels > 4) throw pinfeed::invalid_argument("resize: " + std::to_string(channels) + " channels (1 to 4 taken)");
  auto& s = pinfeed::detail::thread_scratch<row_scratch, struct resize_rows>();
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && simd_level_in_use() != simd_level::scalar) return resize_avx2(in, in_stride, in_h, in_w, channels, out, out_h, out_w, flip, s);
#endif
  resize_portable(in, in_stride, in_h, in_w, channels, out, out_h, out_w, flip, s);  // aarch64: NEON multiplies 32-bit lanes
}

namespace {
/// Why a box reduction by `box` of box_h x box_w pixels to out_h x out_w is refused, or empty.
std::string box_refusal(std::uint64_t box, std::uint64_t box_h, std::uint64_t box_w, std::uint64_t out_h, std::uint64_t out_w) {
  if (box < 1 || box > resize::kMostBox) return "box " + std::to_string(box) + " (1 to " + std::to_string(resize::kMostBox) + ")";
  if (out_h > static_cast<std::uint64_t>(resize::kMostSide) || out_w > static_cast<std::uint64_t>(resize::kMostSide))
    return "box output " + std::to_string(out_w) + "x" + std::to_string(out_h) + ": sides must be at most " +
           std::to_string(resize::kMostSide);
  if (box_h > static_cast<std::uint64_t>(resize::kMostSide) || box_w > static_cast<std::uint64_t>(resize::kMostSide))
    return "box input " + std::to_string(box_w) + "x" + std::to_string(box_h) + ": sides must be at most " +
           std::to_string(resize::kMostSide);
  if (out_h < 1 || out_w < 1 || (out_w - 1) * box >= box_w || (out_h - 1) * box >= box_h)
    return std::to_string(out_w) + "x" + std::to_string(out_h) + " boxes of " + std::to_string(box) + " do not all cover a pixel of the " +
           std::to_string(box_w) + "x" + std::to_string(box_h) + " input";
  return {};
}
}  // namespace

void box_downscale_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t box_h, std::int64_t box_w, std::uint32_t box,
                      std::uint8_t* out, std::int64_t out_h, std::int64_t out_w) {
  if (box_h < 1 || box_w < 1 || out_h < 1 || out_w < 1)
    throw pinfeed::invalid_argument("box reduction: " + std::to_string(box_w) + "x" + std::to_string(box_h) + " to " +
                                    std::to_string(out_w) + "x" + std::to_string(out_h) + ": sides must be 1 or more");
  if (const std::string why = box_refusal(box, static_cast<std::uint64_t>(box_h), static_cast<std::uint64_t>(box_w),
                                          static_cast<std::uint64_t>(out_h), static_cast<std::uint64_t>(out_w));
      !why.empty())
    throw pinfeed::invalid_argument("box reduction: " + why);
  if (in_stride < static_cast<std::size_t>(box_w) * 3)
    throw pinfeed::invalid_argument("box reduction: input rows " + std::to_string(in_stride) + " bytes apart, under the " +
                                    std::to_string(box_w * 3) + " of a row");
  for (std::int64_t y = 0; y < out_h; ++y)
    for (std::int64_t x = 0; x < out_w; ++x)
      resize::box_pixel(in, in_stride, box, static_cast<std::uint32_t>(box_h), static_cast<std::uint32_t>(box_w),
                        static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), out + (y * out_w + x) * 3);
}

void check_resize_jobs(const resize_job* jobs, std::size_t count, std::uint64_t in_bytes, std::uint64_t out_bytes) {
  if (count > 0 && jobs == nullptr) throw pinfeed::invalid_argument("resize batch: " + std::to_string(count) + " jobs but none given");
  for (std::size_t i = 0; i < count; ++i) {
    const resize_job& j = jobs[i];
    const std::string name = "resize batch: job " + std::to_string(i) + ": ";
    if (j.in_h < 1 || j.in_w < 1 || j.out_h < 1 || j.out_w < 1 || j.in_h > resize::kMostSide || j.in_w > resize::kMostSide ||
        j.out_h > resize::kMostSide || j.out_w > resize::kMostSide)
      throw pinfeed::invalid_argument(name + std::to_string(j.in_w) + "x" + std::to_string(j.in_h) + " to " + std::to_string(j.out_w) +
                                      "x" + std::to_string(j.out_h) + ": sides must be 1 to " + std::to_string(resize::kMostSide));
    // The pixels read: in_h x in_w, or with a box reduction box_h x box_w (each box covering one).
    const bool boxed = j.box > 1;
    if (boxed) {
      if (const std::string why = box_refusal(j.box, j.box_h, j.box_w, j.in_h, j.in_w); !why.empty())
        throw pinfeed::invalid_argument(name + why);
      if (j.in_stride == 0) throw pinfeed::invalid_argument(name + "a box reduction needs its input's in_stride");
    }
    const std::uint64_t read_h = boxed ? j.box_h : j.in_h, read_w = boxed ? j.box_w : j.in_w;
    if (j.in_stride != 0 && j.in_stride < read_w * 3)
      throw pinfeed::invalid_argument(name + "input rows " + std::to_string(j.in_stride) + " bytes apart, under the " +
                                      std::to_string(read_w * 3) + " of a row");
    const std::uint64_t stride = j.in_stride != 0 ? j.in_stride : std::uint64_t{j.in_w} * 3;
    const std::uint64_t in_size = stride * (read_h - 1) + read_w * 3, out_size = std::uint64_t{j.out_h} * j.out_w * 3;
    if (j.in_offset > in_bytes || in_size > in_bytes - j.in_offset)
      throw pinfeed::invalid_argument(name + "its input [" + std::to_string(j.in_offset) + ", +" + std::to_string(in_size) +
                                      ") is past the " + std::to_string(in_bytes) + " bytes given");
    if (j.out_offset > out_bytes || out_size > out_bytes - j.out_offset)
      throw pinfeed::invalid_argument(name + "its output [" + std::to_string(j.out_offset) + ", +" + std::to_string(out_size) +
                                      ") is past the " + std::to_string(out_bytes) + " bytes given");
    if (j.flip > 1) throw pinfeed::invalid_argument(name + "flip " + std::to_string(j.flip) + " (0 or 1)");
  }
}

}  // namespace pinfeed::ops
