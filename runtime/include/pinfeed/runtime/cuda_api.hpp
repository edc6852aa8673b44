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
#else
#include "pinfeed/runtime/detail/no_cuda.hpp"
#define PINFEED_CUDART_VERSION 0
#endif
