#pragma once
/// @file detail/sampler_checks.hpp
/// The sampler's argument checks and two-phase temp-storage helpers, for code built on top of it
/// (pinfeed's own tools and benchmark baselines). Not part of the stable API.

#include <cstddef>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/detail/capture.hpp"

namespace pinfeed::ops::detail {

/// validate() without the pointer checks (for temp-storage queries).
void validate_shapes(const sampler_args& a, const sampler_params& p);

/// The GPU sampler's checks that need no CUDA call: shapes and parameters, the pointers when
/// `running`, and the per-call limits (rows, rows * k).
void validate_gpu_shapes(const sampler_args& a, const sampler_params& p, bool running);

#if PINFEED_WITH_CUDA
/// True while `stream` is being captured into a graph (also when it is the legacy default stream
/// and a blocking stream of the device is being captured).
using pinfeed::detail::stream_capturing;

/// Throws std::invalid_argument, prefixed with `who`, unless every pointer of `a` is visible to
/// the device. Queries the driver: not to be called while the caller's stream is capturing.
void check_device_pointers(const sampler_args& a, const char* who);

/// The two-phase convention: with d_temp == nullptr sets temp_bytes = needed and returns true (a
/// size query); otherwise throws if temp_bytes < needed and returns false.
bool answer_temp_query(const void* d_temp, std::size_t& temp_bytes, std::size_t needed, const char* who);
#endif

}  // namespace pinfeed::ops::detail
