#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/random.hpp"
#include "sampler_support.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;
using pinfeed::test::check_invariants;
using pinfeed::test::random_labels;
using pinfeed::test::result;

namespace {

/// The contract written as directly as possible (slow): the oracle for the fast implementation.
std::vector<std::int64_t> oracle_row(const std::vector<std::int64_t>& labels, std::uint64_t row, const sampler_params& p,
                                     std::int32_t* valid_out) {
  std::vector<std::uint64_t> pos, neg;
  const philox_stream sel(p.seed, p.offset, row, 0), ord(p.seed, p.offset, row, 1);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::uint64_t composite = (static_cast<std::uint64_t>(sel.word_at(i)) << 32) | i;
    if (labels[i] == p.negative_label) neg.push_back(composite);
    else if (labels[i] != p.ignore_label) pos.push_back(composite);
  }
  std::sort(pos.begin(), pos.end());
  std::sort(neg.begin(), neg.end());
  const auto cc = balanced_counts(static_cast<std::int64_t>(pos.size()), static_cast<std::int64_t>(neg.size()), p.k,
                                  positive_target(p), p.mode);
  std::vector<std::uint64_t> taken;
  for (std::int64_t j = 0; j < cc.num_pos; ++j) taken.push_back(pos[j] & 0xFFFFFFFFu);
  for (std::int64_t j = 0; j < cc.num_neg; ++j) taken.push_back(neg[j] & 0xFFFFFFFFu);
  for (auto& t : taken) t |= static_cast<std::uint64_t>(ord.word_at(t)) << 32;
  std::sort(taken.begin(), taken.end());
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.k), -1);
  for (std::size_t j = 0; j < taken.size(); ++j) out[j] = static_cast<std::int64_t>(taken[j] & 0xFFFFFFFFu);
  *valid_out = static_cast<std::int32_t>(taken.size());
  return out;
}

result run_cpu(const std::vector<std::int64_t>& labels, std::int64_t rows, std::int64_t n, const sampler_params& p) {
  result r = test::make_result(rows, p.k);
  balanced_sample_host(test::args_over(rows, n, labels.data(), r.indices.data(), r.valid.data(), r.labels.data()), p);
  return r;
}

/// Row `row` of the result equals the contract oracle's; returns that row's labels.
std::vector<std::int64_t> check_row_against_oracle(const std::vector<std::int64_t>& labels, std::int64_t n,
                                                   const sampler_params& p, const result& r, std::int64_t row) {
  std::vector<std::int64_t> rl(labels.begin() + row * n, labels.begin() + (row + 1) * n);
  std::int32_t valid = 0;
  const auto expect = oracle_row(rl, static_cast<std::uint64_t>(row), p, &valid);
  REQUIRE(valid == r.valid[row]);
  REQUIRE(std::equal(expect.begin(), expect.end(), r.indices.begin() + row * p.k));
  return rl;
}

/// sampler.same_bits_on_every_architecture: recorded on x86-64 (AMD EPYC, g++ 12), every SIMD level.
constexpr std::uint64_t kSamplerFingerprint = 0xd26e9b87925c4fcaull;

}  // namespace

TEST_CASE("sampler.counts.topup_rule") {
  // target = 5 of k = 10.
  CHECK(balanced_counts(20, 30, 10, 5, sampler_mode::topup).num_pos == 5);
  CHECK(balanced_counts(2, 30, 10, 5, sampler_mode::topup).num_neg == 8);   // positives short: negatives top up
  CHECK(balanced_counts(20, 3, 10, 5, sampler_mode::topup).num_pos == 7);   // negatives short: positives top up
  CHECK(balanced_counts(20, 3, 10, 5, sampler_mode::detectron2).num_pos == 5);  // detectron2: no top-up
  CHECK(balanced_counts(20, 3, 10, 5, sampler_mode::detectron2).num_neg == 3);
  const auto few = balanced_counts(2, 3, 10, 5, sampler_mode::topup);      // P + Nn < k
  CHECK(few.num_pos == 2);
  CHECK(few.num_neg == 3);
  CHECK(balanced_counts(0, 0, 10, 5, sampler_mode::topup).num_pos == 0);
  CHECK(balanced_counts(5, 5, 0, 0, sampler_mode::topup).num_neg == 0);   // k = 0
}

