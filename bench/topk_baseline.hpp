#pragma once
// NVIDIA's own selection as a baseline for the GPU sampler: cub::DeviceTopK (CCCL 3.5 and later)
// picking the K smallest random keys of each row, one call per row. It does what the sampler's
// radix select does without the class balance, the order permutation or the gathers, so it bounds
// what a library top-k gives for the same selection.

#include <cstdint>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::bench {

/// Why the baseline is not built, or empty when it is (built with a CCCL that has cub::DeviceTopK).
[[nodiscard]] std::string cub_topk_unavailable();

/// Device buffers for rows x n keys and the K picks of each row, and CUB's temp storage (queried
/// once, reused by every call).
class cub_topk_baseline {
 public:
  cub_topk_baseline(std::int64_t rows, std::int64_t n, std::int64_t k);
  ~cub_topk_baseline();
  cub_topk_baseline(const cub_topk_baseline&) = delete;
  cub_topk_baseline& operator=(const cub_topk_baseline&) = delete;
  /// Fills each row's selection keys (Philox, as the sampler's) and selects the K smallest with
  /// their indices, row by row, on `stream`. Asynchronous.
  void run(std::uint64_t seed, cudaStream_t stream);

 private:
  std::int64_t rows_, n_, k_;
  void* keys_ = nullptr;
  void* out_keys_ = nullptr;
  void* out_idx_ = nullptr;
  void* temp_ = nullptr;
  std::size_t temp_bytes_ = 0;
};

}  // namespace pinfeed::bench
