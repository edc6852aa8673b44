// GPU cases of the balanced sampler: bit-identical to the CPU reference, the tie and candidate-
// overflow paths, graph capture, no host synchronisation, the naive baseline, bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/stats.hpp"
#include "sampler_support.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

namespace {

struct outputs {
  std::vector<std::int64_t> indices;
  std::vector<std::int32_t> valid;
  std::vector<std::int64_t> labels;
  std::vector<float> features;
};

/// Runs the sampler (GPU or CPU) on int64 labels with int64 indices, gathered labels and D floats.
outputs run(bool gpu, const std::vector<std::int64_t>& labels, std::int64_t rows, std::int64_t n,
            const sampler_params& p, std::int64_t d, bool naive = false, cudaStream_t stream = nullptr) {
  std::vector<float> features(static_cast<std::size_t>(rows * n * d));
  for (std::size_t i = 0; i < features.size(); ++i) features[i] = static_cast<float>(i % 9973) * 0.5f;
  outputs o{std::vector<std::int64_t>(rows * p.k), std::vector<std::int32_t>(rows), std::vector<std::int64_t>(rows * p.k),
            std::vector<float>(static_cast<std::size_t>(rows * p.k * d))};
  sampler_args a;
  a.rows = rows;
  a.n = n;
  a.feature_bytes = static_cast<std::size_t>(d) * sizeof(float);
  if (!gpu) {
    a.labels = labels.data();
    a.indices = o.indices.data();
    a.valid = o.valid.data();
    a.gathered_labels = o.labels.data();
    if (d) {
      a.features = features.data();
      a.gathered_features = o.features.data();
    }
    naive ? naive_sample_cpu(a, p) : balanced_sample_cpu(a, p);
    return o;
  }
  auto bytes = [](const auto& v) { return std::max<std::size_t>(v.size() * sizeof(v[0]), 1); };
  device_buffer d_labels(bytes(labels)), d_idx(bytes(o.indices)), d_valid(bytes(o.valid)), d_glab(bytes(o.labels)),
      d_feat(bytes(features)), d_gfeat(bytes(o.features));
  PINFEED_CUDA_TRY(cudaMemcpy(d_labels.data(), labels.data(), labels.size() * 8, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemcpy(d_feat.data(), features.data(), features.size() * 4, cudaMemcpyHostToDevice));
  a.labels = d_labels.data();
  a.indices = d_idx.data();
  a.valid = reinterpret_cast<std::int32_t*>(d_valid.data());
  a.gathered_labels = d_glab.data();
  if (d) {
    a.features = d_feat.data();
    a.gathered_features = d_gfeat.data();
  }
  std::size_t temp_bytes = 0;
  naive ? naive_sample_gpu(nullptr, temp_bytes, a, p, stream) : balanced_sample_gpu(nullptr, temp_bytes, a, p, stream);
  device_buffer temp(temp_bytes);
  naive ? naive_sample_gpu(temp.data(), temp_bytes, a, p, stream)
        : balanced_sample_gpu(temp.data(), temp_bytes, a, p, stream);
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));
  PINFEED_CUDA_TRY(cudaMemcpy(o.indices.data(), d_idx.data(), o.indices.size() * 8, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(o.valid.data(), d_valid.data(), o.valid.size() * 4, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(o.labels.data(), d_glab.data(), o.labels.size() * 8, cudaMemcpyDeviceToHost));
  PINFEED_CUDA_TRY(cudaMemcpy(o.features.data(), d_gfeat.data(), o.features.size() * 4, cudaMemcpyDeviceToHost));
  return o;
}

void check_equal(const outputs& cpu, const outputs& gpu) {
  CHECK(cpu.valid == gpu.valid);
  CHECK(cpu.indices == gpu.indices);
  CHECK(cpu.labels == gpu.labels);
  CHECK(std::memcmp(cpu.features.data(), gpu.features.data(), cpu.features.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("gpu.sampler.bit_identical_to_cpu" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler CPU == GPU")) return;
  const test::sampler_config configs[] = {
      {1, 1, 1, 0.5, sampler_mode::topup, 50, 0},       {3, 10, 4, 0.5, sampler_mode::topup, 30, 20},
      {7, 1000, 100, 0.25, sampler_mode::topup, 10, 5}, {5, 1000, 100, 0.5, sampler_mode::detectron2, 3, 5},
      {4, 5000, 2000, 0.5, sampler_mode::topup, 50, 50}, {2, 37, 50, 0.5, sampler_mode::topup, 40, 10},
      {1000, 16, 4, 0.5, sampler_mode::topup, 50, 10},  {32, 100000, 10000, 0.5, sampler_mode::topup, 50, 0},
      {1, 1000000, 100000, 0.5, sampler_mode::topup, 50, 0}, {3, 0, 5, 0.5, sampler_mode::topup, 50, 0},
      {4, 100, 0, 0.5, sampler_mode::topup, 50, 0},     {2, 400000, 200000, 0.5, sampler_mode::topup, 50, 0},  // order-key ties
  };
  for (const auto& c : configs) {
    CAPTURE(c.rows);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const sampler_params p = c.params(4242, 3);
    const auto labels = c.labels(static_cast<std::uint64_t>(c.n + c.k));
    const std::int64_t d = c.n * c.rows <= 200000 ? 16 : 0;
    check_equal(run(false, labels, c.rows, c.n, p, d), run(true, labels, c.rows, c.n, p, d));
  }
}

TEST_CASE("gpu.sampler.tie_at_threshold" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler tie path")) return;
  test::tie_case t;
  REQUIRE(test::find_tie(77, 1 << 18, t));
  sampler_params p;
  p.seed = 77;
  p.positive_fraction = 1.0;
  p.k = t.k;
  const std::vector<std::int64_t> labels(static_cast<std::size_t>(t.n), 1);
  check_equal(run(false, labels, 1, t.n, p, 0), run(true, labels, 1, t.n, p, 0));
}

TEST_CASE("gpu.sampler.candidates_overflow_the_buffer" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler candidate overflow path")) return;
  // 2^25 positives put about 16K keys in the first bucket, more than the 8192 kept: later passes
  // read the labels again.
  const std::int64_t n = std::int64_t{1} << 25;
  sampler_params p;
  p.k = 1000;
  p.positive_fraction = 1.0;
  p.seed = 5;
  const std::vector<std::int64_t> labels(static_cast<std::size_t>(n), 1);
  check_equal(run(false, labels, 1, n, p, 0), run(true, labels, 1, n, p, 0));
}

TEST_CASE("gpu.sampler.graph_capture_and_replay" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler graph capture")) return;
  const std::int64_t rows = 8, n = 20000;
  sampler_params p;
  p.k = 500;
  p.seed = 9;
  auto labels = test::random_labels(rows * n, 1, 40, 10);
  device_buffer d_labels(labels.size() * 8), d_idx(rows * p.k * 8), d_valid(rows * 4);
  sampler_args a;
  a.rows = rows;
  a.n = n;
  a.labels = d_labels.data();
  a.indices = d_idx.data();
  a.valid = reinterpret_cast<std::int32_t*>(d_valid.data());
  cudaStream_t s;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::size_t temp_bytes = 0;
  balanced_sample_gpu(nullptr, temp_bytes, a, p, s);
  device_buffer temp(temp_bytes);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PINFEED_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  balanced_sample_gpu(temp.data(), temp_bytes, a, p, s);
  PINFEED_CUDA_TRY(cudaStreamEndCapture(s, &graph));
  PINFEED_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    // New labels in the same buffer: the replayed graph samples them.
    labels = test::random_labels(rows * n, 100 + replay, 40, 10);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(d_labels.data(), labels.data(), labels.size() * 8, cudaMemcpyHostToDevice, s));
    PINFEED_CUDA_TRY(cudaGraphLaunch(exec, s));
    std::vector<std::int64_t> got(rows * p.k);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), d_idx.data(), got.size() * 8, cudaMemcpyDeviceToHost, s));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(s));
    CHECK(got == run(false, labels, rows, n, p, 0).indices);
  }
  PINFEED_CUDA_TRY(cudaGraphExecDestroy(exec));
  PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
  PINFEED_CUDA_TRY(cudaStreamDestroy(s));
}


