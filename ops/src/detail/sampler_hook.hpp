#pragma once
// Internal: the GPU sampler with a hook that runs between its first and second kernel, so a test can
// change the labels mid-call (on the same stream) and check that the kernels stay in bounds and the
// fault is reported.

#include <cstddef>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/ops/sampler.hpp"

namespace pinfeed::ops::detail {

using sampler_stage_hook = void (*)(void* ctx, cudaStream_t stream);

/// balanced_sample_gpu(), calling hook(ctx, stream) after the counting kernel is queued.
void balanced_sample_gpu_hooked(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                                cudaStream_t stream, sampler_stage_hook hook, void* hook_ctx);

}  // namespace pinfeed::ops::detail
