// The naive GPU sampler baseline: the sampler's counts and contract on the device (compared with
// the host reference's counts), the gathers, and its temp-storage convention.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "baselines.hpp"
#include "ops/sampler_support.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

TEST_CASE("gpu.baselines.naive_gpu_keeps_the_counts" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("naive GPU sampler")) return;
  const std::int64_t rows = 3, n = 5000;
  const std::size_t fb = 16;
  sampler_params p;
  p.k = 300;
  p.seed = 8;
  const auto labels = test::random_labels(rows * n, 3, 4, 10);
  std::vector<std::byte> features(rows * n * fb);
  for (std::size_t i = 0; i < features.size(); ++i) features[i] = static_cast<std::byte>(i * 131 % 251);

  device_buffer d_labels(labels.size() * 8), d_idx(rows * p.k * 8), d_valid(rows * 4), d_glab(rows * p.k * 8),
      d_feat(features.size()), d_gfeat(rows * p.k * fb);
  test::upload(d_labels.data(), labels.data(), labels.size() * 8);
  test::upload(d_feat.data(), features.data(), features.size());
  test::fill_device(d_gfeat.data(), 0xEE, d_gfeat.size());
  sampler_args a = test::args_over(rows, n, d_labels.data(), d_idx.data(), reinterpret_cast<std::int32_t*>(d_valid.data()),
                                   d_glab.data());
  a.features = d_feat.data();
  a.feature_bytes = fb;
  a.gathered_features = d_gfeat.data();

  std::size_t temp_bytes = 0;
  bench::naive_sample_gpu(nullptr, temp_bytes, a, p, nullptr);
  REQUIRE(temp_bytes > 0);
  device_buffer temp(temp_bytes);
  std::size_t too_small = temp_bytes - 1;
  CHECK_THROWS_WITH_AS(bench::naive_sample_gpu(temp.data(), too_small, a, p, nullptr),
                       doctest::Contains("smaller than"), std::invalid_argument);
  bench::naive_sample_gpu(temp.data(), temp_bytes, a, p, nullptr);
  PINFEED_CUDA_TRY(cudaStreamSynchronize(nullptr));

  test::result r = test::make_result(rows, p.k);
  std::vector<std::byte> gathered(rows * p.k * fb);
  PINFEED_CUDA_TRY(cudaMemcpy(r.indices.data(), d_idx.data(), r.indices.size() * 8, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(r.valid.data(), d_valid.data(), r.valid.size() * 4, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(r.labels.data(), d_glab.data(), r.labels.size() * 8, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(gathered.data(), d_gfeat.data(), gathered.size(), cudaMemcpyDeviceToHost));
  test::check_invariants(labels, rows, n, p, r);  // the counts of balanced_counts, distinct eligible picks

  // Same counts as the host baseline; other bits are allowed.
  test::result cpu = test::make_result(rows, p.k);
  bench::naive_sample_cpu(test::args_over(rows, n, labels.data(), cpu.indices.data(), cpu.valid.data(), cpu.labels.data()), p);
  CHECK(cpu.valid == r.valid);
  test::check_gathered_features(r, rows, n, p.k, features, gathered, fb);
}
