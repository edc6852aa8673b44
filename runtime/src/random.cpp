#include "pinfeed/runtime/random.hpp"

#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/log.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#define PINFEED_X86 1
// GCC 12's AVX-512 headers read _mm512_undefined_* values and warn about them (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define PINFEED_X86 0
#endif

namespace pinfeed {
namespace {

simd_level detect() noexcept {
#if PINFEED_X86
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return simd_level::avx512;
  if (__builtin_cpu_supports("avx2")) return simd_level::avx2;
#endif
  return simd_level::scalar;  // other CPUs run the portable paths (same bits)
}

/// The CPU's level, capped by PINFEED_SIMD when it is set. A bad value is reported and ignored here
/// (this runs inside noexcept calls); the command line checks it up front with parse_simd_level().
simd_level initial_level() noexcept {
  const simd_level cpu = cpu_simd_support();
  const char* env = std::getenv("PINFEED_SIMD");
  if (env == nullptr || *env == '\0') return cpu;
  try {
    const simd_level want = parse_simd_level(env);
    if (static_cast<int>(want) > static_cast<int>(cpu))
      log(log_level::warn, std::string("PINFEED_SIMD=") + env + ": this CPU supports " + to_string(cpu) +
                               " at most; using " + to_string(cpu));
    return static_cast<simd_level>(std::min(static_cast<int>(want), static_cast<int>(cpu)));
  } catch (const std::exception& e) {
    log(log_level::error, std::string(e.what()) + "; using " + to_string(cpu));
    return cpu;
  }
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

#if PINFEED_X86
#define PINFEED_AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define PINFEED_AVX2_FN __attribute__((target("avx2")))
// Helpers of the loops below, inlined into them whatever their size.
#define PINFEED_AVX512_INLINE PINFEED_AVX512_FN inline __attribute__((always_inline))
#define PINFEED_AVX2_INLINE PINFEED_AVX2_FN inline __attribute__((always_inline))

/// G x 16 Philox4x32-10 blocks at once (AVX-512), in registers: lane l of group g has counter
/// {x0[g][l], c1, c2, c3}; x[g][w] holds word w of every lane of group g. The G groups are
/// independent chains, interleaved round by round so that one group's multiplies hide another's
/// latency.
template <int G>
PINFEED_AVX512_FN inline void philox_x16_regs(
    const __m512i x0_in[G], std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0, std::uint32_t k1,
    __m512i x[G][4]) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kPhiloxM1));
  __m512i x0[G], x1[G], x2[G], x3[G];
  for (int g = 0; g < G; ++g) {
    x0[g] = x0_in[g];
    x1[g] = _mm512_set1_epi32(static_cast<int>(c1));
    x2[g] = _mm512_set1_epi32(static_cast<int>(c2));
    x3[g] = _mm512_set1_epi32(static_cast<int>(c3));
  }
  std::uint32_t ka = k0, kb = k1;
  for (int round = 0; round < 10; ++round) {
    const __m512i ka_v = _mm512_set1_epi32(static_cast<int>(ka)), kb_v = _mm512_set1_epi32(static_cast<int>(kb));
    for (int g = 0; g < G; ++g) {
      const __m512i e0 = _mm512_mul_epu32(x0[g], m0), o0 = _mm512_mul_epu32(_mm512_srli_epi64(x0[g], 32), m0);
      const __m512i e1 = _mm512_mul_epu32(x2[g], m1), o1 = _mm512_mul_epu32(_mm512_srli_epi64(x2[g], 32), m1);
      const __m512i lo0 = _mm512_mask_blend_epi32(0xAAAA, e0, _mm512_slli_epi64(o0, 32));
      const __m512i hi0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e0, 32), o0);
      const __m512i lo1 = _mm512_mask_blend_epi32(0xAAAA, e1, _mm512_slli_epi64(o1, 32));
      const __m512i hi1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e1, 32), o1);
      x0[g] = _mm512_xor_si512(_mm512_xor_si512(hi1, x1[g]), ka_v);
      x1[g] = lo1;
      x2[g] = _mm512_xor_si512(_mm512_xor_si512(hi0, x3[g]), kb_v);
      x3[g] = lo0;
    }
    ka += kPhiloxW0;
    kb += kPhiloxW1;
  }
  for (int g = 0; g < G; ++g) {
    x[g][0] = x0[g];
    x[g][1] = x1[g];
    x[g][2] = x2[g];
    x[g][3] = x3[g];
  }
}

