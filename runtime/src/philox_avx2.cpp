// Bulk Philox with AVX2: 8 lanes.
#include "detail/philox_x86.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

PINFEED_TARGET_BEGIN("avx2")
#include "detail/philox_lanes.hpp"

namespace pinfeed::detail {

/// The instructions of 8-lane Philox.
struct avx2_lanes : lanes::words8 {
  /// The high and low words of the 64-bit products x[l] * m: products of the even lanes, then of
  /// the odd lanes, recombined.
  static PINFEED_LANES_INLINE void mul_hi_lo(u32 x, u32 m, u32& hi, u32& lo) {
    const __m256i e = _mm256_mul_epu32(__m256i(x), __m256i(m));
    const __m256i o = _mm256_mul_epu32(_mm256_srli_epi64(__m256i(x), 32), __m256i(m));
    lo = u32(_mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA));
    hi = u32(_mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA));
  }

  /// Word-major group x (x[w]: word w of 8 blocks) to their 32 stream-order words at o.
  static PINFEED_LANES_INLINE void store_blocks(const u32 x[4], std::uint32_t* o) {
    __m256i r[4];  // r[k]: blocks k (low half) and 4 + k (high half)
    lanes::transpose_parts<__m256i, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32, _mm256_unpacklo_epi64,
                           _mm256_unpackhi_epi64>(x, r);
    auto* v = reinterpret_cast<__m256i*>(o);
    _mm256_storeu_si256(v, _mm256_permute2x128_si256(r[0], r[1], 0x20));      // blocks 0, 1
    _mm256_storeu_si256(v + 1, _mm256_permute2x128_si256(r[2], r[3], 0x20));  // blocks 2, 3
    _mm256_storeu_si256(v + 2, _mm256_permute2x128_si256(r[0], r[1], 0x31));  // blocks 4, 5
    _mm256_storeu_si256(v + 3, _mm256_permute2x128_si256(r[2], r[3], 0x31));  // blocks 6, 7
  }
};

// Up to two interleaved chains, on multiples of eight blocks or elements.
const philox_kernels philox_avx2 = lanes::kernels<avx2_lanes, 2, 2, 8>();

}  // namespace pinfeed::detail
PINFEED_TARGET_END
#endif  // __x86_64__