TEST_CASE("sampler.cpu_matches_contract_oracle") {
  const test::sampler_config configs[] = {
      {1, 1, 1, 0.5, sampler_mode::topup, 50, 0},          // N = 1
      {3, 10, 4, 0.5, sampler_mode::topup, 30, 20},
      {7, 1000, 100, 0.25, sampler_mode::topup, 10, 5},    // positives short -> top-up
      {5, 1000, 100, 0.5, sampler_mode::detectron2, 3, 5},  // detectron2: fewer than k
      {4, 5000, 2000, 0.5, sampler_mode::topup, 50, 50},   // P + Nn < k in some rows
      {2, 37, 50, 0.5, sampler_mode::topup, 40, 10},       // k > n
      {2, 20000, 2000, 0.5, sampler_mode::topup, 50, 0},   // the article's shape (large enough for radix sort)
      {1000, 16, 4, 0.5, sampler_mode::topup, 50, 10},     // B = 1000
      {1, 100000, 40000, 0.5, sampler_mode::topup, 50, 10},  // > 2^15 picks: the order sort's wider digits
      {2, 5000, 6000, 0.5, sampler_mode::topup, 100, 0},   // every item of every 64-item block taken
  };
  for (const auto level : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
  if (level > cpu_simd_support()) continue;
  set_simd_level(level);
  CAPTURE(to_string(level));
  for (const auto& c : configs) {
    CAPTURE(c.rows);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const sampler_params p = c.params(1234, 7);
    const auto labels = c.labels(static_cast<std::uint64_t>(c.n * 31 + c.k));
    const auto r = run_cpu(labels, c.rows, c.n, p);
    check_invariants(labels, c.rows, c.n, p, r);
    for (std::int64_t row = 0; row < c.rows; ++row) (void)check_row_against_oracle(labels, c.n, p, r, row);
  }
  }
  set_simd_level(cpu_simd_support());
}

TEST_CASE("sampler.corners") {
  sampler_params p;
  p.k = 6;
  SUBCASE("all positive") {
    const std::vector<std::int64_t> labels(10, 1);
    const auto r = run_cpu(labels, 1, 10, p);
    check_invariants(labels, 1, 10, p, r);
    CHECK(r.valid[0] == 6);  // topped up with positives
  }
  SUBCASE("all negative") {
    const std::vector<std::int64_t> labels(10, 0);
    const auto r = run_cpu(labels, 1, 10, p);
    check_invariants(labels, 1, 10, p, r);
    CHECK(r.valid[0] == 6);
  }
  SUBCASE("all ignored") {
    const std::vector<std::int64_t> labels(10, -1);
    const auto r = run_cpu(labels, 1, 10, p);
    CHECK(r.valid[0] == 0);
    CHECK(std::all_of(r.indices.begin(), r.indices.end(), [](auto x) { return x == -1; }));
  }
  SUBCASE("k = 0") {
    p.k = 0;
    const std::vector<std::int64_t> labels(10, 1);
    const auto r = run_cpu(labels, 2, 5, p);
    CHECK(r.valid == std::vector<std::int32_t>{0, 0});
  }
  SUBCASE("n = 0") {
    const auto r = run_cpu({}, 3, 0, p);
    CHECK(r.valid == std::vector<std::int32_t>{0, 0, 0});
    CHECK(std::all_of(r.indices.begin(), r.indices.end(), [](auto x) { return x == -1; }));
  }
  SUBCASE("n = 0 with features: an empty (null) feature array, every gathered row padding") {
    std::vector<std::int64_t> idx(3 * 6, 5);
    std::vector<std::int32_t> valid(3, 9);
    std::vector<std::byte> gathered(3 * 6 * 64, std::byte{0xEE});
    sampler_args a;
    a.rows = 3;
    a.n = 0;
    a.indices = idx.data();
    a.valid = valid.data();
    a.feature_bytes = 64;
    a.gathered_features = gathered.data();  // features stays null: nothing to read
    balanced_sample_host(a, p);
    CHECK(valid == std::vector<std::int32_t>{0, 0, 0});
    CHECK(std::all_of(idx.begin(), idx.end(), [](auto x) { return x == -1; }));
    CHECK(std::all_of(gathered.begin(), gathered.end(), [](std::byte b) { return b == std::byte{0}; }));
    a.n = 4;  // with items to gather from, null features are an error
    const std::vector<std::int64_t> labels(3 * 4, 1);
    a.labels = labels.data();
    CHECK_THROWS_WITH_AS(balanced_sample_host(a, p), doctest::Contains("gathered_features given without features"),
                         std::invalid_argument);
  }
  SUBCASE("custom labels: negative 7, ignore 9, fraction 1") {
    p.negative_label = 7;
    p.ignore_label = 9;
    p.positive_fraction = 1.0;
    const std::vector<std::int64_t> labels{7, 9, 0, 7, 9, -1, 3, 7};
    const auto r = run_cpu(labels, 1, 8, p);
    check_invariants(labels, 1, 8, p, r);
    CHECK(r.valid[0] == 6);  // 3 positives (0, -1, 3) + 3 negatives top up
  }
}