/// Word-major group x (x[w]: word w of 16 blocks) to their 64 stream-order words at o.
PINFEED_AVX512_INLINE void store_words_x16(const __m512i x[4], std::uint32_t* o) {
  // 4x4 transposes of words inside each 128-bit quarter: quarter q of r[k] = block 4q+k's words.
  const __m512i ab_lo = _mm512_unpacklo_epi32(x[0], x[1]), ab_hi = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i cd_lo = _mm512_unpacklo_epi32(x[2], x[3]), cd_hi = _mm512_unpackhi_epi32(x[2], x[3]);
  const __m512i r0 = _mm512_unpacklo_epi64(ab_lo, cd_lo), r1 = _mm512_unpackhi_epi64(ab_lo, cd_lo);
  const __m512i r2 = _mm512_unpacklo_epi64(ab_hi, cd_hi), r3 = _mm512_unpackhi_epi64(ab_hi, cd_hi);
  // Then a 4x4 transpose of the quarters: output vector q = blocks 4q..4q+3.
  const __m512i t0 = _mm512_shuffle_i32x4(r0, r1, 0x44), t1 = _mm512_shuffle_i32x4(r2, r3, 0x44);
  const __m512i t2 = _mm512_shuffle_i32x4(r0, r1, 0xEE), t3 = _mm512_shuffle_i32x4(r2, r3, 0xEE);
  _mm512_storeu_si512(o, _mm512_shuffle_i32x4(t0, t1, 0x88));
  _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));
  _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));
  _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));
}

/// Lane l's word e[l] & 3 of the word-major group x.
PINFEED_AVX512_INLINE __m512i pick_words_x16(const __m512i x[4], __m512i e) {
  const __m512i w = _mm512_and_si512(e, _mm512_set1_epi32(3));
  __m512i r = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(1)), x[0], x[1]);
  r = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(2)), r, x[2]);
  return _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(3)), r, x[3]);
}

/// Stream-order words of the 16G blocks from `first`, as G interleaved chains.
template <int G>
PINFEED_AVX512_INLINE void words_x16(const philox_block& c, std::uint32_t first, std::uint32_t k0, std::uint32_t k1,
                                       std::uint32_t* out) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c0[G], x[G][4];
  for (int g = 0; g < G; ++g) c0[g] = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first + 16 * g)), lanes);
  philox_x16_regs<G>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
  for (int g = 0; g < G; ++g) store_words_x16(x[g], out + 64 * g);
}

/// Element-indexed words of 16G elements, as G interleaved chains: lane l computes block
/// elements[l] >> 2 and keeps its word elements[l] & 3.
template <int G>
PINFEED_AVX512_INLINE void element_words_x16(const philox_block& c, const std::uint32_t* elements, std::uint32_t k0,
                                       std::uint32_t k1, std::uint32_t* out) {
  __m512i e[G], c0[G], x[G][4];
  for (int g = 0; g < G; ++g) {
    e[g] = _mm512_loadu_si512(elements + 16 * g);
    c0[g] = _mm512_srli_epi32(e[g], 2);
  }
  philox_x16_regs<G>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
  for (int g = 0; g < G; ++g) _mm512_storeu_si512(out + 16 * g, pick_words_x16(x[g], e[g]));
}

