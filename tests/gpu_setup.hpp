#pragma once
// A GPU case's set-up copies and fills, finished on the device when they return.
//
// cudaMemcpy from pageable host memory and cudaMemset run on the legacy default stream and may
// return before the device has done them (a pageable copy returns once its bytes are staged). Work
// on a blocking stream waits for them; work on a non-blocking stream (pinfeed's copy and reader
// streams, a case's cuda_stream::create()) does not, and could read the memory before the copy or
// fill lands. Every case sets device memory up through these, so no case depends on the stream its
// kernels later run on (tests/tools/gpu_setup_lint.py keeps the bare calls out of the GPU suites).
#include <cstddef>

#include "pinfeed/runtime/error.hpp"

namespace pinfeed::test {

/// Copies `bytes` from host memory to the device; the copy has landed when this returns.
inline void upload(void* device_dst, const void* host_src, std::size_t bytes) {
  PINFEED_CUDA_TRY(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaDeviceSynchronize());
}

/// Sets `bytes` of device memory to `value`; done when this returns.
inline void fill_device(void* device_dst, int value, std::size_t bytes) {
  PINFEED_CUDA_TRY(cudaMemset(device_dst, value, bytes));
  PINFEED_CUDA_TRY(cudaDeviceSynchronize());
}

}  // namespace pinfeed::test
