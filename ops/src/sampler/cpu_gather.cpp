// The CPU sampler's feature gather (cpu_gather.hpp).
#include "cpu_gather.hpp"

#include <cstring>

#include "cpu_simd.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::ops::cpu_sampler {
namespace {

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

}  // namespace

void gather_feature_rows(std::byte* out, const std::byte* in, const std::uint32_t* from, const std::uint32_t* at,
                         std::int64_t rows, std::size_t fb) {
#if PINFEED_X86
  if (simd_level_in_use() >= simd_level::avx2 && fb % 32 == 0 && reinterpret_cast<std::uintptr_t>(out) % 32 == 0)
    scatter_rows_stream(out, in, from, at, rows, fb);
  else if (fb % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0)
    scatter_rows_stream_sse2(out, in, from, at, rows, fb);
  else
#endif
    scatter_rows(out, in, from, at, rows, fb);
}

}  // namespace pinfeed::ops::cpu_sampler