/// Stream-order words of `count` (a multiple of 16) blocks from `first`, four chains at a time.
PINFEED_AVX512_FN void philox_words_x16(const philox_block& c, std::uint32_t first, std::size_t count, std::uint32_t k0,
                                        std::uint32_t k1, std::uint32_t* out) {
  std::size_t j = 0;
  for (; j + 64 <= count; j += 64) words_x16<4>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
  for (; j + 32 <= count; j += 32) words_x16<2>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
  for (; j < count; j += 16) words_x16<1>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
}

/// Element-indexed words of `count` (a multiple of 16) elements, two chains at a time.
PINFEED_AVX512_FN void philox_element_words_x16(const philox_block& c, const std::uint32_t* elements, std::size_t count,
                                                std::uint32_t k0, std::uint32_t k1, std::uint32_t* out) {
  std::size_t j = 0;
  for (; j + 32 <= count; j += 32) element_words_x16<2>(c, elements + j, k0, k1, out + j);
  for (; j < count; j += 16) element_words_x16<1>(c, elements + j, k0, k1, out + j);
}

/// G x 8 Philox4x32-10 blocks at once (AVX2), in registers: lane l of group g has counter
/// {x0[g][l], c1, c2, c3}; x[g][w] holds word w of every lane of group g (independent chains,
/// interleaved round by round).
template <int G>
PINFEED_AVX2_FN inline void philox_x8_regs(const __m256i x0_in[G], std::uint32_t c1, std::uint32_t c2,
                                           std::uint32_t c3, std::uint32_t k0, std::uint32_t k1,
                                           __m256i x[G][4]) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  __m256i x0[G], x1[G], x2[G], x3[G];
  for (int g = 0; g < G; ++g) {
    x0[g] = x0_in[g];
    x1[g] = _mm256_set1_epi32(static_cast<int>(c1));
    x2[g] = _mm256_set1_epi32(static_cast<int>(c2));
    x3[g] = _mm256_set1_epi32(static_cast<int>(c3));
  }
  std::uint32_t ka = k0, kb = k1;
  for (int round = 0; round < 10; ++round) {
    const __m256i ka_v = _mm256_set1_epi32(static_cast<int>(ka)), kb_v = _mm256_set1_epi32(static_cast<int>(kb));
    for (int g = 0; g < G; ++g) {
      // 32x32 -> 64 products of even lanes, then of odd lanes, recombined into hi and lo words.
      const __m256i e0 = _mm256_mul_epu32(x0[g], m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(x0[g], 32), m0);
      const __m256i e1 = _mm256_mul_epu32(x2[g], m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(x2[g], 32), m1);
      const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      x0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, x1[g]), ka_v);
      x1[g] = lo1;
      x2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, x3[g]), kb_v);
      x3[g] = lo0;
    }
    ka += kPhiloxW0;
    kb += kPhiloxW1;
  }
  for (int g = 0; g < G; ++g) {
    x[g][0] = x0[g];
    x[g][1] = x1[g];
    x[g][2] = x2[g];
    x[g][3] = x3[g];
  }
}

/// Word-major group x (x[w]: word w of 8 blocks) to their 32 stream-order words at o.
PINFEED_AVX2_INLINE void store_words_x8(const __m256i x[4], std::uint32_t* o) {
  // 4x4 transposes inside each 128-bit half: r[k] holds blocks k (low half) and 4 + k (high half).
  const __m256i ab_lo = _mm256_unpacklo_epi32(x[0], x[1]), ab_hi = _mm256_unpackhi_epi32(x[0], x[1]);
  const __m256i cd_lo = _mm256_unpacklo_epi32(x[2], x[3]), cd_hi = _mm256_unpackhi_epi32(x[2], x[3]);
  const __m256i r0 = _mm256_unpacklo_epi64(ab_lo, cd_lo), r1 = _mm256_unpackhi_epi64(ab_lo, cd_lo);
  const __m256i r2 = _mm256_unpacklo_epi64(ab_hi, cd_hi), r3 = _mm256_unpackhi_epi64(ab_hi, cd_hi);
  auto* v = reinterpret_cast<__m256i*>(o);
  _mm256_storeu_si256(v, _mm256_permute2x128_si256(r0, r1, 0x20));      // blocks 0, 1
  _mm256_storeu_si256(v + 1, _mm256_permute2x128_si256(r2, r3, 0x20));  // blocks 2, 3
  _mm256_storeu_si256(v + 2, _mm256_permute2x128_si256(r0, r1, 0x31));  // blocks 4, 5
  _mm256_storeu_si256(v + 3, _mm256_permute2x128_si256(r2, r3, 0x31));  // blocks 6, 7
}

