#pragma once
// The GPU sampler's block-level vocabulary: the block size, the CUB primitives the steps use and
// the storage they share, an item's class, and the fault report.

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "fault_word.hpp"
#include "params.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed::ops::gpu_sampler {

constexpr int kThreads = 256;

using block_reduce = cub::BlockReduce<unsigned long long, kThreads>;
using block_scan_int = cub::BlockScan<int, kThreads>;
using block_scan_u32 = cub::BlockScan<std::uint32_t, kThreads>;

/// The CUB storage a step needs at one time (steps run one after another and reuse it).
union block_storage {
  typename block_reduce::TempStorage reduce;
  typename block_scan_int::TempStorage scan_int;
  typename block_scan_u32::TempStorage scan_u32;
};

/// Values a block's threads share within a step.
struct block_vars {
  std::uint32_t base, bucket, below, seen;
};

using histogram = std::uint32_t[2][kMaxBins];

__device__ __forceinline__ int item_class(std::int64_t label, std::int64_t neg, std::int64_t ign) {
  return label == ign ? -1 : (label == neg ? 1 : 0);
}

template <class L>
__device__ __forceinline__ std::int64_t load_label(const L* labels, std::int64_t i) {
  return static_cast<std::int64_t>(labels[i]);
}

/// Records that the row's state is inconsistent (the labels changed between the kernels of one call,
/// or two calls shared one temp buffer): the kernels clamp every write to its row and the host turns
/// the word into an exception at its next call. A plain store: any one of racing faults is kept.
__device__ __forceinline__ void report_fault(const params_dev& p, sampler_fault_kind kind, std::int64_t row, int c,
                                             std::uint32_t value) {
  if (p.fault != nullptr)
    *reinterpret_cast<volatile unsigned long long*>(p.fault) = encode_fault(kind, row, c, value);
}

__device__ __forceinline__ bool selects(const class_state& cs) {
  return cs.mode == static_cast<std::uint32_t>(class_mode::select);
}
/// More items tie at the threshold T than are still needed: the lowest indices win (tie pass).
__device__ __forceinline__ bool needs_tie_pass(const class_state& cs) { return selects(cs) && cs.bucket != cs.k_rem; }

/// Every item of class >= 0 among the four (one Philox block) from i0 of a row, below end:
/// fn(class, key, index).
template <class L, class Fn>
__device__ __forceinline__ void for_each_keyed_item(const L* __restrict__ row_labels, const philox_stream& keys,
                                                    const params_dev& p, std::int64_t i0, std::int64_t end, Fn&& fn) {
  const philox_block kb = keys.block_at(static_cast<std::uint32_t>(i0 >> 2));
  for (int q = 0; q < 4 && i0 + q < end; ++q) {
    const int c = item_class(load_label(row_labels, i0 + q), p.negative_label, p.ignore_label);
    if (c >= 0) fn(c, kb.v[q], static_cast<std::uint32_t>(i0 + q));
  }
}

}  // namespace pinfeed::ops::gpu_sampler
