// Host side of sampler.hpp: validation and the reference implementation.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/runtime/detail/parallel.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/random.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define PINFEED_X86 1
// GCC 12's AVX-512 headers read _mm512_undefined_* values and warn about them (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define PINFEED_X86 0
#endif

namespace pinfeed::ops {

std::int64_t positive_target(const sampler_params& p) noexcept {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(p.k) * p.positive_fraction));
}

namespace detail {
void validate_shapes(const sampler_args& a, const sampler_params& p) {
  auto fail = [](const std::string& what) { throw pinfeed::invalid_argument("balanced sampler: " + what); };
  if (p.k < 0) fail("k must be >= 0, got " + std::to_string(p.k));
  if (!(p.positive_fraction >= 0.0 && p.positive_fraction <= 1.0))
    fail("positive_fraction must be in [0, 1], got " + std::to_string(p.positive_fraction));
  if (p.negative_label == p.ignore_label)
    fail("negative_label and ignore_label are both " + std::to_string(p.negative_label));
  if (a.rows < 0) fail("rows must be >= 0, got " + std::to_string(a.rows));
  if (a.n < 0) fail("n must be >= 0, got " + std::to_string(a.n));
  if (a.n > 0xFFFFFFFFll) fail("n must be below 2^32, got " + std::to_string(a.n));
  if (a.label_type != dtype::i32 && a.label_type != dtype::i64)
    fail("labels must be int32 or int64, got " + std::string(dtype_name(a.label_type)));
  if (a.index_type != dtype::i32 && a.index_type != dtype::i64)
    fail("indices must be int32 or int64, got " + std::string(dtype_name(a.index_type)));
  if (a.index_type == dtype::i32 && a.n > 0x7FFFFFFFll)
    fail("int32 indices cannot address n = " + std::to_string(a.n) + " items");
  if (a.label_type == dtype::i32) {
    const auto fits = [](std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
    if (!fits(p.negative_label) || !fits(p.ignore_label))
      fail("negative_label/ignore_label do not fit int32 labels");
  }
  if (a.features != nullptr && a.feature_bytes == 0) fail("features given with feature_bytes = 0");
}
}  // namespace detail

namespace detail {
void validate_gpu_shapes(const sampler_args& a, const sampler_params& p, bool running) {
  validate_shapes(a, p);
  if (running) validate(a, p);
  if (p.k > 0x7FFFFFFFll)
    throw pinfeed::invalid_argument("balanced sampler (GPU): k = " + std::to_string(p.k) + " exceeds 2^31 - 1");
  if (a.rows * std::max<std::int64_t>(p.k, 1) > 0x7FFFFFFFll)
    throw pinfeed::invalid_argument("balanced sampler (GPU): rows * k = " + std::to_string(a.rows * p.k) +
                                " exceeds 2^31 - 1");
  if (a.rows > 65535)
    throw pinfeed::invalid_argument("balanced sampler (GPU): rows = " + std::to_string(a.rows) +
                                " exceeds 65535 per call; split the batch");
}

}  // namespace detail

void validate(const sampler_args& a, const sampler_params& p) {
  detail::validate_shapes(a, p);
  auto fail = [](const std::string& what) { throw pinfeed::invalid_argument("balanced sampler: " + what); };
  const bool work = a.rows > 0;
  if (work && a.n > 0 && a.labels == nullptr) fail("labels is a null pointer");
  if (work && p.k > 0 && a.indices == nullptr) fail("indices is a null pointer");
  if (a.status != nullptr && reinterpret_cast<std::uintptr_t>(a.status) % alignof(std::uint64_t) != 0)
    fail("status is not aligned to 8 bytes");
  if (work && p.k > 0 && a.features != nullptr && a.gathered_features == nullptr)
    fail("features given but gathered_features is a null pointer");
  // With n = 0 there is nothing to gather from: an empty feature array may well be a null pointer.
  if (a.features == nullptr && a.gathered_features != nullptr && a.n > 0)
    fail("gathered_features given without features");
}

namespace {

/// Sorts distinct 64-bit items whose top bits are uniformly random (a Philox key above a position)
/// in increasing order: two stable radix passes order them by their top 2b bits, and one
/// insertion pass orders what shares those (about n^2 / 2^(2b+1) pairs, so it rarely moves
/// anything). b is 8 up to 2^15 items: the 256 write positions of a pass stay in L1, where 2048
/// spread over 128 KiB and each write waited on L2 (a quarter faster at 10^4 items). Past that,
/// b = 11, so that the insertion pass stays short.
void sort_random_keyed(std::vector<std::uint64_t>& v, std::vector<std::uint64_t>& scratch) {
  const std::size_t n = v.size();
  if (n < 256) {
    std::sort(v.begin(), v.end());
    return;
  }
  const int bits = n <= (std::size_t{1} << 15) ? 8 : 11;
  const std::size_t buckets = std::size_t{1} << bits;
  const std::uint64_t mask = buckets - 1;
  const int shifts[2] = {64 - 2 * bits, 64 - bits};
  std::array<std::uint32_t, 2 * 2048> count{};  // both histograms in one read
  for (const std::uint64_t x : v) {
    ++count[(x >> shifts[0]) & mask];
    ++count[buckets + (x >> shifts[1])];
  }
  scratch.resize(n);
  for (int pass = 0; pass < 2; ++pass) {
    std::uint32_t* c = count.data() + pass * buckets;
    const int shift = shifts[pass];
    std::uint32_t sum = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::uint32_t t = c[b];
      c[b] = sum;
      sum += t;
    }
    for (const std::uint64_t x : v) scratch[c[(x >> shift) & mask]++] = x;
    v.swap(scratch);
  }
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint64_t x = v[i];
    if (v[i - 1] <= x) continue;
    std::size_t j = i;
    do {
      v[j] = v[j - 1];
      --j;
    } while (j > 0 && v[j - 1] > x);
    v[j] = x;
  }
}