/// Lane l's word e[l] & 3 of the word-major group x.
PINFEED_AVX2_INLINE __m256i pick_words_x8(const __m256i x[4], __m256i e) {
  const __m256i w = _mm256_and_si256(e, _mm256_set1_epi32(3));
  __m256i r = _mm256_blendv_epi8(x[0], x[1], _mm256_cmpeq_epi32(w, _mm256_set1_epi32(1)));
  r = _mm256_blendv_epi8(r, x[2], _mm256_cmpeq_epi32(w, _mm256_set1_epi32(2)));
  return _mm256_blendv_epi8(r, x[3], _mm256_cmpeq_epi32(w, _mm256_set1_epi32(3)));
}

/// Stream-order words of the 8G blocks from `first`, as G interleaved chains.
template <int G>
PINFEED_AVX2_INLINE void words_x8(const philox_block& c, std::uint32_t first, std::uint32_t k0, std::uint32_t k1,
                                     std::uint32_t* out) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0[G], x[G][4];
  for (int g = 0; g < G; ++g) c0[g] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first + 8 * g)), lanes);
  philox_x8_regs<G>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
  for (int g = 0; g < G; ++g) store_words_x8(x[g], out + 32 * g);
}

/// Element-indexed words of 8G elements, as G interleaved chains.
template <int G>
PINFEED_AVX2_INLINE void element_words_x8(const philox_block& c, const std::uint32_t* elements, std::uint32_t k0,
                                     std::uint32_t k1, std::uint32_t* out) {
  __m256i e[G], c0[G], x[G][4];
  for (int g = 0; g < G; ++g) {
    e[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(elements + 8 * g));
    c0[g] = _mm256_srli_epi32(e[g], 2);
  }
  philox_x8_regs<G>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
  for (int g = 0; g < G; ++g)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * g), pick_words_x8(x[g], e[g]));
}

/// Stream-order words of `count` (a multiple of 8) blocks from `first`, two chains at a time.
PINFEED_AVX2_FN void philox_words_x8(const philox_block& c, std::uint32_t first, std::size_t count, std::uint32_t k0,
                                     std::uint32_t k1, std::uint32_t* out) {
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16) words_x8<2>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
  for (; j < count; j += 8) words_x8<1>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
}

/// Element-indexed words of `count` (a multiple of 8) elements, two chains at a time.
PINFEED_AVX2_FN void philox_element_words_x8(const philox_block& c, const std::uint32_t* elements, std::size_t count,
                                             std::uint32_t k0, std::uint32_t k1, std::uint32_t* out) {
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16) element_words_x8<2>(c, elements + j, k0, k1, out + j);
  for (; j < count; j += 8) element_words_x8<1>(c, elements + j, k0, k1, out + j);
}

