// The GPU half of the sampler baselines (baselines.hpp): the naive per-row sampler and
// cub::DeviceTopK where the CCCL has it.
#include "baselines.hpp"

#include <algorithm>
#include <stdexcept>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "pinfeed/ops/detail/sampler_checks.hpp"

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

// ---- the naive baseline ----------------------------------------------------------------------------

namespace {

using ops::sampler_args;
using ops::sampler_params;

constexpr int kThreads = 256;

/// 0 positive, 1 negative, -1 ignored (the sampler's classes).
__device__ __forceinline__ int naive_class(std::int64_t label, std::int64_t neg, std::int64_t ign) {
  return label == ign ? -1 : (label == neg ? 1 : 0);
}

template <class L>
struct is_class {
  const L* labels;
  std::int64_t neg, ign;
  int cls;
  __device__ bool operator()(std::uint32_t i) const { return naive_class(labels[i], neg, ign) == cls; }
};

/// Random sort keys for positions [0, count) of a permutation draw.
__global__ void perm_keys_kernel(std::uint64_t seed, std::uint32_t offset, std::uint64_t row, std::uint32_t sub,
                                 std::uint32_t count, std::uint32_t* keys) {
  const std::uint32_t j = blockIdx.x * kThreads + threadIdx.x;
  if (j < count) keys[j] = philox_stream(seed, offset, row, sub).word_at(j);
}

template <class L, class I>
__global__ void naive_write_kernel(const std::uint32_t* picked, std::uint32_t taken, std::int64_t k, const L* labels,
                                   std::int64_t ignore, I* indices, L* gathered_labels, const std::byte* features,
                                   std::byte* gathered_features, std::size_t feature_bytes) {
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (j >= k) return;
  const std::int64_t idx = j < taken ? static_cast<std::int64_t>(picked[j]) : std::int64_t{-1};
  indices[j] = static_cast<I>(idx);
  if (gathered_labels != nullptr) gathered_labels[j] = idx >= 0 ? labels[idx] : static_cast<L>(ignore);
  if (gathered_features != nullptr)
    for (std::size_t b = 0; b < feature_bytes; ++b)
      gathered_features[j * feature_bytes + b] = idx >= 0 ? features[idx * feature_bytes + b] : std::byte{0};
}

struct naive_layout {
  std::size_t pos, neg, keys_a, keys_b, vals, picked, out, counts, cub, cub_bytes, total;
};

template <class L>
naive_layout make_naive_layout(const sampler_args& a) {
  naive_layout l{};
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(a.n, 1));
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += (bytes + 255) / 256 * 256;
    return here;
  };
  l.pos = take(n * sizeof(std::uint32_t));
  l.neg = take(n * sizeof(std::uint32_t));
  l.keys_a = take(n * sizeof(std::uint32_t));
  l.keys_b = take(n * sizeof(std::uint32_t));
  l.vals = take(n * sizeof(std::uint32_t));
  l.picked = take(n * sizeof(std::uint32_t));
  l.out = take(n * sizeof(std::uint32_t));
  l.counts = take(2 * sizeof(std::int64_t));
  std::size_t select_bytes = 0, sort_bytes = 0;
  thrust::counting_iterator<std::uint32_t> it(0);
  PINFEED_CUDA_TRY(cub::DeviceSelect::If(nullptr, select_bytes, it, static_cast<std::uint32_t*>(nullptr),
                                         static_cast<std::int64_t*>(nullptr), static_cast<std::int64_t>(n),
                                         is_class<L>{nullptr, 0, 0, 0}));
  PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const std::uint32_t*>(nullptr),
                                                   static_cast<std::uint32_t*>(nullptr),
                                                   static_cast<const std::uint32_t*>(nullptr),
                                                   static_cast<std::uint32_t*>(nullptr), static_cast<int>(n)));
  l.cub_bytes = std::max(select_bytes, sort_bytes);
  l.cub = take(l.cub_bytes);
  l.total = at;
  return l;
}

/// naive_rows' buffers, where naive_layout puts them in its temp storage.
struct naive_buffers {
  std::uint32_t *lists[2], *keys_a, *keys_b, *vals, *picked, *out;
  std::int64_t* counts;
  void* cub;
  std::size_t cub_bytes;
  naive_buffers(std::byte* temp, const naive_layout& l)
      : lists{at(temp, l.pos), at(temp, l.neg)}, keys_a(at(temp, l.keys_a)), keys_b(at(temp, l.keys_b)),
        vals(at(temp, l.vals)), picked(at(temp, l.picked)), out(at(temp, l.out)),
        counts(reinterpret_cast<std::int64_t*>(temp + l.counts)), cub(temp + l.cub), cub_bytes(l.cub_bytes) {}
  static std::uint32_t* at(std::byte* temp, std::size_t offset) {
    return reinterpret_cast<std::uint32_t*>(temp + offset);
  }
};

