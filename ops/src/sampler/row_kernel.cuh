#pragma once
// One block per row: every pass of the radix select in one kernel, grid (1, rows), with the
// histogram and (for rows up to 128K items) the candidate lists in shared memory.

#include "block_steps.cuh"

namespace pinfeed::ops::gpu_sampler {

/// The tie pass of a row that a block has to itself: takes, in index order, the ties at T of each
/// class that needs them, after the items taken so far.
template <class L>
__device__ void take_row_ties(const L* __restrict__ labels, const params_dev& p, std::int64_t row, row_state* rs,
                              std::uint32_t* selected_row, block_storage& storage, block_vars& vars) {
  for (int c = 0; c < 2; ++c) {
    const class_state cs = rs->cls[c];
    if (!needs_tie_pass(cs)) continue;
    const std::uint32_t base = rs->taken;
    const std::uint32_t seen = scan_ties(labels, p, row, c, cs.prefix, 0, p.n, 0, cs.k_rem, base, selected_row,
                                         storage, vars);  // ends with a barrier: base is read everywhere
    if (threadIdx.x == 0) {
      if (seen < cs.k_rem) report_fault(p, sampler_fault_kind::ties_short, row, c, seen);
      rs->taken = base + min(seen, cs.k_rem);
    }
    __syncthreads();
  }
}

/// cand: global candidate lists (rows x 2 x p.cand_cap) when p.cand_cap > kRowCandidates (rows
/// longer than 128K items), else null: the lists are kept in shared memory.
template <class L>
__global__ void row_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint64_t* cand,
                           std::uint32_t* selected) {
  __shared__ histogram s_hist;
  __shared__ std::uint64_t s_cand[2][kRowCandidates];
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.y;
  row_state* rs = states + row;
  std::uint32_t* selected_row = selected + row * p.k;
  if (threadIdx.x == 0) *rs = row_state{};
  clear_histogram(s_hist);
  __syncthreads();
  unsigned long long positives, negatives;
  count_step(labels, p, row, 0, p.n, s_hist, storage, positives, negatives);
  if (threadIdx.x == 0) {
    rs->positives = positives;
    rs->negatives = negatives;
  }
  std::uint32_t* hist = &s_hist[0][0];
  choose_step<0>(p, row, *rs, hist, storage, vars);
  const candidate_lists lists = cand != nullptr ? row_lists(cand, p, row)
                                                : candidate_lists{{s_cand[0], s_cand[1]}, min(kRowCandidates, p.cand_cap)};
  filter_step(labels, p, row, 0, p.n, rs, lists, s_hist, selected_row, storage, vars);
  choose_step<1>(p, row, *rs, hist, storage, vars);
  refine_step(labels, p, row, rs, lists, hist, threadIdx.x, kThreads);
  __syncthreads();
  choose_step<2>(p, row, *rs, hist, storage, vars);
  finish_step(labels, p, row, rs, lists, selected_row, threadIdx.x, kThreads);
  __syncthreads();  // every item below T is appended: taken is final but for the ties
  take_row_ties(labels, p, row, rs, selected_row, storage, vars);
}

}  // namespace pinfeed::ops::gpu_sampler