/// G x 4 Philox4x32-10 blocks at once with SSE2 (part of x86-64 itself, so the portable level has
/// it too), in registers: lane l of group g has counter {x0[g][l], c1, c2, c3}; x[g][w] holds word
/// w of every lane of group g. SSE2 has no blend: the halves are merged with masks.
template <int G>
inline void philox_x4_regs(const __m128i x0_in[G], std::uint32_t c1, std::uint32_t c2, std::uint32_t c3,
                           std::uint32_t k0, std::uint32_t k1, __m128i x[G][4]) {
  const __m128i m0 = _mm_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m128i m1 = _mm_set1_epi32(static_cast<int>(kPhiloxM1));
  const __m128i low = _mm_set1_epi64x(0xFFFFFFFFll);  // the even (low) word of each 64-bit half
  __m128i x0[G], x1[G], x2[G], x3[G];
  for (int g = 0; g < G; ++g) {
    x0[g] = x0_in[g];
    x1[g] = _mm_set1_epi32(static_cast<int>(c1));
    x2[g] = _mm_set1_epi32(static_cast<int>(c2));
    x3[g] = _mm_set1_epi32(static_cast<int>(c3));
  }
  std::uint32_t ka = k0, kb = k1;
  for (int round = 0; round < 10; ++round) {
    const __m128i ka_v = _mm_set1_epi32(static_cast<int>(ka)), kb_v = _mm_set1_epi32(static_cast<int>(kb));
    for (int g = 0; g < G; ++g) {
      const __m128i e0 = _mm_mul_epu32(x0[g], m0), o0 = _mm_mul_epu32(_mm_srli_epi64(x0[g], 32), m0);
      const __m128i e1 = _mm_mul_epu32(x2[g], m1), o1 = _mm_mul_epu32(_mm_srli_epi64(x2[g], 32), m1);
      const __m128i lo0 = _mm_or_si128(_mm_and_si128(e0, low), _mm_slli_epi64(o0, 32));
      const __m128i hi0 = _mm_or_si128(_mm_srli_epi64(e0, 32), _mm_andnot_si128(low, o0));
      const __m128i lo1 = _mm_or_si128(_mm_and_si128(e1, low), _mm_slli_epi64(o1, 32));
      const __m128i hi1 = _mm_or_si128(_mm_srli_epi64(e1, 32), _mm_andnot_si128(low, o1));
      x0[g] = _mm_xor_si128(_mm_xor_si128(hi1, x1[g]), ka_v);
      x1[g] = lo1;
      x2[g] = _mm_xor_si128(_mm_xor_si128(hi0, x3[g]), kb_v);
      x3[g] = lo0;
    }
    ka += kPhiloxW0;
    kb += kPhiloxW1;
  }
  for (int g = 0; g < G; ++g) {
    x[g][0] = x0[g];
    x[g][1] = x1[g];
    x[g][2] = x2[g];
    x[g][3] = x3[g];
  }
}

/// Stream-order words of `count` (a multiple of 8) consecutive blocks from `first`, eight at a
/// time as two interleaved SSE2 groups, transposed in registers.
void philox_words_x4(const philox_block& c, std::uint32_t first, std::size_t count, std::uint32_t k0,
                     std::uint32_t k1, std::uint32_t* out) {
  const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
  for (std::size_t j = 0; j < count; j += 8) {
    const __m128i base = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(first + j)), lanes);
    const __m128i c0[2] = {base, _mm_add_epi32(base, _mm_set1_epi32(4))};
    __m128i x[2][4];
    philox_x4_regs<2>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
    for (int g = 0; g < 2; ++g) {
      const __m128i ab_lo = _mm_unpacklo_epi32(x[g][0], x[g][1]), ab_hi = _mm_unpackhi_epi32(x[g][0], x[g][1]);
      const __m128i cd_lo = _mm_unpacklo_epi32(x[g][2], x[g][3]), cd_hi = _mm_unpackhi_epi32(x[g][2], x[g][3]);
      auto* o = reinterpret_cast<__m128i*>(out + 4 * j + 16 * g);
      _mm_storeu_si128(o, _mm_unpacklo_epi64(ab_lo, cd_lo));      // block 0
      _mm_storeu_si128(o + 1, _mm_unpackhi_epi64(ab_lo, cd_lo));  // block 1
      _mm_storeu_si128(o + 2, _mm_unpacklo_epi64(ab_hi, cd_hi));  // block 2
      _mm_storeu_si128(o + 3, _mm_unpackhi_epi64(ab_hi, cd_hi));  // block 3
    }
  }
}