/// An append buffer whose storage is always constructed, so items can be written past `size`
/// before deciding whether to keep them.
struct append_buffer {
  std::vector<std::uint64_t> storage;
  std::size_t size = 0;
  void clear() noexcept { size = 0; }
  void make_room(std::size_t extra) {
    if (storage.size() < size + extra) storage.resize(std::max(storage.size() * 2, size + extra));
  }
  std::uint64_t* begin() noexcept { return storage.data(); }
  std::uint64_t* end() noexcept { return storage.data() + size; }
};

/// Per-thread scratch, reused across rows.
struct row_scratch {
  std::vector<std::uint32_t> keys;
  append_buffer cand[2];
  std::vector<std::uint64_t> tmp;
  std::vector<std::uint32_t> sel, ord;
  std::vector<std::uint64_t> order, sort_tmp;
  std::vector<std::uint32_t> pos;
};

constexpr std::size_t kChunk = 1024;  // items per key-generation chunk (a multiple of 16)

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

/// memcpy with the common small row sizes known at compile time (inlined moves, no call).
inline void copy_row(std::byte* dst, const std::byte* src, std::size_t bytes) {
  switch (bytes) {
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    case 16: std::memcpy(dst, src, 16); return;
    case 32: std::memcpy(dst, src, 32); return;
    case 64: std::memcpy(dst, src, 64); return;
    case 128: std::memcpy(dst, src, 128); return;
    default: std::memcpy(dst, src, bytes);
  }
}

/// Rows ahead that the feature gather fetches: picks sit ~n/k rows apart, too irregular for the
/// hardware prefetcher.
constexpr std::int64_t kRowPrefetch = 64;

