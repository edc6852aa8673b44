// The CPU sampler's candidate filter over one chunk of a row, per instruction set (cpu_filter.hpp).
#include "cpu_filter.hpp"

#include "cpu_simd.hpp"

namespace pinfeed::ops::cpu_sampler {
namespace {

/// The candidate filter of one chunk: appends (key << 32 | index) of every item of class c with
/// key <= thr[c] (class 0 positive, 1 negative; `only` >= 0 restricts to one class).
template <class L>
void filter_chunk_scalar(const L* labels, const std::uint32_t* keys, std::size_t len, std::uint64_t base, L neg, L ign,
                         const std::uint32_t thr[2], int only, std::uint64_t* out[2], std::size_t added[2],
                         std::int64_t seen[2]) {
  for (std::size_t j = 0; j < len; ++j) {
    const L l = labels[j];
    const std::uint32_t key = keys[j];
    const int c = l == neg ? 1 : 0;
    seen[0] += l != neg && l != ign;
    seen[1] += l == neg;
    const bool take = l != ign && key <= thr[c] && (only < 0 || only == c);
    // Branch-free append: always write, advance only when taken.
    out[c][added[c]] = (static_cast<std::uint64_t>(key) << 32) | (base + j);
    added[c] += take;
  }
}

#if PINFEED_X86
/// Fetches the labels one chunk past these 64 (the next chunk's, whose keys are computed next):
/// the filter would otherwise wait on them, as the hardware prefetcher restarts at every 4 KiB
/// page. Spread over the filter's blocks, the prefetches never queue up. (A prefetch past the
/// row's end is harmless: prefetches do not fault.)
template <class L>
inline void prefetch_next_chunk(const L* labels) {
  const auto* line = reinterpret_cast<const char*>(labels + kChunk);
  for (std::size_t b = 0; b < 64 * sizeof(L); b += 64) __builtin_prefetch(line + b);
}

/// Appends the items of one 64-item block whose bits are set in `take` (bit j: item j), in index
/// order: about one item in ten is taken, so walking the set bits beats packing every vector.
/// The bits are walked four at a time, always all four (writing up to three items past the
/// appended ones, which the caller's buffer has room for): a loop of one trip for most blocks
/// instead of one per item, whose exit the branch predictor missed on nearly every block.
inline std::size_t append_taken(std::uint64_t take, const std::uint32_t* keys, std::uint64_t base, std::uint64_t* out,
                                std::size_t n) {
  const int count = __builtin_popcountll(take);
  for (int t = 0; t < count; t += 4) {
    for (int u = 0; u < 4; ++u) {
      // With no bit left this reads item 63's key and writes past the appended items.
      const int j = __builtin_ctzll(take | (std::uint64_t{1} << 63));
      out[n + static_cast<std::size_t>(t + u)] =
          (static_cast<std::uint64_t>(keys[j]) << 32) | (base + static_cast<std::uint64_t>(j));
      take &= take - 1;
    }
  }
  return n + static_cast<std::size_t>(count);
}

/// Bits of the four labels at l equal to v (bit i: label i), with SSE2 (no 64-bit compare there:
/// both 32-bit halves must match).
template <class L>
inline unsigned equal_bits_sse2(const L* l, __m128i v) {
  if constexpr (sizeof(L) == 8) {
    const auto pair = [&](const L* p) {
      const __m128i t = _mm_cmpeq_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), v);
      return static_cast<unsigned>(
          _mm_movemask_pd(_mm_castsi128_pd(_mm_and_si128(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))))));
    };
    return pair(l) | (pair(l + 2) << 2);
  } else {
    return static_cast<unsigned>(
        _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(l)), v))));
  }
}

/// The bits of a 64-item block (bit j: item j): labels equal to negative_label, to ignore_label,
/// and keys at or below each class's threshold.
struct block_bits {
  std::uint64_t neg = 0, ign = 0, pos_key_ok = 0, neg_key_ok = 0;
};

/// The candidate filter over 64-item blocks: `bits(labels, keys)` compares a block (one per
/// instruction set), and the set bits of each class are appended; the tail goes through
/// filter_chunk_scalar. Inlined into each instruction set's filter, whose target `bits` has.
template <class L, class Bits>
inline __attribute__((always_inline)) void filter_blocks(const L* labels, const std::uint32_t* keys, std::size_t len,
                                                         std::uint64_t base, L neg, L ign, const std::uint32_t thr[2],
                                                         int only, std::uint64_t* out[2], std::size_t added[2],
                                                         std::int64_t seen[2], Bits bits) {
  const std::uint64_t allow_pos = only == 1 ? 0 : ~std::uint64_t{0}, allow_neg = only == 0 ? 0 : ~std::uint64_t{0};
  std::size_t n_pos = added[0], n_neg = added[1];
  std::int64_t seen_pos = 0, seen_neg = 0;
  std::size_t j0 = 0;
  for (; j0 + 64 <= len; j0 += 64) {
    prefetch_next_chunk(labels + j0);
    const block_bits b = bits(labels + j0, keys + j0);
    const std::uint64_t pos_bits = ~(b.neg | b.ign);
    seen_pos += __builtin_popcountll(pos_bits);
    seen_neg += __builtin_popcountll(b.neg);
    n_pos = append_taken(pos_bits & b.pos_key_ok & allow_pos, keys + j0, base + j0, out[0], n_pos);
    n_neg = append_taken(b.neg & b.neg_key_ok & allow_neg, keys + j0, base + j0, out[1], n_neg);
  }
  added[0] = n_pos;
  added[1] = n_neg;
  seen[0] += seen_pos;
  seen[1] += seen_neg;
  filter_chunk_scalar(labels + j0, keys + j0, len - j0, base + j0, neg, ign, thr, only, out, added, seen);
}