/// Element-indexed words of `count` (a multiple of 8) elements with SSE2, eight at a time as two
/// interleaved groups; each lane's word is chosen with masks.
void philox_element_words_x4(const philox_block& c, const std::uint32_t* elements, std::size_t count,
                             std::uint32_t k0, std::uint32_t k1, std::uint32_t* out) {
  const __m128i three = _mm_set1_epi32(3), one = _mm_set1_epi32(1), two = _mm_set1_epi32(2);
  for (std::size_t j = 0; j < count; j += 8) {
    const __m128i e[2] = {_mm_loadu_si128(reinterpret_cast<const __m128i*>(elements + j)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(elements + j + 4))};
    const __m128i c0[2] = {_mm_srli_epi32(e[0], 2), _mm_srli_epi32(e[1], 2)};
    __m128i x[2][4];
    philox_x4_regs<2>(c0, c.v[1], c.v[2], c.v[3], k0, k1, x);
    for (int g = 0; g < 2; ++g) {
      const __m128i w = _mm_and_si128(e[g], three);
      const __m128i is1 = _mm_cmpeq_epi32(w, one), is2 = _mm_cmpeq_epi32(w, two), is3 = _mm_cmpeq_epi32(w, three);
      const __m128i is0 = _mm_cmpeq_epi32(w, _mm_setzero_si128());
      const __m128i r = _mm_or_si128(_mm_or_si128(_mm_and_si128(is0, x[g][0]), _mm_and_si128(is1, x[g][1])),
                                     _mm_or_si128(_mm_and_si128(is2, x[g][2]), _mm_and_si128(is3, x[g][3])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j + 4 * g), r);
    }
  }
}
#undef PINFEED_AVX512_INLINE
#undef PINFEED_AVX2_INLINE
#undef PINFEED_AVX512_FN
#undef PINFEED_AVX2_FN
#endif  // PINFEED_X86

/// Philox4x32-10 of `blocks` consecutive counters (first, c1, c2, c3) into stream-order words, eight
/// independent blocks interleaved: the portable code, whose rounds the compiler can overlap or
/// vectorize with the baseline instruction set (SSE2, NEON). Same bits as philox4x32_10().
void philox_words_portable(std::uint32_t first, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0,
                           std::uint32_t k1, std::size_t blocks, std::uint32_t* out) noexcept {
  constexpr std::size_t kLanes = 8;
  std::size_t j = 0;
  for (; j + kLanes <= blocks; j += kLanes) {
    std::uint32_t x0[kLanes], x1[kLanes], x2[kLanes], x3[kLanes];
    for (std::size_t l = 0; l < kLanes; ++l) {
      x0[l] = first + static_cast<std::uint32_t>(j + l);
      x1[l] = c1;
      x2[l] = c2;
      x3[l] = c3;
    }
    std::uint32_t ka = k0, kb = k1;
    for (int round = 0; round < 10; ++round) {
      for (std::size_t l = 0; l < kLanes; ++l) {
        const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x0[l], p1 = std::uint64_t{kPhiloxM1} * x2[l];
        x0[l] = static_cast<std::uint32_t>(p1 >> 32) ^ x1[l] ^ ka;
        x1[l] = static_cast<std::uint32_t>(p1);
        x2[l] = static_cast<std::uint32_t>(p0 >> 32) ^ x3[l] ^ kb;
        x3[l] = static_cast<std::uint32_t>(p0);
      }
      ka += kPhiloxW0;
      kb += kPhiloxW1;
    }
    for (std::size_t l = 0; l < kLanes; ++l) {
      std::uint32_t* o = out + 4 * (j + l);
      o[0] = x0[l];
      o[1] = x1[l];
      o[2] = x2[l];
      o[3] = x3[l];
    }
  }
  for (; j < blocks; ++j) {
    const philox_block b = philox4x32_10(philox_block{{first + static_cast<std::uint32_t>(j), c1, c2, c3}}, k0, k1);
    std::memcpy(out + 4 * j, b.v, 16);
  }
}

}  // namespace

