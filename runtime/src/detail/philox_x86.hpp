#pragma once
/// @file philox_x86.hpp
/// The bulk Philox kernels of the x86 instruction sets (philox_sse2.cpp, philox_avx2.cpp,
/// philox_avx512.cpp), which random.cpp chooses from at run time, and the target regions their
/// files compile in.

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/philox.hpp"

#define PINFEED_PRAGMA(tokens) _Pragma(#tokens)
/// Every function defined between PINFEED_TARGET_BEGIN("isa,...") and PINFEED_TARGET_END, the
/// instantiations of templates defined there included, is compiled for those instruction sets.
/// Standard headers are included before the region, so that none of their inline functions is
/// compiled for a wider instruction set than the rest of the program.
#if defined(__clang__)
#define PINFEED_TARGET_BEGIN(isa) \
  PINFEED_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define PINFEED_TARGET_END PINFEED_PRAGMA(clang attribute pop)
#else
#define PINFEED_TARGET_BEGIN(isa) PINFEED_PRAGMA(GCC push_options) PINFEED_PRAGMA(GCC target(isa))
#define PINFEED_TARGET_END PINFEED_PRAGMA(GCC pop_options)
#endif

namespace pinfeed::detail {

/// The bulk Philox of one instruction set. `count` must be a multiple of `multiple`.
struct philox_kernels {
  /// Stream-order words of `count` consecutive blocks from counter {first, c.v[1], c.v[2], c.v[3]}:
  /// out[4*j + w] = word w of block first + j.
  void (*words)(const philox_block& c, std::uint32_t first, std::size_t count, std::uint32_t k0, std::uint32_t k1,
                std::uint32_t* out);
  /// Element-indexed words: out[j] = word elements[j] & 3 of block elements[j] >> 2.
  void (*element_words)(const philox_block& c, const std::uint32_t* elements, std::size_t count, std::uint32_t k0,
                        std::uint32_t k1, std::uint32_t* out);
  std::size_t multiple;
};

#if defined(__x86_64__)
extern const philox_kernels philox_sse2;    // x86-64's baseline: the `scalar` level
extern const philox_kernels philox_avx2;    // 8 lanes
extern const philox_kernels philox_avx512;  // 16 lanes
#endif

}  // namespace pinfeed::detail
