#include "topk_baseline.hpp"

#include <stdexcept>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/philox.hpp"

#if __has_include(<cub/device/device_topk.cuh>)
#include <cub/device/device_topk.cuh>
#include <cuda/execution>
#include <cuda/std/execution>
#include <cuda/stream_ref>
#include <thrust/iterator/counting_iterator.h>
#define PINFEED_HAVE_CUB_TOPK 1
#else
#include <cub/version.cuh>
#define PINFEED_HAVE_CUB_TOPK 0
#endif

namespace pinfeed::bench {

#if PINFEED_HAVE_CUB_TOPK
namespace {

__global__ void selection_keys(std::uint64_t seed, std::int64_t rows, std::int64_t n, std::uint32_t* keys) {
  const std::int64_t row = blockIdx.y;
  const philox_stream s(seed, 0, static_cast<std::uint64_t>(row), 0);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    keys[row * n + i] = s.word_at(static_cast<std::uint64_t>(i));
}

// The stream, and the only configuration this CCCL implements (unordered, not deterministic).
auto topk_env(cudaStream_t stream) {
  return cuda::std::execution::env{cuda::stream_ref{stream},
                                   cuda::execution::require(cuda::execution::determinism::not_guaranteed,
                                                            cuda::execution::output_ordering::unsorted)};
}

}  // namespace

std::string cub_topk_unavailable() { return {}; }

cub_topk_baseline::cub_topk_baseline(std::int64_t rows, std::int64_t n, std::int64_t k) : rows_(rows), n_(n), k_(k) {
  if (rows <= 0 || n <= 0 || k <= 0 || k > n || n > 0x7FFFFFFF)
    throw std::invalid_argument("cub_topk_baseline: bad shape");
  PINFEED_CUDA_TRY(cudaMalloc(&keys_, static_cast<std::size_t>(rows * n) * sizeof(std::uint32_t)));
  PINFEED_CUDA_TRY(cudaMalloc(&out_keys_, static_cast<std::size_t>(rows * k) * sizeof(std::uint32_t)));
  PINFEED_CUDA_TRY(cudaMalloc(&out_idx_, static_cast<std::size_t>(rows * k) * sizeof(std::uint32_t)));
  thrust::counting_iterator<std::uint32_t> idx(0);
  PINFEED_CUDA_TRY(cub::DeviceTopK::MinPairs(nullptr, temp_bytes_, static_cast<const std::uint32_t*>(keys_),
                                             static_cast<std::uint32_t*>(out_keys_), idx,
                                             static_cast<std::uint32_t*>(out_idx_), static_cast<int>(n),
                                             static_cast<int>(k), topk_env(nullptr)));
  PINFEED_CUDA_TRY(cudaMalloc(&temp_, temp_bytes_ > 0 ? temp_bytes_ : 1));
}

cub_topk_baseline::~cub_topk_baseline() {
  for (void* p : {keys_, out_keys_, out_idx_, temp_})
    if (p != nullptr) PINFEED_CUDA_TRY_NOTHROW(cudaFree(p));
}

void cub_topk_baseline::run(std::uint64_t seed, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>((n_ + 255) / 256, 1024)), static_cast<unsigned>(rows_));
  selection_keys<<<grid, 256, 0, stream>>>(seed, rows_, n_, static_cast<std::uint32_t*>(keys_));
  PINFEED_CHECK_LAUNCH();
  thrust::counting_iterator<std::uint32_t> idx(0);
  for (std::int64_t r = 0; r < rows_; ++r) {
    std::size_t bytes = temp_bytes_;
    PINFEED_CUDA_TRY(cub::DeviceTopK::MinPairs(temp_, bytes, static_cast<const std::uint32_t*>(keys_) + r * n_,
                                               static_cast<std::uint32_t*>(out_keys_) + r * k_, idx,
                                               static_cast<std::uint32_t*>(out_idx_) + r * k_,
                                               static_cast<int>(n_), static_cast<int>(k_), topk_env(stream)));
  }
}

#else  // CCCL without cub::DeviceTopK

#define PINFEED_STR2(x) #x
#define PINFEED_STR(x) PINFEED_STR2(x)

std::string cub_topk_unavailable() {
  return "built with CUB " PINFEED_STR(CUB_VERSION) ", which has no cub::DeviceTopK (CCCL 3.5 and later)";
}
cub_topk_baseline::cub_topk_baseline(std::int64_t rows, std::int64_t n, std::int64_t k) : rows_(rows), n_(n), k_(k) {
  throw std::logic_error("cub_topk_baseline: " + cub_topk_unavailable());
}
cub_topk_baseline::~cub_topk_baseline() = default;
void cub_topk_baseline::run(std::uint64_t, cudaStream_t) {}

#endif

}  // namespace pinfeed::bench
