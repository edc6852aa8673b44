#pragma once
// The GPU sampler's host-side calls into the CUDA runtime: the fault words its kernels write.

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::ops::gpu_sampler {

/// The device this thread's calls run on.
int current_device();

/// The fault word of `device`, allocated on first use (mapped pinned memory, one per process and
/// device). Allocation is allowed while another stream of this thread is being captured: the
/// thread's capture mode is relaxed for that one call.
unsigned long long* fault_word(int device);

/// Throws (once) what the kernels reported in `word` since the last check. Reads host memory only.
void rethrow_fault(unsigned long long* word);

}  // namespace pinfeed::ops::gpu_sampler