TEST_CASE("sampler.int32_labels_and_indices_and_feature_gather") {
  const std::int64_t rows = 3, n = 500, d = 5;
  sampler_params p;
  p.k = 40;
  p.seed = 3;
  const auto labels64 = random_labels(rows * n, 5, 30, 10);
  std::vector<std::int32_t> labels32(labels64.begin(), labels64.end());
  std::vector<float> features(static_cast<std::size_t>(rows * n * d));
  std::iota(features.begin(), features.end(), 0.0f);
  std::vector<std::int32_t> idx32(rows * p.k), valid(rows), glab(rows * p.k);
  std::vector<float> gfeat(static_cast<std::size_t>(rows * p.k * d), -1.0f);
  sampler_args a;
  a.rows = rows;
  a.n = n;
  a.labels = labels32.data();
  a.label_type = dtype::i32;
  a.indices = idx32.data();
  a.index_type = dtype::i32;
  a.valid = valid.data();
  a.features = features.data();
  a.feature_bytes = d * sizeof(float);
  a.gathered_features = gfeat.data();
  a.gathered_labels = glab.data();
  balanced_sample_host(a, p);
  const auto r64 = run_cpu(labels64, rows, n, p);
  for (std::int64_t j = 0; j < rows * p.k; ++j) {
    REQUIRE(idx32[j] == r64.indices[j]);  // the label and index types do not change the draw
    REQUIRE(glab[j] == r64.labels[j]);
    const auto row = j / p.k;
    for (std::int64_t q = 0; q < d; ++q) {
      const float expect = idx32[j] >= 0 ? features[(row * n + idx32[j]) * d + q] : 0.0f;
      REQUIRE(gfeat[j * d + q] == expect);
    }
  }
}

TEST_CASE("sampler.determinism_seed_offset_and_rows") {
  sampler_params p;
  p.k = 50;
  p.seed = 11;
  const auto labels = random_labels(4 * 1000, 8, 50, 0);
  const auto a = run_cpu(labels, 4, 1000, p);
  const auto b = run_cpu(labels, 4, 1000, p);
  CHECK(a.indices == b.indices);
  p.offset = 1;
  const auto c = run_cpu(labels, 4, 1000, p);
  CHECK(a.indices != c.indices);
  p.offset = 0;
  p.seed = 12;
  CHECK(run_cpu(labels, 4, 1000, p).indices != a.indices);
  // Row r of a batch equals row r sampled alone only through its row index: the first row of a
  // batch equals a single-row call on the same labels.
  p.seed = 11;
  const std::vector<std::int64_t> first(labels.begin(), labels.begin() + 1000);
  const auto single = run_cpu(first, 1, 1000, p);
  CHECK(std::equal(single.indices.begin(), single.indices.end(), a.indices.begin()));
}

namespace {
/// Chi-square statistic of observed counts against equal expectations.
double chi_square(const std::vector<double>& observed, double expected) {
  double chi2 = 0;
  for (double o : observed) chi2 += (o - expected) * (o - expected) / expected;
  return chi2;
}
}  // namespace

