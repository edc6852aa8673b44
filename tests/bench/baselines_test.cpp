// The sampler's benchmark baselines on the host: the naive loop keeps the sampler's counts and
// contract (distinct eligible picks, -1 padding, gathers) and refuses bad input before writing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "baselines.hpp"
#include "ops/sampler_support.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

TEST_CASE("baselines.naive_cpu_obeys_the_counts") {
  sampler_params p;
  p.k = 100;
  p.seed = 1;
  const std::int64_t rows = 3, n = 2000;
  const auto labels = test::random_labels(rows * n, 4, 5, 10);
  for (const auto mode : {sampler_mode::topup, sampler_mode::detectron2}) {
    CAPTURE(static_cast<int>(mode));
    p.mode = mode;
    test::result r = test::make_result(rows, p.k);
    const std::size_t fb = 12;
    std::vector<std::byte> features(rows * n * fb), gathered(rows * p.k * fb, std::byte{0xEE});
    for (std::size_t i = 0; i < features.size(); ++i) features[i] = static_cast<std::byte>(i * 7 % 253);
    sampler_args a = test::args_over(rows, n, labels.data(), r.indices.data(), r.valid.data(), r.labels.data());
    a.features = features.data();
    a.feature_bytes = fb;
    a.gathered_features = gathered.data();
    bench::naive_sample_cpu(a, p);
    test::check_invariants(labels, rows, n, p, r);
    test::check_gathered_features(r, rows, n, p.k, features, gathered, fb);
  }
}

TEST_CASE("baselines.naive_cpu_int32_and_short_rows") {
  // A row with fewer eligible items than k is padded; int32 labels and indices.
  const std::vector<std::int32_t> labels = {1, -1, 0, 0, -1, 1, -1, -1, -1, -1};
  std::vector<std::int32_t> idx(8, 42), glab(8, 42), valid(1, 42);
  sampler_args a = test::args_over(1, 10, labels.data(), idx.data(), valid.data(), glab.data());
  a.label_type = dtype::i32;
  a.index_type = dtype::i32;
  sampler_params p;
  p.k = 8;
  bench::naive_sample_cpu(a, p);
  CHECK(valid[0] == 4);
  std::vector<std::int32_t> picked(idx.begin(), idx.begin() + 4);
  std::sort(picked.begin(), picked.end());
  CHECK(picked == std::vector<std::int32_t>{0, 2, 3, 5});
  CHECK(std::all_of(idx.begin() + 4, idx.end(), [](auto x) { return x == -1; }));
  CHECK(std::all_of(glab.begin() + 4, glab.end(), [](auto x) { return x == -1; }));
}

TEST_CASE("baselines.naive_bad_input_is_refused_before_writing") {
  std::vector<std::int64_t> labels(10, 1), out(10, 42);
  sampler_args a;
  a.n = 10;
  a.labels = labels.data();
  a.indices = out.data();
  sampler_params p;
  p.k = -3;
  CHECK_THROWS_WITH_AS(bench::naive_sample_cpu(a, p), doctest::Contains("k must be >= 0, got -3"),
                       std::invalid_argument);
  p.k = 4;
  a.indices = nullptr;
  CHECK_THROWS_AS(bench::naive_sample_cpu(a, p), std::invalid_argument);
  CHECK(std::all_of(out.begin(), out.end(), [](auto x) { return x == 42; }));
}

TEST_CASE("baselines.naive_gpu_limits_are_checked_before_any_cuda_call") {
  sampler_args a;
  a.n = 3'000'000'000;
  sampler_params p;
  p.k = 10;
  CHECK_THROWS_WITH_AS(bench::validate_naive_gpu_shapes(a, p, false), doctest::Contains("2^31 - 1"),
                       std::invalid_argument);
  a.n = 100;
  a.rows = 70000;
  CHECK_THROWS_WITH_AS(bench::validate_naive_gpu_shapes(a, p, false), doctest::Contains("65535"),
                       std::invalid_argument);
}
