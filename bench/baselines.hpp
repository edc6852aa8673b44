#pragma once
// The balanced sampler's benchmark baselines (not part of the library):
//  - the dynamic-shape formulation (nonzero -> randperm -> cat -> randperm, per row) on the host
//    and on the GPU, where reading the class counts back is the host synchronization the static
//    sampler removes;
//  - NVIDIA's own selection: cub::DeviceTopK (CCCL 3.5 and later) picking the K smallest random
//    keys of each row, one call per row. It does what the sampler's radix select does without the
//    class balance, the order permutation or the gathers, so it bounds what a library top-k gives
//    for the same selection.

#include <cstdint>
#include <string>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::bench {

/// The dynamic-shape formulation as a per-row host loop. Its picks follow the sampler's counts
/// (balanced_counts) but not its bits. Host pointers; throws std::invalid_argument on bad input
/// (ops::validate) before writing anything.
void naive_sample_cpu(const ops::sampler_args& a, const ops::sampler_params& p);

/// The GPU checks of the naive sampler that need no CUDA call: those of the balanced sampler,
/// and n up to 2^31 - 1 (CUB's item counts).
void validate_naive_gpu_shapes(const ops::sampler_args& a, const ops::sampler_params& p, bool running);

#if PINFEED_WITH_CUDA
/// The dynamic-shape formulation on the GPU: per row, cub::DeviceSelect of positives and negatives,
/// the counts copied to the host (a synchronization per row), then random permutations by radix
/// sort of random keys and a gather. Two-phase temp storage like ops::balanced_sample_device; device
/// pointers. Same counts as the sampler, other picks.
void naive_sample_gpu(void* d_temp, std::size_t& temp_bytes, const ops::sampler_args& a,
                      const ops::sampler_params& p, cudaStream_t stream);
#endif

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
