#pragma once
// For tests only (ops/src is not an installed include path): the GPU sampler with knobs. A hook
// runs after its first kernel: the counting kernel when several blocks share a row, so that a test
// can change the labels mid-call (on the same stream) and check that the kernels stay in bounds and
// the fault is reported; the whole selection when a block has a row to itself. A smaller candidate
// buffer than the default sends inputs small enough for the GPU simulator down the path that reads
// the labels again. The shipped balanced_sample_device() is the same dispatch instantiated without
// any of this: no hook and no knob is looked at on its path.

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/ops/sampler.hpp"

namespace pinfeed::ops::detail {

using sampler_stage_hook = void (*)(void* ctx, cudaStream_t stream);

struct sampler_knobs {
  sampler_stage_hook hook = nullptr;  ///< called with (hook_ctx, stream) after the counting kernel is queued
  void* hook_ctx = nullptr;
  std::uint32_t candidate_cap = 0;    ///< candidates kept per row and class; 0: the default (n / 256 within [256, 8192])
  int blocks_per_row = 0;             ///< 1: one block per row (every pass in one kernel); more: that many
                                      ///< blocks share each row (a kernel per pass); 0: from the shapes
};

/// balanced_sample_device() with the knobs. The temp storage must be queried with the same knobs.
void balanced_sample_device_with(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                                 cudaStream_t stream, const sampler_knobs& knobs);

}  // namespace pinfeed::ops::detail
