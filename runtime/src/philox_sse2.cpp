// Bulk Philox with SSE2, part of x86-64 itself: what the `scalar` level runs on x86-64.
#include "detail/philox_x86.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "detail/philox_lanes.hpp"

namespace pinfeed::detail {

/// The instructions of 4-lane Philox.
struct sse2_lanes : lanes::words4 {
  /// The high and low words of the 64-bit products x[l] * m. SSE2 has no blend: the even and odd
  /// products are merged with masks.
  static PINFEED_LANES_INLINE void mul_hi_lo(u32 x, u32 m, u32& hi, u32& lo) {
    const __m128i low = _mm_set1_epi64x(0xFFFFFFFFll), xv = __m128i(x), mv = __m128i(m);
    const __m128i e = _mm_mul_epu32(xv, mv), o = _mm_mul_epu32(_mm_srli_epi64(xv, 32), mv);
    lo = u32(_mm_or_si128(_mm_and_si128(e, low), _mm_slli_epi64(o, 32)));
    hi = u32(_mm_or_si128(_mm_srli_epi64(e, 32), _mm_andnot_si128(low, o)));
  }

  /// Word-major group x (x[w]: word w of 4 blocks) to their 16 stream-order words at o.
  static PINFEED_LANES_INLINE void store_blocks(const u32 x[4], std::uint32_t* o) {
    __m128i r[4];  // r[k]: block k
    lanes::transpose_parts<__m128i, _mm_unpacklo_epi32, _mm_unpackhi_epi32, _mm_unpacklo_epi64, _mm_unpackhi_epi64>(
        x, r);
    auto* v = reinterpret_cast<__m128i*>(o);
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(v + k, r[k]);
  }
};

// Two interleaved groups of four, on multiples of eight blocks or elements.
const philox_kernels philox_sse2 = lanes::kernels<sse2_lanes, 2, 2, 8>();

}  // namespace pinfeed::detail
#endif  // __x86_64__
