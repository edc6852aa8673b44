#pragma once
// The passes of the radix select as block-level steps over a range of a row. When several blocks
// share a row, each pass is a kernel of its own and the blocks' histograms meet in global memory.
// When a block has a row to itself (many rows, or short ones), one kernel runs every pass with the
// histogram and the candidates in shared memory: no per-row global histogram, no memset, one launch.

#include "block_candidates.cuh"
#include "block_histogram.cuh"

namespace pinfeed::ops::gpu_sampler {

/// Counts the positives and negatives of items [begin, end) of a row (begin a multiple of 4) and
/// adds their top key digits to s_hist. The block's totals are returned in thread 0.
template <class L>
__device__ void count_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, std::int64_t begin,
                           std::int64_t end, histogram& s_hist, block_storage& storage, unsigned long long& positives,
                           unsigned long long& negatives) {
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  unsigned long long pos = 0, neg = 0;
  for (std::int64_t i0 = begin + 4 * threadIdx.x; i0 < end; i0 += 4 * kThreads) {
    for_each_keyed_item(row_labels, keys, p, i0, end, [&](int c, std::uint32_t key, std::uint32_t) {
      (c == 0 ? pos : neg)++;
      atomicAdd(&s_hist[c][key >> digit_shift(0)], 1u);
    });
  }
  positives = block_reduce(storage.reduce).Sum(pos);
  __syncthreads();
  negatives = block_reduce(storage.reduce).Sum(neg);
  __syncthreads();  // the storage is reused, the histogram is complete
}

/// Full read of items [begin, end) of a row: keys below the first bucket are taken, keys in it
/// feed s_hist with their second digit and are kept as candidates where they fit.
template <class L>
__device__ void filter_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, std::int64_t begin,
                            std::int64_t end, row_state* rs, const candidate_lists& lists, histogram& s_hist,
                            std::uint32_t* selected_row, block_storage& storage, block_vars& vars) {
  // What the choice decided, without cand_used, which other blocks count up meanwhile.
  class_state cls[2];
  for (int c = 0; c < 2; ++c) {
    cls[c].mode = rs->cls[c].mode;
    cls[c].prefix = rs->cls[c].prefix;
    cls[c].candidates = rs->cls[c].candidates;
  }
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  // Every thread runs the same number of rounds so the block-wide scan stays in step.
  for (std::int64_t r0 = begin; r0 < end; r0 += 4 * kThreads) {
    const std::int64_t i0 = r0 + 4 * threadIdx.x;
    std::uint32_t take[4];
    int count = 0;
    if (i0 < end) {
      for_each_keyed_item(row_labels, keys, p, i0, end, [&](int c, std::uint32_t key, std::uint32_t idx) {
        const class_state& cs = cls[c];
        if (cs.mode == static_cast<std::uint32_t>(class_mode::all)) {
          take[count++] = idx;
        } else if (selects(cs)) {
          const std::uint32_t d0 = key >> digit_shift(0);
          if (d0 < cs.prefix) {
            take[count++] = idx;
          } else if (d0 == cs.prefix) {
            atomicAdd(&s_hist[c][(key >> digit_shift(1)) & (kMaxBins - 1)], 1u);
            if (cs.candidates <= lists.cap) {
              const std::uint32_t slot = atomicAdd(&rs->cls[c].cand_used, 1u);
              if (slot < cs.candidates) lists.list[c][slot] = (static_cast<std::uint64_t>(key) << 32) | idx;
              else report_fault(p, sampler_fault_kind::candidate_overflow, row, c, slot);
            }
          }
        }
      });
    }
    append_selected(storage, vars, rs, selected_row, count, take, p, row);
  }
  __syncthreads();  // the histogram and the candidates are complete (also when there was no round)
}

/// Histogram (into hist, the row's 2 x kMaxBins) of the last digit among the items of the chosen
/// 22-bit bucket.
template <class L>
__device__ void refine_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, const row_state* rs,
                            const candidate_lists& lists, std::uint32_t* hist, std::uint32_t tid, std::uint32_t stride) {
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  // After choose<1>, prefix holds 22 bits; candidates were bucketed on the top 11.
  class_state top[2] = {cls[0], cls[1]};
  for (int c = 0; c < 2; ++c) top[c].prefix = cls[c].prefix << digit_bits(2);  // align to for_each_candidate
  for_each_candidate(labels, p, row, top, lists, tid, stride, [&](int c, std::uint32_t key, std::uint32_t) {
    if ((key >> digit_shift(1)) == cls[c].prefix) atomicAdd(&hist[c * kMaxBins + (key & ((1u << digit_bits(2)) - 1))], 1u);
  });
}

/// Takes the candidates below the threshold T, and the ties at T when every one of them is needed.
template <class L>
__device__ void finish_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, row_state* rs,
                            const candidate_lists& lists, std::uint32_t* selected_row, std::uint32_t tid,
                            std::uint32_t stride) {
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  for_each_candidate(labels, p, row, cls, lists, tid, stride, [&](int c, std::uint32_t key, std::uint32_t idx) {
    const std::uint32_t threshold = cls[c].prefix;  // all 32 bits after choose<2>
    if (key < threshold || (key == threshold && cls[c].bucket == cls[c].k_rem)) append_one(rs, selected_row, idx, p, row, c);
  });
}

/// Scans items [begin, end) of a row in index order for items of class c whose key is `threshold`.
/// The tie of rank r in the row (r = before + its rank in this range) is written to
/// selected_row[base + r] while r < want; with want > 0 the scan stops once `want` ties are seen.
/// Returns the ties seen in the range (in every thread). want == 0: only counts.
template <class L>
__device__ std::uint32_t scan_ties(const L* __restrict__ labels, const params_dev& p, std::int64_t row, int c,
                                   std::uint32_t threshold, std::int64_t begin, std::int64_t end, std::uint32_t before,
                                   std::uint32_t want, std::uint32_t base, std::uint32_t* selected_row,
                                   block_storage& storage, block_vars& vars) {
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  if (threadIdx.x == 0) vars.seen = 0;
  __syncthreads();
  for (std::int64_t r0 = begin; r0 < end; r0 += kThreads) {
    const std::int64_t i = r0 + threadIdx.x;
    std::uint32_t flag = 0;
    if (i < end)
      flag = item_class(load_label(row_labels, i), p.negative_label, p.ignore_label) == c &&
             keys.word_at(static_cast<std::uint64_t>(i)) == threshold;
    std::uint32_t rank, total;
    block_scan_u32(storage.scan_u32).ExclusiveSum(flag, rank, total);
    const std::uint32_t seen = vars.seen;
    const std::uint32_t r = before + seen + rank;
    if (flag && r < want) {
      const std::uint32_t at = base + r;
      if (at < p.k) selected_row[at] = static_cast<std::uint32_t>(i);
      else report_fault(p, sampler_fault_kind::selection_overflow, row, c, at);
    }
    __syncthreads();  // every thread has read vars.seen; the scan storage is free
    if (threadIdx.x == 0) vars.seen = seen + total;
    __syncthreads();
    if (want > 0 && before + vars.seen >= want) break;  // the same value in every thread
  }
  const std::uint32_t seen = vars.seen;
  __syncthreads();  // vars.seen is read before anyone resets it
  return seen;
}

}  // namespace pinfeed::ops::gpu_sampler