TEST_CASE("sampler.statistics.uniform_selection_frequency") {
  // One row pattern repeated over 4000 rows (each row its own random stream): 20 positives,
  // 30 negatives, 10 ignored; k = 10 -> 5 + 5. Each positive is picked with probability 5/20 and
  // each negative 5/30. Fixed seed, so the test is deterministic; critical values at alpha = 0.001.
  const std::int64_t rows = 4000, n = 60;
  std::vector<std::int64_t> pattern(n);
  for (std::int64_t i = 0; i < n; ++i) pattern[i] = i % 6 == 5 ? -1 : (i % 2 == 0 ? 0 : 1);
  // i%6 in {1,3} -> positive (20), {0,2,4} -> negative (30), 5 -> ignored (10).
  std::vector<std::int64_t> labels;
  for (std::int64_t r = 0; r < rows; ++r) labels.insert(labels.end(), pattern.begin(), pattern.end());
  sampler_params p;
  p.k = 10;
  p.seed = 99;
  const auto r = run_cpu(labels, rows, n, p);
  std::vector<double> pos_freq, neg_freq;
  std::vector<double> count(n, 0.0);
  for (auto idx : r.indices) count[idx] += 1;
  for (std::int64_t i = 0; i < n; ++i) {
    if (pattern[i] == 1) pos_freq.push_back(count[i]);
    else if (pattern[i] == 0) neg_freq.push_back(count[i]);
    else REQUIRE(count[i] == 0);
  }
  REQUIRE(pos_freq.size() == 20);
  REQUIRE(neg_freq.size() == 30);
  CHECK(chi_square(pos_freq, rows * 5.0 / 20) < 43.82);  // 19 dof
  CHECK(chi_square(neg_freq, rows * 5.0 / 30) < 58.30);  // 29 dof
}

namespace {
/// Class frequency at each output position: positives at position j over all rows, compared with
/// the expected num_pos / k by a chi-square over the k positions (k dof).
double position_bias(const std::vector<std::int64_t>& indices, const std::vector<std::int64_t>& pattern,
                     std::int64_t rows, std::int64_t k, double expected_pos_fraction) {
  std::vector<double> pos_at(k, 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < k; ++j) pos_at[j] += pattern[indices[r * k + j]] == 1;
  double chi2 = 0;
  const double e = rows * expected_pos_fraction, var = rows * expected_pos_fraction * (1 - expected_pos_fraction);
  for (double o : pos_at) chi2 += (o - e) * (o - e) / var;
  return chi2;
}
}  // namespace

