#pragma once
// Several blocks per row: a kernel per pass, grid (blocks_per_row, rows); the blocks of a row meet
// in its global histogram, candidate lists and tie counts.
//   count_hist      full read: P and Nn per row, histogram of key bits 31..21 per class
//   choose<0>       one block per row: counts -> num_pos/num_neg, bucket of the k-th key
//   filter          full read: keys below the bucket are taken, keys in it become candidates
//                   (kept in a small buffer when they fit) and feed the histogram of bits 20..10
//   choose<1>
//   refine          candidates only (labels again if they did not fit): histogram of bits 9..0
//   choose<2>       -> the exact threshold key T and how many items equal to T to take
//   finish          candidates: keys below T are taken, ties at T too when all of them are needed
//   tie_count       rare: more items tie at T than are needed -> each block counts its ties,
//   tie_take        and takes those whose rank in the row is below what is needed (lowest indices win)

#include "block_steps.cuh"

namespace pinfeed::ops::gpu_sampler {

/// This block's part [begin, end) of its row: p.chunk items from blockIdx.x * p.chunk.
struct chunk_range {
  std::int64_t begin, end;
};
__device__ __forceinline__ chunk_range block_chunk(const params_dev& p) {
  const std::int64_t begin = blockIdx.x * p.chunk;
  return {begin, min(p.n, begin + p.chunk)};
}

/// A full-read pass over this block's part of row blockIdx.y: step(begin, end, s_hist, storage, vars)
/// with a cleared shared histogram, which is then added to the row's global one.
template <class Step>
__device__ __forceinline__ void histogram_pass(const params_dev& p, std::uint32_t* hist, Step&& step) {
  __shared__ histogram s_hist;
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  clear_histogram(s_hist);
  __syncthreads();
  const auto [begin, end] = block_chunk(p);
  step(begin, end, s_hist, storage, vars);
  merge_histogram(s_hist, hist + blockIdx.y * 2 * kMaxBins);
}

template <class L>
__global__ void count_hist_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                  std::uint32_t* hist) {
  const std::int64_t row = blockIdx.y;
  histogram_pass(p, hist, [&](std::int64_t begin, std::int64_t end, histogram& s_hist, block_storage& storage,
                              block_vars&) {
    unsigned long long bp, bn;
    count_step(labels, p, row, begin, end, s_hist, storage, bp, bn);
    if (threadIdx.x == 0) {
      if (bp) atomicAdd(&states[row].positives, bp);
      if (bn) atomicAdd(&states[row].negatives, bn);
    }
  });
}

template <int Pass>
__global__ void choose_kernel(params_dev p, row_state* states, std::uint32_t* hist) {
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.x;
  choose_step<Pass>(p, row, states[row], hist + row * 2 * kMaxBins, storage, vars);
}

template <class L>
__global__ void filter_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint32_t* hist,
                              std::uint64_t* cand, std::uint32_t* selected) {
  const std::int64_t row = blockIdx.y;
  histogram_pass(p, hist, [&](std::int64_t begin, std::int64_t end, histogram& s_hist, block_storage& storage,
                              block_vars& vars) {
    filter_step(labels, p, row, begin, end, states + row, row_lists(cand, p, row), s_hist, selected + row * p.k,
                storage, vars);
  });
}

template <class L>
__global__ void refine_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint32_t* hist,
                              std::uint64_t* cand) {
  const std::int64_t row = blockIdx.y;
  refine_step(labels, p, row, states + row, row_lists(cand, p, row), hist + row * 2 * kMaxBins,
              blockIdx.x * kThreads + threadIdx.x, gridDim.x * kThreads);
}

template <class L>
__global__ void finish_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint64_t* cand,
                              std::uint32_t* selected) {
  const std::int64_t row = blockIdx.y;
  finish_step(labels, p, row, states + row, row_lists(cand, p, row), selected + row * p.k,
              blockIdx.x * kThreads + threadIdx.x, gridDim.x * kThreads);
}