/// out row at[q] = in row from[q] for q < rows, reading in q order (from[] increases: forward
/// sweeps over the input, friendly to the TLB, rows fetched kRowPrefetch ahead); `copy(dst, src)`
/// moves one row. Inlined into each caller, whose target `copy` has.
template <class Copy>
inline __attribute__((always_inline)) void scatter_rows_with(std::byte* out, const std::byte* in,
                                                             const std::uint32_t* from, const std::uint32_t* at,
                                                             std::int64_t rows, std::size_t fb, Copy copy) {
  for (std::int64_t q = 0; q < rows; ++q) {
    if (q + kRowPrefetch < rows)
      for (std::size_t b = 0; b < fb; b += 64) __builtin_prefetch(in + from[q + kRowPrefetch] * fb + b);
    copy(out + at[q] * fb, in + from[q] * fb);
  }
}

/// The same with plain stores, for any row size and alignment.
void scatter_rows(std::byte* out, const std::byte* in, const std::uint32_t* from, const std::uint32_t* at,
                  std::int64_t rows, std::size_t fb) {
  scatter_rows_with(out, in, from, at, rows, fb,
                    [fb](std::byte* dst, const std::byte* src) { copy_row(dst, src, fb); });
}

#if PINFEED_X86
/// The same with non-temporal 32-byte stores (rows a multiple of 32 bytes, out 32-byte aligned):
/// whole lines written once and not read again here, so no read-for-ownership of each output
/// line, wherever in the output it lies.
__attribute__((target("avx2"))) void scatter_rows_stream(std::byte* out, const std::byte* in, const std::uint32_t* from,
                                                           const std::uint32_t* at, std::int64_t rows, std::size_t fb) {
  scatter_rows_with(out, in, from, at, rows, fb,
                    [fb](std::byte* dst, const std::byte* src) __attribute__((target("avx2"))) {
                      for (std::size_t b = 0; b < fb; b += 32)
                        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + b),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + b)));
                    });
  _mm_sfence();
}

/// The same with 16-byte stores: SSE2 is part of x86-64 itself, so the portable level has them too.
void scatter_rows_stream_sse2(std::byte* out, const std::byte* in, const std::uint32_t* from, const std::uint32_t* at,
                              std::int64_t rows, std::size_t fb) {
  scatter_rows_with(out, in, from, at, rows, fb, [fb](std::byte* dst, const std::byte* src) {
    for (std::size_t b = 0; b < fb; b += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + b)));
  });
  _mm_sfence();
}
#endif  // PINFEED_X86

/// Within runs of equal order keys (the high words of `order`, sorted), puts the items in
/// increasing index (sel[position]) order.
void order_ties_by_index(std::vector<std::uint64_t>& order, const std::vector<std::uint32_t>& sel) {
  const std::size_t n = order.size();
  for (std::size_t j = 1; j < n; ++j) {
    if ((order[j] >> 32) != (order[j - 1] >> 32)) continue;
    std::size_t end = j + 1;
    while (end < n && (order[end] >> 32) == (order[j] >> 32)) ++end;
    std::sort(order.begin() + static_cast<std::ptrdiff_t>(j - 1), order.begin() + static_cast<std::ptrdiff_t>(end),
              [&](std::uint64_t x, std::uint64_t y) { return sel[x & 0xFFFFFFFFu] < sel[y & 0xFFFFFFFFu]; });
    j = end - 1;
  }
}

template <class L>
struct row_sampler {
  const sampler_args& a;
  const sampler_params& p;
  std::int64_t target;

  std::uint32_t threshold(std::int64_t want, std::int64_t avail) const {
    if (want >= avail) return 0xFFFFFFFFu;
    // Expected fraction of keys needed plus a generous margin: if too few items pass, the class is
    // scanned again without a threshold, so the margin only trades speed, never the result.
    const double q = static_cast<double>(want) / static_cast<double>(avail);
    const double frac = q + 6.0 * std::sqrt(q * (1.0 - q) / static_cast<double>(avail)) + 32.0 / avail;
    if (frac >= 1.0) return 0xFFFFFFFFu;
    return static_cast<std::uint32_t>(std::ceil(frac * 4294967296.0));
  }

