#pragma once
// The x86 intrinsics the CPU sampler's filter and gather use, where the target has them.

#if defined(__x86_64__)
#include <immintrin.h>
#define PINFEED_X86 1
// GCC 12's AVX-512 headers read _mm512_undefined_* values and warn about them (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define PINFEED_X86 0
#endif