/// nonzero(labels == positive), nonzero(labels == negative) into b.lists, their sizes into
/// h_counts: the host needs the counts to size what follows, so this is the synchronization.
template <class L>
void naive_classes(const naive_buffers& b, const L* labels, std::int64_t n, const sampler_params& p,
                   std::int64_t h_counts[2], cudaStream_t stream) {
  thrust::counting_iterator<std::uint32_t> it(0);
  for (int c = 0; c < 2; ++c) {
    std::size_t bytes = b.cub_bytes;
    PINFEED_CUDA_TRY(cub::DeviceSelect::If(b.cub, bytes, it, b.lists[c], b.counts + c, n,
                                           is_class<L>{labels, p.negative_label, p.ignore_label, c}, stream));
  }
  PINFEED_CUDA_TRY(cudaMemcpyAsync(h_counts, b.counts, 2 * sizeof(std::int64_t), cudaMemcpyDeviceToHost, stream));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));
}

/// `values` sorted by the random keys of substream `sub` of `row`: a random permutation of them.
void naive_permute(const naive_buffers& b, const sampler_params& p, std::int64_t row, std::uint32_t sub,
                   const std::uint32_t* values, std::uint32_t* permuted, std::uint32_t count, cudaStream_t stream) {
  perm_keys_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      p.seed, p.offset, static_cast<std::uint64_t>(row), sub, count, b.keys_a);
  PINFEED_CHECK_LAUNCH();
  std::size_t bytes = b.cub_bytes;
  PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortPairs(b.cub, bytes, b.keys_a, b.keys_b, values, permuted,
                                                   static_cast<int>(count), 0, 32, stream));
}

/// randperm(P)[:num_pos], randperm(Nn)[:num_neg], cat, then randperm of the concatenation, into
/// b.out; returns how many were taken.
std::uint32_t naive_pick(const naive_buffers& b, const std::int64_t h_counts[2], const ops::class_counts& cc,
                         const sampler_params& p, std::int64_t row, cudaStream_t stream) {
  std::int64_t at = 0;
  for (int c = 0; c < 2; ++c) {
    const auto count = static_cast<std::uint32_t>(h_counts[c]);
    const std::int64_t want = c == 0 ? cc.num_pos : cc.num_neg;
    if (count == 0 || want == 0) continue;
    naive_permute(b, p, row, static_cast<std::uint32_t>(2 + c), b.lists[c], b.vals, count, stream);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(b.picked + at, b.vals, static_cast<std::size_t>(want) * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToDevice, stream));
    at += want;
  }
  const auto taken = static_cast<std::uint32_t>(at);
  if (taken > 0) naive_permute(b, p, row, 4, b.picked, b.out, taken, stream);
  return taken;
}

template <class L, class I>
void naive_rows(std::byte* temp, const naive_layout& l, const sampler_args& a, const sampler_params& p,
                cudaStream_t stream) {
  const naive_buffers b(temp, l);
  const std::int64_t target = ops::positive_target(p), n = a.n;
  for (std::int64_t row = 0; row < a.rows; ++row) {
    const L* labels = static_cast<const L*>(a.labels) + row * n;
    std::int64_t h_counts[2];
    naive_classes<L>(b, labels, n, p, h_counts, stream);
    const ops::class_counts cc = ops::balanced_counts(h_counts[0], h_counts[1], p.k, target, p.mode);
    const std::uint32_t taken = naive_pick(b, h_counts, cc, p, row, stream);
    if (p.k > 0) {
      naive_write_kernel<L, I><<<static_cast<unsigned>((p.k + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          b.out, taken, p.k, labels, p.ignore_label, static_cast<I*>(a.indices) + row * p.k,
          a.gathered_labels ? static_cast<L*>(a.gathered_labels) + row * p.k : nullptr,
          a.features ? static_cast<const std::byte*>(a.features) + row * n * a.feature_bytes : nullptr,
          a.gathered_features ? static_cast<std::byte*>(a.gathered_features) + row * p.k * a.feature_bytes : nullptr,
          a.feature_bytes);
      PINFEED_CHECK_LAUNCH();
    }
    if (a.valid != nullptr) {
      const auto v = static_cast<std::int32_t>(taken);
      PINFEED_CUDA_TRY(cudaMemcpyAsync(a.valid + row, &v, sizeof v, cudaMemcpyHostToDevice, stream));
      PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));  // `v` lives on this stack frame
    }
  }
}

}  // namespace

void naive_sample_gpu(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                      cudaStream_t stream) {
  validate_naive_gpu_shapes(a, p, d_temp != nullptr);
  if (d_temp != nullptr && !ops::detail::stream_capturing(stream)) ops::detail::check_device_pointers(a, "naive sampler (GPU)");
  const bool l64 = a.label_type == dtype::i64, i64 = a.index_type == dtype::i64;
  const naive_layout l = l64 ? make_naive_layout<std::int64_t>(a) : make_naive_layout<std::int32_t>(a);
  if (ops::detail::answer_temp_query(d_temp, temp_bytes, l.total, "naive sampler (GPU)")) return;
  auto* temp = static_cast<std::byte*>(d_temp);
  if (l64 && i64) naive_rows<std::int64_t, std::int64_t>(temp, l, a, p, stream);
  else if (l64) naive_rows<std::int64_t, std::int32_t>(temp, l, a, p, stream);
  else if (i64) naive_rows<std::int32_t, std::int64_t>(temp, l, a, p, stream);
  else naive_rows<std::int32_t, std::int32_t>(temp, l, a, p, stream);
}


// ---- cub::DeviceTopK ---------------------------------------------------------------------------------

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
