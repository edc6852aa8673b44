#pragma once
// How a GPU sampler call runs, decided on the host from the shapes and the device, never from the
// data: how its rows are split among blocks, and the parameters its kernels get.

#include <cstdint>

#include "params.hpp"

namespace pinfeed::ops::gpu_sampler {

/// How a call splits its rows among blocks.
struct plan {
  int blocks_per_row;
  std::int64_t chunk;  // items per block of a row, a multiple of 4
};

/// `blocks_per_row` blocks a row (at most 65535), each a chunk of the row's n items.
plan plan_with_blocks(std::int64_t n, int blocks_per_row);

/// Enough blocks in all to fill the device about four times over, at least 16K items per block,
/// one block per row for short rows or when the rows alone fill the device.
plan make_plan(std::int64_t rows, std::int64_t n, int multiprocessors);

/// Candidates kept per row and class for the passes after the first, by default: about eight times
/// the first bucket a class of n items expects (n / 2048 keys), between 256 and kCandidateCap.
std::uint32_t default_candidate_cap(std::int64_t n);

/// `cap` limited to [1, n].
std::uint32_t clamp_candidate_cap(std::int64_t n, std::int64_t cap);

/// The kernels' parameters for the call (a, p) run by `pl` (no fault word yet).
params_dev make_params(const sampler_args& a, const sampler_params& p, const plan& pl);

}  // namespace pinfeed::ops::gpu_sampler