TEST_CASE("gpu.sampler.never_waits_for_the_device" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler host synchronisation")) return;
  const std::int64_t rows = 32, n = 100000;
  sampler_params p;
  p.k = 10000;
  const auto labels = test::random_labels(rows * n, 2, 50, 0);
  device_buffer d_labels(labels.size() * 8), d_idx(rows * p.k * 8);
  PINFEED_CUDA_TRY(cudaMemcpy(d_labels.data(), labels.data(), labels.size() * 8, cudaMemcpyHostToDevice));
  sampler_args a;
  a.rows = rows;
  a.n = n;
  a.labels = d_labels.data();
  a.indices = d_idx.data();
  cudaStream_t s;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::size_t temp_bytes = 0;
  balanced_sample_gpu(nullptr, temp_bytes, a, p, s);
  device_buffer temp(temp_bytes);
  cudaEvent_t done;
  PINFEED_CUDA_TRY(cudaEventCreate(&done));
  busy_kernel_ms(300.0, s);  // the stream is busy for 300 ms
  balanced_sample_gpu(temp.data(), temp_bytes, a, p, s);
  PINFEED_CUDA_TRY(cudaEventRecord(done, s));
  CHECK(cudaEventQuery(done) == cudaErrorNotReady);  // the call returned while the device was busy
  PINFEED_CUDA_TRY(cudaEventSynchronize(done));
  std::vector<std::int64_t> got(rows * p.k);
  PINFEED_CUDA_TRY(cudaMemcpy(got.data(), d_idx.data(), got.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(got == run(false, labels, rows, n, p, 0).indices);
  PINFEED_CUDA_TRY(cudaEventDestroy(done));
  PINFEED_CUDA_TRY(cudaStreamDestroy(s));
}

TEST_CASE("gpu.sampler.naive_baseline_counts" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("naive GPU sampler")) return;
  const std::int64_t rows = 3, n = 5000;
  sampler_params p;
  p.k = 300;
  p.seed = 8;
  const auto labels = test::random_labels(rows * n, 3, 4, 10);
  const auto gpu = run(true, labels, rows, n, p, 4, /*naive=*/true);
  const auto cpu = run(false, labels, rows, n, p, 4);
  CHECK(gpu.valid == cpu.valid);  // same counts, other picks
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int64_t> picked(gpu.indices.begin() + r * p.k, gpu.indices.begin() + r * p.k + gpu.valid[r]);
    std::sort(picked.begin(), picked.end());
    CHECK(std::adjacent_find(picked.begin(), picked.end()) == picked.end());
    for (auto idx : picked) CHECK(labels[r * n + idx] != -1);
  }
}