  /// Appends (key << 32 | i), in index order, of every item of class `only` (or of both classes
  /// when only < 0) whose key is <= thr[class] to cand[class]; counts every positive and negative
  /// into seen[].
  void scan(const L* labels, std::uint64_t row, const std::uint32_t thr[2], int only, row_scratch& s,
            std::int64_t seen[2]) const {
    const std::int64_t n = a.n;
    const philox_stream keys(p.seed, p.offset, row, 0);
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    [[maybe_unused]] const simd_level level = simd_level_in_use();
    s.keys.resize(kChunk);
    for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const std::size_t len = static_cast<std::size_t>(std::min<std::int64_t>(kChunk, n - i0));
      philox_words(keys, static_cast<std::uint32_t>(i0 / 4), (len + 3) / 4, s.keys.data());
      s.cand[0].make_room(kChunk + 4);  // a chunk's items and append_taken's three spare writes
      s.cand[1].make_room(kChunk + 4);
      std::uint64_t* out[2] = {s.cand[0].end(), s.cand[1].end()};
      std::size_t added[2] = {0, 0};
#if PINFEED_X86
      if (level == simd_level::avx512)
        filter_chunk_avx512(labels + i0, s.keys.data(), len, static_cast<std::uint64_t>(i0), neg, ign, thr, only, out,
                            added, seen);
      else if (level == simd_level::avx2)
        filter_chunk_avx2(labels + i0, s.keys.data(), len, static_cast<std::uint64_t>(i0), neg, ign, thr, only, out,
                          added, seen);
      else
        filter_chunk_sse2(labels + i0, s.keys.data(), len, static_cast<std::uint64_t>(i0), neg, ign, thr, only, out,
                          added, seen);
#else
      filter_chunk_scalar(labels + i0, s.keys.data(), len, static_cast<std::uint64_t>(i0), neg, ign, thr, only, out,
                          added, seen);
#endif
      s.cand[0].size += added[0];
      s.cand[1].size += added[1];
    }
  }

  /// Appends the indices of the `m` smallest candidates of a class to `out`, in increasing index
  /// order (one spare slot past the end is written and then dropped).
  void select(append_buffer& cand, std::size_t m, std::vector<std::uint32_t>& out, row_scratch& s) const {
    if (m == 0) return;
    std::uint64_t cut = ~std::uint64_t{0};
    if (cand.size > m) cut = smallest_cut(cand, m, s);
    const std::size_t at = out.size();
    out.resize(at + m + 1);  // the branch-free loop writes one past the last kept item
    std::uint32_t* o = out.data() + at;
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c) {
      *o = static_cast<std::uint32_t>(*c);  // write always, advance when kept
      o += *c <= cut;
    }
    out.resize(at + m);
  }

  /// The m-th smallest of the candidates (composites are unique, so exactly m are <= it): a
  /// histogram of the top 11 bits of the keys finds its bucket, and only that bucket is searched.
  static std::uint64_t smallest_cut(append_buffer& cand, std::size_t m, row_scratch& s) {
    std::uint32_t max_key = 0;
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c)
      max_key = std::max(max_key, static_cast<std::uint32_t>(*c >> 32));
    const int width = max_key == 0 ? 0 : 32 - __builtin_clz(max_key);
    const int shift = 32 + std::max(0, width - 11);
    std::uint32_t count[2048] = {};
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c) ++count[*c >> shift];
    std::size_t below = 0;
    std::uint64_t bucket = 0;
    while (below + count[bucket] < m) below += count[bucket++];
    s.tmp.clear();
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c)
      if ((*c >> shift) == bucket) s.tmp.push_back(*c);
    const std::size_t rank = m - below - 1;
    std::nth_element(s.tmp.begin(), s.tmp.begin() + static_cast<std::ptrdiff_t>(rank), s.tmp.end());
    return s.tmp[rank];
  }

  void run(std::int64_t row, row_scratch& s) const {
    const L* labels = static_cast<const L*>(a.labels) + row * a.n;
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    // One pass counts the classes and keeps candidates at the same time. Its thresholds come from
    // class counts guessed on a strided sample of the labels; a wrong guess only costs a second
    // pass over the class it starved, never the result.
    // The sample reads whole cache lines: 256 evenly spaced runs of 64 bytes of labels (every
    // label when the row is short), so it costs 256 line fetches, not one per label.
    constexpr std::int64_t kRun = 64 / static_cast<std::int64_t>(sizeof(L)), kRuns = 256;
    std::int64_t sample = 0;
    std::int64_t sampled[2] = {0, 0};
    const auto count_run = [&](std::int64_t from, std::int64_t len) {
      for (std::int64_t j = from; j < from + len; ++j) {
        const L l = labels[j];
        sampled[0] += l != neg && l != ign;
        sampled[1] += l == neg;
      }
      sample += len;
    };
    if (a.n <= kRun * kRuns) {
      count_run(0, a.n);
    } else {
      const std::int64_t stride = a.n / kRuns;  // >= kRun
      // Every line asked for first, so that the misses overlap instead of one waiting on another.
      for (std::int64_t r = 0; r < kRuns; ++r) {
        __builtin_prefetch(labels + r * stride);
        __builtin_prefetch(labels + r * stride + kRun - 1);
      }
      for (std::int64_t r = 0; r < kRuns; ++r) count_run(r * stride, kRun);
    }
    std::uint32_t thr[2];
    {
      const double scale = sample ? static_cast<double>(a.n) / static_cast<double>(sample) : 0.0;
      const std::int64_t guess[2] = {std::llround(sampled[0] * scale), std::llround(sampled[1] * scale)};
      const class_counts gc = balanced_counts(guess[0], guess[1], p.k, target, p.mode);
      const std::int64_t want_guess[2] = {gc.num_pos, gc.num_neg};
      // Relative standard error of each guessed class count; four of the larger one (a top-up ties
      // one class's share to the other's count) widen the share of keys kept. Beyond that the
      // rescan below takes over, about once in 30000 rows.
      double rel[2];
      for (int c = 0; c < 2; ++c)
        rel[c] = sampled[c] > 0 ? std::sqrt(static_cast<double>(sample - sampled[c]) /
                                            (static_cast<double>(sampled[c]) * static_cast<double>(sample)))
                                : 1.0;
      for (int c = 0; c < 2; ++c) {
        const double widen = 1.0 + 4.0 * std::max(rel[0], rel[1]);
        const auto want = static_cast<std::int64_t>(static_cast<double>(want_guess[c]) * widen) + 16;
        thr[c] = want_guess[c] == 0 ? 0u : threshold(want, std::max<std::int64_t>(1, guess[c]));
      }
    }
    s.cand[0].clear();
    s.cand[1].clear();
    std::int64_t seen[2] = {0, 0};
    if (p.k > 0) {
      scan(labels, static_cast<std::uint64_t>(row), thr, -1, s, seen);
    } else {
      for (std::int64_t i = 0; i < a.n; ++i) {
        seen[1] += labels[i] == neg;
        seen[0] += labels[i] != neg && labels[i] != ign;
      }
    }
    const class_counts cc = balanced_counts(seen[0], seen[1], p.k, target, p.mode);
    const std::int64_t want[2] = {cc.num_pos, cc.num_neg};
    s.sel.clear();
    if (cc.num_pos + cc.num_neg > 0) {
      for (int c = 0; c < 2; ++c) {
        if (static_cast<std::int64_t>(s.cand[c].size) < want[c]) {  // the guess starved this class
          s.cand[c].clear();
          std::uint32_t exact[2] = {0, 0};
          exact[c] = threshold(want[c], seen[c]);
          std::int64_t again[2] = {0, 0};
          scan(labels, static_cast<std::uint64_t>(row), exact, c, s, again);
          if (static_cast<std::int64_t>(s.cand[c].size) < want[c]) {  // and so did the margin
            s.cand[c].clear();
            const std::uint32_t all[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
            scan(labels, static_cast<std::uint64_t>(row), all, c, s, again);
          }
        }
        select(s.cand[c], static_cast<std::size_t>(want[c]), s.sel, s);
      }
      // s.sel: the positives in index order, then the negatives in index order.
      // Output order: increasing (ord(i), i). Sorting (ord << 32 | position) gives that except
      // where equal ord keys (about k^2 / 2^33 pairs per row) pair a positive with a negative of
      // lower index: those runs are put in index order afterwards.
      s.ord.resize(s.sel.size());
      philox_element_words(philox_stream(p.seed, p.offset, static_cast<std::uint64_t>(row), 1), s.sel.data(),
                           s.sel.size(), s.ord.data());
      s.order.resize(s.sel.size());
      for (std::size_t j = 0; j < s.sel.size(); ++j) s.order[j] = (static_cast<std::uint64_t>(s.ord[j]) << 32) | j;
      sort_random_keyed(s.order, s.sort_tmp);
      order_ties_by_index(s.order, s.sel);
    } else {
      s.order.clear();
    }
    write(row, s, labels, cc.num_pos);
  }

  /// Writes indices, labels, padding and gathered features in output order; the first `positives`
  /// of s.sel are the positives.
  void write(std::int64_t row, row_scratch& s, const L* labels, std::int64_t positives) const {
    constexpr std::int64_t kPrefetch = 64;
    const std::int64_t k = p.k, valid = static_cast<std::int64_t>(s.order.size());
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t idx = j < valid ? static_cast<std::int64_t>(s.sel[s.order[j] & 0xFFFFFFFFu]) : -1;
      if (a.index_type == dtype::i64) static_cast<std::int64_t*>(a.indices)[row * k + j] = idx;
      else static_cast<std::int32_t*>(a.indices)[row * k + j] = static_cast<std::int32_t>(idx);
    }
    // pos[q]: the output slot of s.sel[q]. Labels and feature rows are read in s.sel order (forward
    // sweeps over the row, which the TLB and the prefetches follow) and written to their slots.
    if (a.gathered_labels != nullptr || a.features != nullptr) {
      s.pos.resize(static_cast<std::size_t>(valid));
      for (std::int64_t j = 0; j < valid; ++j) s.pos[s.order[j] & 0xFFFFFFFFu] = static_cast<std::uint32_t>(j);
    }
    if (a.gathered_labels != nullptr) {
      L* out = static_cast<L*>(a.gathered_labels) + row * k;
      // Only the positives' labels are read: a negative's is negative_label by definition.
      for (std::int64_t q = 0; q < positives; ++q) {
        if (q + kPrefetch < positives) __builtin_prefetch(labels + s.sel[q + kPrefetch]);
        out[s.pos[q]] = labels[s.sel[q]];
      }
      for (std::int64_t q = positives; q < valid; ++q) out[s.pos[q]] = static_cast<L>(p.negative_label);
      std::fill(out + valid, out + k, static_cast<L>(p.ignore_label));
    }
    if (a.gathered_features != nullptr) {  // (features may be null only when n = 0: nothing is read)
      const std::size_t fb = a.feature_bytes;
      const auto* in = static_cast<const std::byte*>(a.features) + row * a.n * fb;
      auto* out = static_cast<std::byte*>(a.gathered_features) + row * k * fb;
#if PINFEED_X86
      if (simd_level_in_use() >= simd_level::avx2 && fb % 32 == 0 && reinterpret_cast<std::uintptr_t>(out) % 32 == 0)
        scatter_rows_stream(out, in, s.sel.data(), s.pos.data(), valid, fb);
      else if (fb % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0)
        scatter_rows_stream_sse2(out, in, s.sel.data(), s.pos.data(), valid, fb);
      else
#endif
        scatter_rows(out, in, s.sel.data(), s.pos.data(), valid, fb);
      std::memset(out + valid * fb, 0, (k - valid) * fb);
    }
    if (a.valid != nullptr) a.valid[row] = static_cast<std::int32_t>(valid);
  }
};