TEST_CASE("sampler.statistics.position_class_frequency_and_the_articles_bias") {
  const std::int64_t rows = 4000, n = 60, k = 10;
  std::vector<std::int64_t> pattern(n);
  for (std::int64_t i = 0; i < n; ++i) pattern[i] = i % 6 == 5 ? -1 : (i % 2 == 0 ? 0 : 1);
  std::vector<std::int64_t> labels;
  for (std::int64_t r = 0; r < rows; ++r) labels.insert(labels.end(), pattern.begin(), pattern.end());
  sampler_params p;
  p.k = k;
  p.seed = 2025;
  const auto r = run_cpu(labels, rows, n, p);
  constexpr double kCritical = 29.59;  // chi-square, 10 dof, alpha = 0.001
  CHECK(position_bias(r.indices, pattern, rows, k, 0.5) < kCritical);

  // The article's static version orders the picks by the keys it selected them with. With 20
  // positives and 30 negatives the 5 picked negatives have smaller keys than the 5 picked positives
  // on average, so negatives crowd the front: the same test must reject that order.
  std::vector<std::int64_t> article(r.indices.size());
  for (std::int64_t row = 0; row < rows; ++row) {
    const philox_stream sel(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
    std::vector<std::pair<std::uint64_t, std::int64_t>> by_key;
    for (std::int64_t j = 0; j < k; ++j) {
      const auto idx = r.indices[row * k + j];
      by_key.push_back({(static_cast<std::uint64_t>(sel.word_at(idx)) << 32) | idx, idx});
    }
    std::sort(by_key.begin(), by_key.end());
    for (std::int64_t j = 0; j < k; ++j) article[row * k + j] = by_key[j].second;
  }
  CHECK(position_bias(article, pattern, rows, k, 0.5) > kCritical);
}

TEST_CASE("sampler.bad_input") {
  std::vector<std::int64_t> labels(10, 1), out(10);
  sampler_args a;
  a.n = 10;
  a.labels = labels.data();
  a.indices = out.data();
  sampler_params p;
  p.k = 4;
  auto expect = [&](const sampler_args& args, const sampler_params& params, const char* needle) {
    CAPTURE(needle);
    std::fill(out.begin(), out.end(), 42);
    CHECK_THROWS_WITH_AS(balanced_sample_host(args, params), doctest::Contains(needle), std::invalid_argument);
    CHECK(std::all_of(out.begin(), out.end(), [](auto x) { return x == 42; }));  // nothing written
  };
  auto q = p;
  q.k = -3;
  expect(a, q, "k must be >= 0, got -3");
  q = p;
  q.positive_fraction = 1.5;
  expect(a, q, "positive_fraction must be in [0, 1], got 1.5");
  q.positive_fraction = -0.1;
  expect(a, q, "positive_fraction");
  q = p;
  q.ignore_label = 0;
  expect(a, q, "negative_label and ignore_label are both 0");
  auto b = a;
  b.labels = nullptr;
  expect(b, p, "labels is a null pointer");
  b = a;
  b.indices = nullptr;
  expect(b, p, "indices is a null pointer");
  b = a;
  b.label_type = dtype::f32;
  expect(b, p, "labels must be int32 or int64, got float32");
  b = a;
  b.index_type = dtype::u8;
  expect(b, p, "indices must be int32 or int64, got uint8");
  b = a;
  b.n = -1;
  expect(b, p, "n must be >= 0, got -1");
  b = a;
  b.n = std::int64_t{1} << 33;
  expect(b, p, "below 2^32");
  b = a;
  b.features = labels.data();
  b.feature_bytes = 8;
  expect(b, p, "gathered_features is a null pointer");
  b.feature_bytes = 0;
  expect(b, p, "feature_bytes = 0");
  b = a;
  b.label_type = dtype::i32;
  q = p;
  q.negative_label = std::int64_t{1} << 40;
  expect(b, q, "do not fit int32");
}

TEST_CASE("sampler.tie_at_threshold_lowest_index_wins") {
  test::tie_case t;
  REQUIRE(test::find_tie(77, 1 << 18, t));  // about 8 tied pairs are expected among 2^18 keys
  sampler_params p;
  p.seed = 77;
  p.positive_fraction = 1.0;
  p.k = t.k;
  const std::vector<std::int64_t> labels(static_cast<std::size_t>(t.n), 1);
  const auto r = run_cpu(labels, 1, t.n, p);
  CHECK(r.valid[0] == p.k);
  CHECK(std::count(r.indices.begin(), r.indices.end(), static_cast<std::int64_t>(t.lower)) == 1);
  CHECK(std::count(r.indices.begin(), r.indices.end(), static_cast<std::int64_t>(t.upper)) == 0);
}

TEST_CASE("sampler.tie_at_threshold_both_classes_several_rows") {
  // Every row has a tied pair at the positives' threshold and another at the negatives'.
  constexpr std::int64_t rows = 4, n = 1 << 19, want = 50;
  test::tied_rows t;
  REQUIRE(test::make_tied_rows(31, rows, n, want, t));  // about 32 tied pairs are expected per row
  sampler_params p;
  p.seed = 31;
  p.k = 2 * want;
  const auto r = run_cpu(t.labels, rows, n, p);
  for (std::int64_t row = 0; row < rows; ++row) {
    CAPTURE(row);
    CHECK(r.valid[row] == p.k);
    const auto first = r.indices.begin() + row * p.k, last = first + p.k;
    for (int c = 0; c < 2; ++c) {
      CHECK(std::count(first, last, static_cast<std::int64_t>(t.taken[row * 2 + c])) == 1);
      CHECK(std::count(first, last, static_cast<std::int64_t>(t.left[row * 2 + c])) == 0);
    }
  }
}

TEST_CASE("sampler.gpu_limits_are_checked_before_any_cuda_call") {
  // These throw on a machine without a GPU too: the checks come before the first CUDA call.
  sampler_args a;
  sampler_params p;
  p.k = 10;
  std::size_t bytes = 0;
  a.n = 100;
  a.rows = 70000;
  CHECK_THROWS_WITH_AS(balanced_sample_device(nullptr, bytes, a, p, nullptr), doctest::Contains("65535"),
                       std::invalid_argument);
  a.rows = 300000;
  p.k = 10000;
  CHECK_THROWS_WITH_AS(balanced_sample_device(nullptr, bytes, a, p, nullptr), doctest::Contains("2^31 - 1"),
                       std::invalid_argument);
  // A k whose product with rows wraps around int64 is refused by itself.
  a.rows = 4;
  p.k = std::int64_t{1} << 62;
  CHECK_THROWS_WITH_AS(balanced_sample_device(nullptr, bytes, a, p, nullptr),
                       doctest::Contains("k = 4611686018427387904 exceeds 2^31 - 1"), std::invalid_argument);
}

TEST_CASE("sampler.exact_when_the_strided_count_guess_is_wrong") {
  // The fast path guesses class counts from every (n / 2048)-th label. Labels periodic with that
  // stride fool the guess completely; the result must still be the contract's, at every SIMD level.
  const std::int64_t n = 8192;  // stride 4
  std::vector<std::int64_t> fooled(n), skewed(n);
  for (std::int64_t i = 0; i < n; ++i) {
    fooled[i] = i % 4 == 0 ? 1 : 0;             // the sample sees only positives
    skewed[i] = i % 4 == 0 ? 0 : (i % 4 == 1 ? -1 : 1);  // the sample sees only negatives
  }
  for (const auto level : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    if (level > cpu_simd_support()) continue;
    set_simd_level(level);
    for (const auto* labels : {&fooled, &skewed}) {
      for (double fraction : {0.5, 0.9, 0.1}) {
        sampler_params p;
        p.k = 3000;
        p.positive_fraction = fraction;
        p.seed = 31;
        const auto r = run_cpu(*labels, 1, n, p);
        std::int32_t valid = 0;
        const auto expect = oracle_row(*labels, 0, p, &valid);
        CHECK(r.valid[0] == valid);
        CHECK(std::equal(expect.begin(), expect.end(), r.indices.begin()));
      }
    }
  }
  set_simd_level(cpu_simd_support());
}

TEST_CASE("sampler.order_ties_fall_to_the_lower_index") {
  // With k = 2e5 picks per row, about k^2 / 2^33 = 4.7 pairs share an order key: the output must
  // put the lower index first, as the oracle does. The case is only meaningful if ties occur, so
  // the test counts them.
  const test::sampler_config c{6, 400000, 200000, 0.5, sampler_mode::topup, 50, 0};
  const sampler_params p = c.params(99, 3);
  const auto labels = c.labels(17);
  std::size_t ties = 0, cross = 0;
  for (const auto level : {simd_level::scalar, simd_level::avx512}) {
    if (level > cpu_simd_support()) continue;
    set_simd_level(level);
    CAPTURE(to_string(level));
    const auto r = run_cpu(labels, c.rows, c.n, p);
    for (std::int64_t row = 0; row < c.rows; ++row) {
      const auto rl = check_row_against_oracle(labels, c.n, p, r, row);
      const std::int32_t valid = r.valid[row];
      const philox_stream ord(p.seed, p.offset, static_cast<std::uint64_t>(row), 1);
      for (std::int64_t j = 1; j < valid; ++j) {
        const auto a = r.indices[row * c.k + j - 1], b = r.indices[row * c.k + j];
        if (ord.word_at(static_cast<std::uint64_t>(a)) == ord.word_at(static_cast<std::uint64_t>(b))) {
          ++ties;
          CHECK(a < b);
          // A negative before a positive of higher index: the pairing the CPU sampler's own order
          // (positives first, then negatives) gets wrong unless it re-sorts ties by index.
          const bool a_neg = rl[static_cast<std::size_t>(a)] == 0, b_neg = rl[static_cast<std::size_t>(b)] == 0;
          cross += a_neg && !b_neg;
        }
      }
    }
  }
  set_simd_level(cpu_simd_support());
  CHECK(ties > 0);
  CHECK(cross > 0);
  MESSAGE("order-key ties checked: " << ties << ", of them a negative before a positive: " << cross);
}

TEST_CASE("sampler.same_bits_on_every_architecture") {
  // A fingerprint of the reference's output for fixed inputs, recorded on x86-64: the aarch64
  // build (scripts/cross-aarch64.sh) and every SIMD level must give the same picks and order.
  const std::int64_t rows = 4, n = 50000;
  sampler_params p = test::sampler_config{rows, n, 3000, 0.25, sampler_mode::topup, 30, 10}.params(20261201, 7);
  const auto labels = test::random_labels(rows * n, 77, 30, 10);
  auto fingerprint = [](const result& r) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over indices and valid counts
    auto mix = [&h](std::uint64_t v) {
      for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    };
    for (auto i : r.indices) mix(static_cast<std::uint64_t>(i));
    for (auto v : r.valid) mix(static_cast<std::uint64_t>(v));
    return h;
  };
  const simd_level before = simd_level_in_use();
  for (const auto level : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    set_simd_level(level);  // clamped to what the CPU has (scalar on aarch64)
    CAPTURE(to_string(simd_level_in_use()));
    CHECK(fingerprint(run_cpu(labels, rows, n, p)) == kSamplerFingerprint);
  }
  set_simd_level(before);
}

