#pragma once
// The radix select's histograms at block level: clearing a block's shared histogram, merging it into
// a row's global one, and choosing, from a row's histogram, the bucket that holds the k-th key.

#include "block_types.cuh"

namespace pinfeed::ops::gpu_sampler {

__device__ __forceinline__ void clear_histogram(histogram& h) {
  for (std::uint32_t b = threadIdx.x; b < 2 * kMaxBins; b += kThreads) (&h[0][0])[b] = 0;
}

/// Adds a block's shared histogram to the row's global one (after a barrier).
__device__ __forceinline__ void merge_histogram(const histogram& s_hist, std::uint32_t* row_hist) {
  for (std::uint32_t b = threadIdx.x; b < 2 * kMaxBins; b += kThreads) {
    const std::uint32_t v = (&s_hist[0][0])[b];
    if (v) atomicAdd(&row_hist[b], v);
  }
}

/// Thread 0, before the first choice: turns the row's class counts into num_pos and num_neg and
/// sets each class's mode (none, all of it, or a selection).
__device__ __forceinline__ void start_selection(const params_dev& p, row_state& rs) {
  const auto positives = static_cast<std::int64_t>(rs.positives), negatives = static_cast<std::int64_t>(rs.negatives);
  const class_counts cc = balanced_counts(positives, negatives, p.k, p.target, p.mode);
  const std::int64_t want[2] = {cc.num_pos, cc.num_neg}, avail[2] = {positives, negatives};
  for (int c = 0; c < 2; ++c) {
    class_state& cs = rs.cls[c];
    cs.want = static_cast<std::uint32_t>(want[c]);
    cs.k_rem = cs.want;
    cs.prefix = 0;
    cs.mode = static_cast<std::uint32_t>(want[c] == 0 ? class_mode::none
                                         : want[c] == avail[c] ? class_mode::all : class_mode::select);
  }
}

/// Finds the bin of h (one class's histogram of this pass's digit) that holds the k_rem-th smallest
/// key and narrows cs to it: the prefix gains the digit, k_rem becomes the rank inside the bin.
template <int Pass>
__device__ void choose_bin(const params_dev& p, std::int64_t row, int c, class_state& cs, const std::uint32_t* h,
                           block_storage& storage, block_vars& vars) {
  constexpr std::uint32_t kBins = 1u << digit_bits(Pass);
  constexpr std::uint32_t kPerThread = kBins / kThreads;
  constexpr std::uint32_t kNone = kBins;  // sentinel: no bin holds the k_rem-th key
  if (threadIdx.x == 0) vars.bucket = kNone;
  __syncthreads();  // the sentinel is in place before any thread can find its bin
  std::uint32_t local[kPerThread], sum = 0;
  for (std::uint32_t j = 0; j < kPerThread; ++j) sum += local[j] = h[threadIdx.x * kPerThread + j];
  std::uint32_t running, total;
  block_scan_u32(storage.scan_u32).ExclusiveSum(sum, running, total);
  const std::uint32_t k_rem = cs.k_rem;
  for (std::uint32_t j = 0; j < kPerThread; ++j) {
    if (running < k_rem && running + local[j] >= k_rem) {  // at most one thread and bin match
      vars.bucket = threadIdx.x * kPerThread + j;
      vars.below = running;
    }
    running += local[j];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t bucket = vars.bucket, below = vars.below, rem;
    if (bucket == kNone) {
      // The histogram holds fewer than k_rem items: state from another call or changed labels.
      // Clamp to the last bin and take what is there; the host reports it.
      report_fault(p, sampler_fault_kind::histogram_short, row, c, total);
      bucket = kBins - 1;
      below = total - h[bucket];
      rem = h[bucket];
    } else {
      rem = k_rem - below;
    }
    cs.prefix = (cs.prefix << digit_bits(Pass)) | bucket;
    cs.k_rem = rem;
    cs.bucket = h[bucket];
    if (Pass == 0) cs.candidates = cs.bucket;
  }
  __syncthreads();
}

/// One block per row: finds, per selecting class, the bucket of hist (the row's 2 x kMaxBins
/// histogram, shared or global memory) that holds the k_rem-th smallest key, and clears hist for the
/// next pass. Pass 0 first turns the counts into num_pos and num_neg.
template <int Pass>
__device__ void choose_step(const params_dev& p, std::int64_t row, row_state& rs, std::uint32_t* hist,
                            block_storage& storage, block_vars& vars) {
  if (Pass == 0 && threadIdx.x == 0) start_selection(p, rs);
  __syncthreads();
  for (int c = 0; c < 2; ++c) {
    class_state& cs = rs.cls[c];
    std::uint32_t* h = hist + c * kMaxBins;
    if (selects(cs)) choose_bin<Pass>(p, row, c, cs, h, storage, vars);
    for (std::uint32_t b = threadIdx.x; b < kMaxBins; b += kThreads) h[b] = 0;  // ready for the next pass
  }
  __syncthreads();  // the state and the cleared histogram are seen by every thread
}

}  // namespace pinfeed::ops::gpu_sampler