template <class L>
void sample_all(const sampler_args& a, const sampler_params& p) {
  const row_sampler<L> rs{a, p, positive_target(p)};
  pinfeed::detail::parallel_for(0, static_cast<std::size_t>(a.rows), [&](std::size_t row) {
    auto& scratch = pinfeed::detail::thread_scratch<row_scratch, struct sampler_rows>();
    rs.run(static_cast<std::int64_t>(row), scratch);
  });
}

}  // namespace

void balanced_sample_host(const sampler_args& a, const sampler_params& p) {
  validate(a, p);
  if (a.status != nullptr) *a.status = 0;  // the host reads each label once: nothing can go wrong between passes
  if (a.rows == 0) return;
  if (a.label_type == dtype::i64) sample_all<std::int64_t>(a, p);
  else sample_all<std::int32_t>(a, p);
}

// ---- faults: the word the GPU kernels write (bit 63 set, kind in 62..60, class + 1 in 59..58, row
// in 57..32, a count or slot in 31..0), read back on the host --------------------------------------

namespace {
std::string describe_fault(std::uint64_t word, bool earlier) {
  const auto kind = static_cast<sampler_fault_kind>((word >> 60) & 7);
  const int c = static_cast<int>((word >> 58) & 3) - 1;
  const auto row = (word >> 32) & 0x3FFFFFF;
  const auto value = static_cast<std::uint32_t>(word);
  std::string what;
  switch (kind) {
    case sampler_fault_kind::histogram_short:
      what = "its key histogram holds only " + std::to_string(value) + " items, fewer than needed";
      break;
    case sampler_fault_kind::candidate_overflow: what = "more candidates than counted (slot " + std::to_string(value) + ")"; break;
    case sampler_fault_kind::selection_overflow: what = "more items selected than k (slot " + std::to_string(value) + ")"; break;
    case sampler_fault_kind::ties_short:
      what = "only " + std::to_string(value) + " items tie at the threshold, fewer than needed";
      break;
    case sampler_fault_kind::bad_index: what = "output slot " + std::to_string(value) + " was never filled"; break;
    default: what = "an unknown fault (status word " + std::to_string(word) + ")"; break;
  }
  return std::string("balanced sampler (GPU): ") + (earlier ? "an earlier call" : "the call") + " found row " +
         std::to_string(row) + (c == 0 ? " (positives)" : c == 1 ? " (negatives)" : "") + " inconsistent: " + what +
         ". The labels changed while the call ran, or two calls in flight shared one temp buffer; that "
         "call's output was clamped to its rows and is not a valid sample";
}
}  // namespace

sampler_fault::sampler_fault(std::uint64_t status, bool earlier)
    : pinfeed::runtime_error(describe_fault(status, earlier)), status_(status) {}

sampler_fault_kind sampler_fault::kind() const noexcept { return static_cast<sampler_fault_kind>((status_ >> 60) & 7); }
std::int64_t sampler_fault::row() const noexcept { return static_cast<std::int64_t>((status_ >> 32) & 0x3FFFFFF); }
int sampler_fault::label_class() const noexcept { return static_cast<int>((status_ >> 58) & 3) - 1; }

void check_sampler_status(std::uint64_t status) {
  if (status != 0) throw sampler_fault(status);
}

}  // namespace pinfeed::ops