/// A tie pass over this block's part of row blockIdx.y, run only when a class of the row needs
/// one (else the whole block returns): step(rs, cls, begin, end, storage, vars), cls the row's
/// class states as the tie pass starts.
template <class Step>
__device__ __forceinline__ void tie_pass(row_state* states, const params_dev& p, Step&& step) {
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  row_state* rs = states + blockIdx.y;
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  if (!needs_tie_pass(cls[0]) && !needs_tie_pass(cls[1])) return;
  const auto [begin, end] = block_chunk(p);
  step(rs, cls, begin, end, storage, vars);
}

/// Tie pass, first half: every block counts the ties at T in its part of the row (into
/// tie_counts[row][class][block]); block 0 notes where the ties go (after the items taken so far).
template <class L>
__global__ void tie_count_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                 std::uint32_t* tie_counts) {
  const std::int64_t row = blockIdx.y;
  tie_pass(states, p, [&](row_state* rs, const class_state (&cls)[2], std::int64_t begin, std::int64_t end,
                          block_storage& storage, block_vars& vars) {
    if (blockIdx.x == 0 && threadIdx.x == 0) rs->tie_base = rs->taken;  // no block of this kernel reads either
    for (int c = 0; c < 2; ++c) {
      if (!needs_tie_pass(cls[c])) continue;
      const std::uint32_t seen = scan_ties(labels, p, row, c, cls[c].prefix, begin, end, 0, 0, 0, nullptr, storage, vars);
      if (threadIdx.x == 0) tie_counts[(row * 2 + c) * gridDim.x + blockIdx.x] = seen;
    }
  });
}

/// The sum of counts[j] for j in [0, upto), in every thread of the block.
__device__ inline std::uint32_t block_sum(const std::uint32_t* counts, std::uint32_t upto, block_storage& storage,
                                          block_vars& vars) {
  unsigned long long mine = 0;
  for (std::uint32_t j = threadIdx.x; j < upto; j += kThreads) mine += counts[j];
  const unsigned long long sum = block_reduce(storage.reduce).Sum(mine);
  if (threadIdx.x == 0) vars.base = static_cast<std::uint32_t>(min(sum, 0xFFFFFFFFull));
  __syncthreads();
  const std::uint32_t out = vars.base;
  __syncthreads();  // vars.base and the storage are free again
  return out;
}

/// Tie pass, second half: every block takes, in index order, the ties of its part whose rank in
/// the row (the ties of the blocks before it plus their rank here) is below what is still needed.
/// A class takes min(k_rem, ties counted): its slots follow the previous class's, and block 0
/// moves taken past both.
template <class L>
__global__ void tie_take_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                const std::uint32_t* tie_counts, std::uint32_t* selected) {
  const std::int64_t row = blockIdx.y;
  tie_pass(states, p, [&](row_state* rs, const class_state (&cls)[2], std::int64_t begin, std::int64_t end,
                          block_storage& storage, block_vars& vars) {
    std::uint32_t base = rs->tie_base;  // no block of this kernel writes it
    for (int c = 0; c < 2; ++c) {
      const class_state& cs = cls[c];
      if (!needs_tie_pass(cs)) continue;
      const std::uint32_t* counts = tie_counts + (row * 2 + c) * gridDim.x;
      const std::uint32_t total = block_sum(counts, gridDim.x, storage, vars);
      const std::uint32_t before = block_sum(counts, blockIdx.x, storage, vars);
      const std::uint32_t want = min(cs.k_rem, total);
      if (before < want) {  // the same in every thread
        const std::uint32_t seen =
            scan_ties(labels, p, row, c, cs.prefix, begin, end, before, want, base, selected + row * p.k, storage, vars);
        // A part scanned to its end must hold the ties it counted (else the labels changed).
        if (threadIdx.x == 0 && before + seen < want && seen != counts[blockIdx.x])
          report_fault(p, sampler_fault_kind::ties_short, row, c, before + seen);
      }
      if (blockIdx.x == 0 && threadIdx.x == 0 && total < cs.k_rem)
        report_fault(p, sampler_fault_kind::ties_short, row, c, total);
      base += want;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) rs->taken = base;  // the other blocks read tie_base only
  });
}

}  // namespace pinfeed::ops::gpu_sampler
