#pragma once
/// @file philox_lanes.hpp
/// Philox4x32-10 on vectors of 32-bit lanes, written once for every x86 vector width. A lane set
/// V gives its vector type (V::u32, a GCC vector of 32-bit words), the 32x32 -> 64-bit multiply
/// split into high and low words, and the transpose of a word-major group into stream order: the
/// parts that need the instruction set's own instructions. The counters, the rounds, the word
/// picking and the loops over a range are here.
///
/// A file includes this header inside its PINFEED_TARGET_BEGIN region, after philox_x86.hpp, so
/// that the instantiations here get that region's instruction set; V is local to that file.

#include "philox_x86.hpp"

#define PINFEED_LANES_INLINE inline __attribute__((always_inline))

namespace pinfeed::detail::lanes {

/// The vector types of lane sets of 4, 8 and 16 words (GCC vectors, with their operators).
struct words4 { using u32 = std::uint32_t __attribute__((vector_size(16))); };
struct words8 { using u32 = std::uint32_t __attribute__((vector_size(32))); };
struct words16 { using u32 = std::uint32_t __attribute__((vector_size(64))); };

/// The number of 32-bit lanes of lane set V.
template <class V>
inline constexpr int width = static_cast<int>(sizeof(typename V::u32) / sizeof(std::uint32_t));

/// G x width<V> Philox4x32-10 blocks in registers: lane l of group g has the counter
/// {c0[g][l], c.v[1], c.v[2], c.v[3]}; x[g][w] gets word w of every lane of group g. The G groups
/// are independent chains, interleaved round by round so that one group's multiplies hide
/// another's latency.
template <class V, int G>
PINFEED_LANES_INLINE void blocks(const typename V::u32 c0[G], const philox_block& c, std::uint32_t k0,
                                 std::uint32_t k1, typename V::u32 x[G][4]) {
  using u32 = typename V::u32;
  const u32 m0 = u32{} + kPhiloxM0, m1 = u32{} + kPhiloxM1;
  for (int g = 0; g < G; ++g) {
    x[g][0] = c0[g];
    x[g][1] = u32{} + c.v[1];
    x[g][2] = u32{} + c.v[2];
    x[g][3] = u32{} + c.v[3];
  }
  for (int round = 0; round < 10; ++round) {
    for (int g = 0; g < G; ++g) {
      u32 hi0, lo0, hi1, lo1;
      V::mul_hi_lo(x[g][0], m0, hi0, lo0);
      V::mul_hi_lo(x[g][2], m1, hi1, lo1);
      x[g][0] = hi1 ^ x[g][1] ^ k0;
      x[g][1] = lo1;
      x[g][2] = hi0 ^ x[g][3] ^ k1;
      x[g][3] = lo0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
}

/// The 4x4 transposes of 32-bit words inside each 128-bit part of the word-major group x (x[w]:
/// word w of width<V> blocks), with R the instruction set's register and lo32 ... hi64 its unpack
/// instructions: part q of r[k] gets the four words of block 4q + k.
template <class R, R (*lo32)(R, R), R (*hi32)(R, R), R (*lo64)(R, R), R (*hi64)(R, R), class U>
PINFEED_LANES_INLINE void transpose_parts(const U x[4], R r[4]) {
  const R a = R(x[0]), b = R(x[1]), c = R(x[2]), d = R(x[3]);
  const R ab_lo = lo32(a, b), ab_hi = hi32(a, b), cd_lo = lo32(c, d), cd_hi = hi32(c, d);
  r[0] = lo64(ab_lo, cd_lo);
  r[1] = hi64(ab_lo, cd_lo);
  r[2] = lo64(ab_hi, cd_hi);
  r[3] = hi64(ab_hi, cd_hi);
}

/// Stream-order words of the G x width<V> blocks from `first`, as G interleaved chains.
template <class V, int G>
PINFEED_LANES_INLINE void words(const philox_block& c, std::uint32_t first, std::uint32_t k0, std::uint32_t k1,
                                std::uint32_t* out) {
  typename V::u32 lane{}, c0[G], x[G][4];
  for (int l = 0; l < width<V>; ++l) lane[l] = static_cast<std::uint32_t>(l);
  for (int g = 0; g < G; ++g) c0[g] = lane + (first + static_cast<std::uint32_t>(width<V> * g));
  blocks<V, G>(c0, c, k0, k1, x);
  for (int g = 0; g < G; ++g) V::store_blocks(x[g], out + 4 * width<V> * g);
}

/// Element-indexed words of G x width<V> elements, as G interleaved chains: lane l computes block
/// elements[l] >> 2 and keeps its word elements[l] & 3.
template <class V, int G>
PINFEED_LANES_INLINE void element_words(const philox_block& c, const std::uint32_t* elements, std::uint32_t k0,
                                        std::uint32_t k1, std::uint32_t* out) {
  using u32 = typename V::u32;
  u32 e[G], c0[G], x[G][4];
  for (int g = 0; g < G; ++g) {
    __builtin_memcpy(&e[g], elements + width<V> * g, sizeof(u32));
    c0[g] = e[g] >> 2;
  }
  blocks<V, G>(c0, c, k0, k1, x);
  for (int g = 0; g < G; ++g) {
    const u32 w = e[g] & 3;
    u32 r = w == 1 ? x[g][1] : x[g][0];
    r = w == 2 ? x[g][2] : r;
    r = w == 3 ? x[g][3] : r;
    __builtin_memcpy(out + width<V> * g, &r, sizeof(u32));
  }
}

/// Stream-order words of `count` (a multiple of width<V>) blocks from `first`: G chains at a time
/// while that many blocks remain, then G / 2, down to one.
template <class V, int G>
void words_run(const philox_block& c, std::uint32_t first, std::size_t count, std::uint32_t k0, std::uint32_t k1,
               std::uint32_t* out) {
  constexpr std::size_t step = std::size_t{G} * width<V>;
  std::size_t j = 0;
  for (; j + step <= count; j += step) words<V, G>(c, first + static_cast<std::uint32_t>(j), k0, k1, out + 4 * j);
  if constexpr (G > 1) words_run<V, G / 2>(c, first + static_cast<std::uint32_t>(j), count - j, k0, k1, out + 4 * j);
}

/// Element-indexed words of `count` (a multiple of width<V>) elements, G chains at a time, then
/// fewer.
template <class V, int G>
void element_words_run(const philox_block& c, const std::uint32_t* elements, std::size_t count, std::uint32_t k0,
                       std::uint32_t k1, std::uint32_t* out) {
  constexpr std::size_t step = std::size_t{G} * width<V>;
  std::size_t j = 0;
  for (; j + step <= count; j += step) element_words<V, G>(c, elements + j, k0, k1, out + j);
  if constexpr (G > 1) element_words_run<V, G / 2>(c, elements + j, count - j, k0, k1, out + j);
}

/// The kernels of lane set V: `words_chains` and `element_chains` interleaved chains at most, on
/// counts that are multiples of `multiple` (of width<V>).
template <class V, int words_chains, int element_chains, std::size_t multiple>
constexpr philox_kernels kernels() {
  static_assert(multiple % width<V> == 0);
  return {&words_run<V, words_chains>, &element_words_run<V, element_chains>, multiple};
}

}  // namespace pinfeed::detail::lanes