/// The filter with SSE2 (part of x86-64 itself: the portable level's filter there), four items
/// compared at once. Keys compare unsigned as signed with the sign bit flipped.
template <class L>
void filter_chunk_sse2(const L* labels, const std::uint32_t* keys, std::size_t len, std::uint64_t base, L neg, L ign,
                       const std::uint32_t thr[2], int only, std::uint64_t* out[2], std::size_t added[2],
                       std::int64_t seen[2]) {
  const __m128i flip = _mm_set1_epi32(static_cast<int>(0x80000000u));
  const __m128i thr_pos = _mm_set1_epi32(static_cast<int>(thr[0] ^ 0x80000000u));
  const __m128i thr_neg = _mm_set1_epi32(static_cast<int>(thr[1] ^ 0x80000000u));
  const __m128i neg_v =
      sizeof(L) == 8 ? _mm_set1_epi64x(static_cast<long long>(neg)) : _mm_set1_epi32(static_cast<int>(neg));
  const __m128i ign_v =
      sizeof(L) == 8 ? _mm_set1_epi64x(static_cast<long long>(ign)) : _mm_set1_epi32(static_cast<int>(ign));
  filter_blocks(
      labels, keys, len, base, neg, ign, thr, only, out, added, seen, [&](const L* l, const std::uint32_t* k) {
        block_bits b;
        for (std::size_t q = 0; q < 64; q += 4) {
          const __m128i key = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + q)), flip);
          b.neg |= static_cast<std::uint64_t>(equal_bits_sse2(l + q, neg_v)) << q;
          b.ign |= static_cast<std::uint64_t>(equal_bits_sse2(l + q, ign_v)) << q;
          b.pos_key_ok |= static_cast<std::uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, thr_pos))))
                          << q;
          b.neg_key_ok |= static_cast<std::uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, thr_neg))))
                          << q;
        }
        b.pos_key_ok = ~b.pos_key_ok;  // the compares said "above"
        b.neg_key_ok = ~b.neg_key_ok;
        return b;
      });
}

/// The filter with AVX2, eight items compared at once.
template <class L>
__attribute__((target("avx2,popcnt,bmi"))) void filter_chunk_avx2(const L* labels, const std::uint32_t* keys,
                                                                   std::size_t len, std::uint64_t base, L neg, L ign,
                                                                   const std::uint32_t thr[2], int only,
                                                                   std::uint64_t* out[2], std::size_t added[2],
                                                                   std::int64_t seen[2]) {
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i thr_pos = _mm256_set1_epi32(static_cast<int>(thr[0] ^ 0x80000000u));
  const __m256i thr_neg = _mm256_set1_epi32(static_cast<int>(thr[1] ^ 0x80000000u));
  const auto movemask_pd = [](__m256i m) __attribute__((target("avx2"))) {
    return static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(m)));
  };
  const auto movemask_ps = [](__m256i m) __attribute__((target("avx2"))) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m)));
  };
  filter_blocks(
      labels, keys, len, base, neg, ign, thr, only, out, added, seen,
      [&](const L* l, const std::uint32_t* k) __attribute__((target("avx2,popcnt,bmi"))) {
        block_bits b;
        for (std::size_t q = 0; q < 64; q += 8) {
          unsigned is_neg, is_ign;
          if constexpr (sizeof(L) == 8) {
            const __m256i neg_v = _mm256_set1_epi64x(static_cast<long long>(neg));
            const __m256i ign_v = _mm256_set1_epi64x(static_cast<long long>(ign));
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l + q));
            const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l + q + 4));
            is_neg = movemask_pd(_mm256_cmpeq_epi64(x, neg_v)) | (movemask_pd(_mm256_cmpeq_epi64(y, neg_v)) << 4);
            is_ign = movemask_pd(_mm256_cmpeq_epi64(x, ign_v)) | (movemask_pd(_mm256_cmpeq_epi64(y, ign_v)) << 4);
          } else {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l + q));
            is_neg = movemask_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(static_cast<int>(neg))));
            is_ign = movemask_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(static_cast<int>(ign))));
          }
          const __m256i key = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + q)), flip);
          b.neg |= static_cast<std::uint64_t>(is_neg) << q;
          b.ign |= static_cast<std::uint64_t>(is_ign) << q;
          b.pos_key_ok |= static_cast<std::uint64_t>(movemask_ps(_mm256_cmpgt_epi32(key, thr_pos))) << q;
          b.neg_key_ok |= static_cast<std::uint64_t>(movemask_ps(_mm256_cmpgt_epi32(key, thr_neg))) << q;
        }
        b.pos_key_ok = ~b.pos_key_ok;  // the compares said "above"
        b.neg_key_ok = ~b.neg_key_ok;
        return b;
      });
}