TEST_CASE("sampler.status_words_decode_into_a_typed_fault") {
  // The layout the GPU kernels write: bit 63, kind in 62..60, class + 1 in 59..58, row in 57..32,
  // a count or slot in 31..0.
  const auto word = [](sampler_fault_kind kind, std::uint64_t row, int c, std::uint32_t value) {
    return (1ull << 63) | (static_cast<std::uint64_t>(kind) << 60) | (static_cast<std::uint64_t>(c + 1) << 58) |
           (row << 32) | value;
  };
  CHECK_NOTHROW(check_sampler_status(0));
  struct expect {
    sampler_fault_kind kind;
    std::uint64_t row;
    int c;
    std::uint32_t value;
    const char* says;
  };
  for (const expect e : {expect{sampler_fault_kind::histogram_short, 3, 0, 17, "row 3 (positives) inconsistent: its key histogram holds only 17 items"},
                         expect{sampler_fault_kind::candidate_overflow, 65534, 1, 9000, "row 65534 (negatives) inconsistent: more candidates than counted (slot 9000)"},
                         expect{sampler_fault_kind::selection_overflow, 0, -1, 12, "row 0 inconsistent: more items selected than k (slot 12)"},
                         expect{sampler_fault_kind::ties_short, 7, 1, 2, "only 2 items tie at the threshold"},
                         expect{sampler_fault_kind::bad_index, 1, -1, 44, "output slot 44 was never filled"}}) {
    const std::uint64_t w = word(e.kind, e.row, e.c, e.value);
    CAPTURE(w);
    try {
      check_sampler_status(w);
      FAIL("a nonzero status must throw");
    } catch (const sampler_fault& f) {
      CHECK(f.status() == w);
      CHECK(f.kind() == e.kind);
      CHECK(f.row() == static_cast<std::int64_t>(e.row));
      CHECK(f.label_class() == e.c);
      CHECK(f.value() == e.value);
      CHECK(std::string(f.what()).find(e.says) != std::string::npos);
      CHECK(std::string(f.what()).find("the call found") != std::string::npos);
    }
    CHECK_THROWS_AS(check_sampler_status(w), pinfeed::error);
    CHECK_THROWS_AS(check_sampler_status(w), std::runtime_error);
  }
  CHECK(std::string(sampler_fault(word(sampler_fault_kind::ties_short, 2, 0, 1), true).what()).find("an earlier call") !=
        std::string::npos);
}

TEST_CASE("sampler.host_sets_a_given_status_to_zero_and_refuses_a_misaligned_one") {
  const std::int64_t n = 64;
  const auto labels = random_labels(n, 5, 20, 0);
  std::vector<std::int64_t> idx(8);
  sampler_params p;
  p.k = 8;
  sampler_args a;
  a.rows = 1;
  a.n = n;
  a.labels = labels.data();
  a.indices = idx.data();
  alignas(8) std::uint64_t words[2] = {~0ull, ~0ull};
  a.status = &words[0];
  balanced_sample_host(a, p);
  CHECK(words[0] == 0);
  a.status = reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::byte*>(&words[0]) + 4);
  CHECK_THROWS_WITH_AS(balanced_sample_host(a, p), doctest::Contains("status is not aligned to 8 bytes"),
                       std::invalid_argument);
}