simd_level parse_simd_level(std::string_view name) {
  if (name == "scalar") return simd_level::scalar;
  if (name == "avx2") return simd_level::avx2;
  if (name == "avx512") return simd_level::avx512;
  throw pinfeed::invalid_argument("SIMD level '" + std::string(name) + "' is not one of scalar, avx2, avx512");
}

simd_level cpu_simd_support() noexcept {
  static const simd_level level = detect();
  return level;
}
void set_simd_level(simd_level level) noexcept {
  level_ref().store(std::min(static_cast<int>(level), static_cast<int>(cpu_simd_support())), std::memory_order_relaxed);
}
simd_level simd_level_in_use() noexcept { return static_cast<simd_level>(level_ref().load(std::memory_order_relaxed)); }
std::string to_string(simd_level level) {
  switch (level) {
    case simd_level::scalar: return "scalar";
    case simd_level::avx2: return "avx2";
    case simd_level::avx512: return "avx512";
  }
  return "?";
}

void philox_words(const philox_stream& s, std::uint32_t first_block, std::size_t blocks, std::uint32_t* out) noexcept {
  std::size_t j = 0;
#if PINFEED_X86
  const simd_level level = simd_level_in_use();
  if (level == simd_level::avx512) {
    const std::size_t sixteens = blocks / 16 * 16;
    philox_words_x16(s.counter(0), first_block, sixteens, s.key_lo(), s.key_hi(), out);
    j = sixteens;
  }
  const std::size_t eights = (blocks - j) / 8 * 8;
  if (level >= simd_level::avx2)
    philox_words_x8(s.counter(0), first_block + static_cast<std::uint32_t>(j), eights, s.key_lo(), s.key_hi(),
                    out + 4 * j);
  else
    philox_words_x4(s.counter(0), first_block + static_cast<std::uint32_t>(j), eights, s.key_lo(), s.key_hi(),
                    out + 4 * j);
  j += eights;
#endif
  const philox_block c = s.counter(0);
  philox_words_portable(first_block + static_cast<std::uint32_t>(j), c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(),
                        blocks - j, out + 4 * j);
}

void philox_element_words(const philox_stream& s, const std::uint32_t* elements, std::size_t count,
                          std::uint32_t* out) noexcept {
  std::size_t j = 0;
#if PINFEED_X86
  const simd_level level = simd_level_in_use();
  if (level == simd_level::avx512) {
    const std::size_t sixteens = count / 16 * 16;
    philox_element_words_x16(s.counter(0), elements, sixteens, s.key_lo(), s.key_hi(), out);
    j = sixteens;
  }
  const std::size_t eights = (count - j) / 8 * 8;
  if (level >= simd_level::avx2)
    philox_element_words_x8(s.counter(0), elements + j, eights, s.key_lo(), s.key_hi(), out + j);
  else
    philox_element_words_x4(s.counter(0), elements + j, eights, s.key_lo(), s.key_hi(), out + j);
  j += eights;
#endif
  for (; j < count; ++j) out[j] = s.word_at(elements[j]);
}

void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept {
  const std::size_t full_blocks = out.size() / 16;
  std::size_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(out.data()) % alignof(std::uint32_t) == 0) {
    // Aligned: the words go straight into the output (x86, aarch64 and CUDA are little-endian).
    philox_words(stream, 0, full_blocks, reinterpret_cast<std::uint32_t*>(out.data()));
    done = full_blocks;
  }
  constexpr std::size_t kChunkBlocks = 256;  // 4 KiB of words on the stack at a time
  std::uint32_t words[4 * kChunkBlocks];
  const std::size_t blocks = (out.size() + 15) / 16;
  for (std::size_t b = done; b < blocks; b += kChunkBlocks) {
    const std::size_t n = std::min(kChunkBlocks, blocks - b);
    philox_words(stream, static_cast<std::uint32_t>(b), n, words);
    const std::size_t offset = 16 * b;
    std::memcpy(out.data() + offset, words, std::min(16 * n, out.size() - offset));
  }
}

}  // namespace pinfeed