TEST_CASE("gpu.sampler.bad_input" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sampler bad input")) return;
  std::vector<std::int64_t> host_labels(100, 1), host_idx(10);
  sampler_args a;
  a.n = 100;
  a.labels = host_labels.data();  // pageable host memory
  a.indices = host_idx.data();
  sampler_params p;
  p.k = 10;
  std::size_t bytes = 0;
  balanced_sample_gpu(nullptr, bytes, a, p, nullptr);  // the query does not look at pointers
  device_buffer temp(bytes);
  CHECK_THROWS_WITH_AS(balanced_sample_gpu(temp.data(), bytes, a, p, nullptr), doctest::Contains("pageable"),
                       std::invalid_argument);
  device_buffer d_labels(800), d_idx(80);
  a.labels = d_labels.data();
  a.indices = d_idx.data();
  std::size_t small = bytes - 1;
  CHECK_THROWS_WITH_AS(balanced_sample_gpu(temp.data(), small, a, p, nullptr), doctest::Contains("smaller"),
                       std::invalid_argument);
  p.k = -1;
  CHECK_THROWS_AS(balanced_sample_gpu(temp.data(), bytes, a, p, nullptr), std::invalid_argument);
  p.k = 10;
  a.rows = 70000;
  CHECK_THROWS_WITH_AS(balanced_sample_gpu(nullptr, bytes, a, p, nullptr), doctest::Contains("65535"),
                       std::invalid_argument);
}
