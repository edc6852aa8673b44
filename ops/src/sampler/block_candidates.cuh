#pragma once
// A row's selection and candidates at block level: the block-aggregated append of taken items, the
// candidate lists of the first bucket, and the walk over those candidates (or over the row again).

#include "block_types.cuh"

namespace pinfeed::ops::gpu_sampler {

/// Block-aggregated append of flagged items to a row's selection (one atomic per block and round).
__device__ __forceinline__ void append_selected(block_storage& storage, block_vars& vars, row_state* rs,
                                                std::uint32_t* selected_row, int count, const std::uint32_t (&items)[4],
                                                const params_dev& p, std::int64_t row) {
  int offset, total;
  block_scan_int(storage.scan_int).ExclusiveSum(count, offset, total);
  if (threadIdx.x == 0) vars.base = total > 0 ? atomicAdd(&rs->taken, static_cast<std::uint32_t>(total)) : 0u;
  __syncthreads();
  const std::uint32_t base = vars.base;
  for (int q = 0; q < count; ++q) {
    const std::uint32_t at = base + static_cast<std::uint32_t>(offset + q);
    if (at < p.k) selected_row[at] = items[q];
    else report_fault(p, sampler_fault_kind::selection_overflow, row, -1, at);
  }
  __syncthreads();  // vars.base and the scan storage are reused by the next round
}

/// Appends one item to a row's selection on its own (one atomic per item): slot `taken`, while it
/// is below k.
__device__ __forceinline__ void append_one(row_state* rs, std::uint32_t* selected_row, std::uint32_t idx,
                                           const params_dev& p, std::int64_t row, int c) {
  const std::uint32_t at = atomicAdd(&rs->taken, 1u);
  if (at < p.k) selected_row[at] = idx;
  else report_fault(p, sampler_fault_kind::selection_overflow, row, c, at);
}

/// Where the items of each selecting class's first bucket are kept: list[c][0, cap), or nowhere when
/// the class has more of them than cap (then the later passes read the row again).
struct candidate_lists {
  std::uint64_t* list[2];
  std::uint32_t cap;
};

/// The global candidate lists of a row (rows x 2 x p.cand_cap keys from cand).
__device__ __forceinline__ candidate_lists row_lists(std::uint64_t* cand, const params_dev& p, std::int64_t row) {
  return {{cand + (row * 2) * p.cand_cap, cand + (row * 2 + 1) * p.cand_cap}, p.cand_cap};
}

/// Visits the items of the first bucket of every selecting class: from the candidate lists when
/// they fit, else by reading the row again; thread `tid` of `stride` visits every stride-th item.
/// fn(class, key, index).
template <class L, class Fn>
__device__ void for_each_candidate(const L* __restrict__ labels, const params_dev& p, std::int64_t row,
                                   const class_state (&cls)[2], const candidate_lists& lists, std::uint32_t tid,
                                   std::uint32_t stride, Fn&& fn) {
  bool reread = false;
  for (int c = 0; c < 2; ++c) {
    if (!selects(cls[c])) continue;
    if (cls[c].candidates > lists.cap) {
      reread = true;
      continue;
    }
    // Only entries the filter wrote (fewer than counted if the labels changed in between).
    const std::uint32_t listed = min(cls[c].candidates, cls[c].cand_used);
    for (std::uint32_t j = tid; j < listed; j += stride)
      fn(c, static_cast<std::uint32_t>(lists.list[c][j] >> 32), static_cast<std::uint32_t>(lists.list[c][j]));
  }
  if (!reread) return;
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  for (std::int64_t i0 = 4 * static_cast<std::int64_t>(tid); i0 < p.n; i0 += 4 * static_cast<std::int64_t>(stride)) {
    for_each_keyed_item(row_labels, keys, p, i0, p.n, [&](int c, std::uint32_t key, std::uint32_t idx) {
      if (!selects(cls[c]) || cls[c].candidates <= lists.cap) return;
      if ((key >> digit_shift(0)) == (cls[c].prefix >> (digit_bits(1) + digit_bits(2)))) fn(c, key, idx);
    });
  }
}

}  // namespace pinfeed::ops::gpu_sampler
