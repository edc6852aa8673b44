#pragma once
// PINFEED_FMA_CLONES before a function that computes with std::fmaf, floor or nearbyint: GCC builds
// it twice on x86-64, for the baseline and for x86-64-v3 (AVX2 and FMA, with the SSE4.1 rounding
// they imply), and picks one by the CPU's features when the program loads (an ifunc; the ISA
// level is a feature bit, so Intel and AMD alike). Without FMA std::fmaf is a libm call per value,
// with it one instruction, and AVX2 gives the vectoriser 32-byte integer lanes; each value is
// rounded as in the baseline (no contraction, no reordered sums), so both clones give the same
// bits. Elsewhere (aarch64, where fmadd and frintn are baseline; clang) it is one function.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define PINFEED_FMA_CLONES __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define PINFEED_FMA_CLONES
#endif
// A helper of such a function: inlined into each clone (GCC calls a helper built for the baseline
// from the FMA clone otherwise, one call per value).
#define PINFEED_INLINE __attribute__((always_inline)) inline
