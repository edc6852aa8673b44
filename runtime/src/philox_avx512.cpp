// Bulk Philox with AVX-512 (F, BW, VL, DQ): 16 lanes.
#include "detail/philox_x86.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

PINFEED_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq")
#include "detail/philox_lanes.hpp"

// GCC 12's AVX-512 headers read _mm512_undefined_* values and warn about them (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pinfeed::detail {

/// The instructions of 16-lane Philox.
struct avx512_lanes : lanes::words16 {
  /// The high and low words of the 64-bit products x[l] * m.
  static PINFEED_LANES_INLINE void mul_hi_lo(u32 x, u32 m, u32& hi, u32& lo) {
    const __m512i e = _mm512_mul_epu32(__m512i(x), __m512i(m));
    const __m512i o = _mm512_mul_epu32(_mm512_srli_epi64(__m512i(x), 32), __m512i(m));
    lo = u32(_mm512_mask_blend_epi32(0xAAAA, e, _mm512_slli_epi64(o, 32)));
    hi = u32(_mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e, 32), o));
  }

  /// Word-major group x (x[w]: word w of 16 blocks) to their 64 stream-order words at o.
  static PINFEED_LANES_INLINE void store_blocks(const u32 x[4], std::uint32_t* o) {
    __m512i r[4];  // quarter q of r[k]: block 4q + k
    lanes::transpose_parts<__m512i, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64,
                           _mm512_unpackhi_epi64>(x, r);
    // Then a 4x4 transpose of the quarters: output vector q = blocks 4q..4q+3.
    const __m512i t0 = _mm512_shuffle_i32x4(r[0], r[1], 0x44), t1 = _mm512_shuffle_i32x4(r[2], r[3], 0x44);
    const __m512i t2 = _mm512_shuffle_i32x4(r[0], r[1], 0xEE), t3 = _mm512_shuffle_i32x4(r[2], r[3], 0xEE);
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(t0, t1, 0x88));
    _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));
    _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));
    _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));
  }
};

// Up to four interleaved chains for consecutive blocks and two for element-indexed words, on
// multiples of sixteen.
const philox_kernels philox_avx512 = lanes::kernels<avx512_lanes, 4, 2, 16>();

}  // namespace pinfeed::detail
PINFEED_TARGET_END
#endif  // __x86_64__
