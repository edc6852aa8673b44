#pragma once
// What the loader's GPU cases share: a random source of 64 KiB samples, the sum a batch of it must
// give, a kernel that spins before it sums a batch (a reader still at work when its view is freed),
// and loader options on the GPU. Each case file gets its own copy (an anonymous namespace).
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/runtime/source.hpp"

using namespace pinfeed;

namespace {

constexpr std::int64_t kBytes = 1 << 16;

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins for `ns` nanoseconds, then sums the batch's bytes into *out (one block).
__global__ void spin_then_sum(const std::uint8_t* data, std::size_t n, std::uint64_t ns, unsigned long long* out) {
  const std::uint64_t start = global_ns();
  while (global_ns() - start < ns) {
  }
  unsigned long long local = 0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) local += data[i];
  atomicAdd(out, local);
}

std::shared_ptr<source> random_source(std::uint64_t n) {
  return make_source(n, {{"data", dtype::u8, {kBytes}}}, [](sample& s) { fill_random_bytes(s.rng(), s.bytes(0)); });
}

unsigned long long reference_sum(std::uint64_t seed, std::uint64_t first, std::size_t count) {
  std::vector<std::byte> buf(kBytes);
  unsigned long long sum = 0;
  for (std::uint64_t i = first; i < first + count; ++i) {
    fill_random_bytes(philox_stream(seed, 0, i), buf);
    for (auto b : buf) sum += static_cast<unsigned>(b);
  }
  return sum;
}

loader_options gpu_options(std::size_t batch, std::size_t prefetch) {
  loader_options o;
  o.batch_size = batch;
  o.workers = 2;
  o.prefetch = prefetch;
  o.device = "cuda";
  o.seed = 77;
  return o;
}

/// Batch `b` of random_source(seed 77), read back from the device: each sample is its own.
inline void check_batch_is_its_own(const batch& b) {
  std::vector<std::byte> back(b.size() * kBytes), expect(kBytes);
  const auto v = b.field<std::uint8_t>("data");
  PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), v.data(), v.elements().size(), cudaMemcpyDeviceToHost, b.stream()));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(b.stream()));
  for (std::size_t j = 0; j < b.size(); ++j) {
    fill_random_bytes(philox_stream(77, 0, b.indices()[j]), expect);
    CHECK(std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) == 0);
  }
}

}  // namespace