/// The filter with AVX-512: sixteen keys and eight labels compared at once straight into mask
/// registers. (No compress-store: vpcompressq to memory is microcoded and several times slower
/// on AMD Zen 4.)
template <class L>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt,bmi"))) void filter_chunk_avx512(
    const L* labels, const std::uint32_t* keys, std::size_t len, std::uint64_t base, L neg, L ign,
    const std::uint32_t thr[2], int only, std::uint64_t* out[2], std::size_t added[2], std::int64_t seen[2]) {
  const __m512i thr_pos = _mm512_set1_epi32(static_cast<int>(thr[0]));
  const __m512i thr_neg = _mm512_set1_epi32(static_cast<int>(thr[1]));
  filter_blocks(
      labels, keys, len, base, neg, ign, thr, only, out, added, seen,
      [&](const L* l, const std::uint32_t* k) __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) {
        block_bits b;
        for (std::size_t q = 0; q < 64; q += 16) {
          const __m512i key = _mm512_loadu_si512(k + q);
          b.pos_key_ok |= static_cast<std::uint64_t>(_mm512_cmple_epu32_mask(key, thr_pos)) << q;
          b.neg_key_ok |= static_cast<std::uint64_t>(_mm512_cmple_epu32_mask(key, thr_neg)) << q;
          if constexpr (sizeof(L) == 8) {
            const __m512i neg_v = _mm512_set1_epi64(static_cast<long long>(neg));
            const __m512i ign_v = _mm512_set1_epi64(static_cast<long long>(ign));
            const __m512i x = _mm512_loadu_si512(l + q), y = _mm512_loadu_si512(l + q + 8);
            const auto pair = [](__mmask8 lo, __mmask8 hi) {
              return static_cast<std::uint64_t>(lo | (static_cast<unsigned>(hi) << 8));
            };
            b.neg |= pair(_mm512_cmpeq_epi64_mask(x, neg_v), _mm512_cmpeq_epi64_mask(y, neg_v)) << q;
            b.ign |= pair(_mm512_cmpeq_epi64_mask(x, ign_v), _mm512_cmpeq_epi64_mask(y, ign_v)) << q;
          } else {
            const __m512i x = _mm512_loadu_si512(l + q);
            b.neg |= static_cast<std::uint64_t>(_mm512_cmpeq_epi32_mask(x, _mm512_set1_epi32(static_cast<int>(neg))))
                     << q;
            b.ign |= static_cast<std::uint64_t>(_mm512_cmpeq_epi32_mask(x, _mm512_set1_epi32(static_cast<int>(ign))))
                     << q;
          }
        }
        return b;
      });
}
#endif  // PINFEED_X86

}  // namespace

template <class L>
void filter_chunk([[maybe_unused]] simd_level level, const L* labels, const std::uint32_t* keys, std::size_t len,
                  std::uint64_t base, L neg, L ign, const std::uint32_t thr[2], int only, std::uint64_t* out[2],
                  std::size_t added[2], std::int64_t seen[2]) {
#if PINFEED_X86
  if (level == simd_level::avx512)
    filter_chunk_avx512(labels, keys, len, base, neg, ign, thr, only, out, added, seen);
  else if (level == simd_level::avx2)
    filter_chunk_avx2(labels, keys, len, base, neg, ign, thr, only, out, added, seen);
  else
    filter_chunk_sse2(labels, keys, len, base, neg, ign, thr, only, out, added, seen);
#else
  filter_chunk_scalar(labels, keys, len, base, neg, ign, thr, only, out, added, seen);
#endif
}

template void filter_chunk<std::int32_t>(simd_level, const std::int32_t*, const std::uint32_t*, std::size_t,
                                         std::uint64_t, std::int32_t, std::int32_t, const std::uint32_t[2], int,
                                         std::uint64_t* [2], std::size_t[2], std::int64_t[2]);
template void filter_chunk<std::int64_t>(simd_level, const std::int64_t*, const std::uint32_t*, std::size_t,
                                         std::uint64_t, std::int64_t, std::int64_t, const std::uint32_t[2], int,
                                         std::uint64_t* [2], std::size_t[2], std::int64_t[2]);

}  // namespace pinfeed::ops::cpu_sampler
