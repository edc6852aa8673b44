#pragma once
/// @file cuda_api.hpp
/// The CUDA runtime API as pinfeed uses it. A CUDA build (PINFEED_WITH_CUDA=1) includes
/// <cuda_runtime_api.h>. A CPU-only build declares the handle types pinfeed's API carries
/// (cudaStream_t, cudaEvent_t, ...) and the runtime calls pinfeed makes, each of which fails with
/// cudaErrorNoDevice: device discovery then reports that no device can be used, exactly as on a
/// machine without a driver, and every path stays on the host.

#include "pinfeed/config.hpp"

#if PINFEED_WITH_CUDA
#include <cuda_runtime_api.h>
/// The CUDA runtime version pinfeed was compiled against (0 in a CPU-only build).
#define PINFEED_CUDART_VERSION CUDART_VERSION
/// A name of the CUDA runtime API (cudaError_t, cudaSetDevice, ...), qualified: the real one in a
/// CUDA build, pinfeed's stand-in (pinfeed::no_cuda) in a CPU-only build. pinfeed's public
/// inline code names the runtime only through this, so that a CPU-only pinfeed can share a
/// translation unit with <cuda_runtime_api.h>. (The handle types, cudaStream_t and the like, are
/// global in both builds.)
#define PINFEED_CUDART(name) ::name
#else
#include "pinfeed/runtime/detail/no_cuda.hpp"
#define PINFEED_CUDART_VERSION 0
#define PINFEED_CUDART(name) ::pinfeed::no_cuda::name
#endif

namespace pinfeed {
/// The status a CUDA runtime call returns (cudaError_t), in either build.
using cuda_result = PINFEED_CUDART(cudaError_t);
namespace detail {
// The flags pinfeed's inline code passes (macros in CUDA's headers, so not named through
// PINFEED_CUDART).
inline constexpr unsigned cuda_stream_non_blocking = 0x01;  // cudaStreamNonBlocking
inline constexpr unsigned cuda_event_disable_timing = 0x02;  // cudaEventDisableTiming
inline constexpr unsigned cuda_event_blocking_sync = 0x01;   // cudaEventBlockingSync
#if PINFEED_WITH_CUDA
static_assert(cuda_stream_non_blocking == cudaStreamNonBlocking && cuda_event_disable_timing == cudaEventDisableTiming &&
              cuda_event_blocking_sync == cudaEventBlockingSync);
#endif
}  // namespace detail
}  // namespace pinfeed
