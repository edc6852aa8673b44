#pragma once
// The output of every row once its selection is complete: the order keys (ord(i), i) of the taken
// items, sorted by the dispatch (CUB's device radix sorts), then written out as indices, -1
// padding, valid counts and gathered labels and features. Grid (ceil(k / kThreads), rows).

#include "block_types.cuh"

namespace pinfeed::ops::gpu_sampler {

/// One row (begin_off null: no segment offsets) is sorted whole over k slots: its unused slots get
/// padding keys. Several rows: segment [begin_off[row], end_off[row]) holds the row's taken items.
__global__ void order_keys_kernel(params_dev p, const row_state* states, const std::uint32_t* selected,
                                  std::uint64_t* keys_out, int* begin_off, int* end_off) {
  const bool pad = begin_off == nullptr;
  const std::int64_t row = blockIdx.y;
  const std::uint32_t taken = min(states[row].taken, static_cast<std::uint32_t>(p.k));
  const philox_stream ord(p.seed, p.offset, static_cast<std::uint64_t>(row), 1);
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (j == 0 && begin_off != nullptr) {
    begin_off[row] = static_cast<int>(row * p.k);
    end_off[row] = static_cast<int>(row * p.k + taken);
  }
  if (j < taken) {
    const std::uint32_t idx = selected[row * p.k + j];
    keys_out[row * p.k + j] = (static_cast<std::uint64_t>(ord.word_at(idx)) << p.index_bits) | idx;
  } else if (pad && j < p.k) {
    keys_out[row * p.k + j] = padding_key(p.index_bits);  // sorts after every real key
  }
}

/// One gathered feature row: src's feature_bytes to dst, zeros when src is null (a padding slot).
__device__ __forceinline__ void copy_feature_row(std::byte* dst, const std::byte* src, std::size_t feature_bytes) {
  const bool words = feature_bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 4 == 0 &&
                     (src == nullptr || reinterpret_cast<std::uintptr_t>(src) % 4 == 0);
  if (words) {
    for (std::size_t b = 0; b < feature_bytes; b += 4)
      *reinterpret_cast<std::uint32_t*>(dst + b) = src ? *reinterpret_cast<const std::uint32_t*>(src + b) : 0u;
  } else {
    for (std::size_t b = 0; b < feature_bytes; ++b) dst[b] = src ? src[b] : std::byte{0};
  }
}

template <class L, class I>
__global__ void write_kernel(params_dev p, const row_state* states, const std::uint64_t* sorted, const L* labels,
                             I* indices, std::int32_t* valid, L* gathered_labels, const std::byte* features,
                             std::byte* gathered_features, std::size_t feature_bytes) {
  const std::int64_t row = blockIdx.y;
  const std::uint32_t taken = min(states[row].taken, static_cast<std::uint32_t>(p.k));
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (j == 0 && valid != nullptr) valid[row] = static_cast<std::int32_t>(taken);
  if (j >= p.k) return;
  std::int64_t idx = j < taken ? static_cast<std::int64_t>(sorted[row * p.k + j] & ((1ull << p.index_bits) - 1)) : -1;
  if (idx >= p.n) {  // a slot no kernel wrote (inconsistent state): never read past the row
    report_fault(p, sampler_fault_kind::bad_index, row, -1, static_cast<std::uint32_t>(j));
    idx = -1;
  }
  indices[row * p.k + j] = static_cast<I>(idx);
  if (gathered_labels != nullptr)
    gathered_labels[row * p.k + j] = idx >= 0 ? labels[row * p.n + idx] : static_cast<L>(p.ignore_label);
  if (gathered_features != nullptr)
    copy_feature_row(gathered_features + (row * p.k + j) * feature_bytes,
                     idx >= 0 ? features + (row * p.n + idx) * feature_bytes : nullptr, feature_bytes);
}

}  // namespace pinfeed::ops::gpu_sampler
