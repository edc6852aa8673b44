#pragma once
// Inputs shared by the sampler's CPU and GPU tests.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed::test {

/// Labels of `count` items: ign_pct percent ignored (-1), pos_pct percent positive (1..3), the
/// rest negative (0), drawn from a fixed stream.
inline std::vector<std::int64_t> random_labels(std::int64_t count, std::uint64_t seed, int pos_pct, int ign_pct) {
  philox_stream s(seed, 0, 0, 9);
  std::vector<std::int64_t> v(static_cast<std::size_t>(count));
  for (auto& x : v) {
    const auto u = s.below(100);
    const auto ign = static_cast<std::uint32_t>(ign_pct), pos = static_cast<std::uint32_t>(ign_pct + pos_pct);
    x = u < ign ? std::int64_t{-1} : u < pos ? static_cast<std::int64_t>(1 + u % 3) : std::int64_t{0};
  }
  return v;
}

/// One shape of the contract tests: rows x n labels with pos_pct positives and ign_pct ignored.
struct sampler_config {
  std::int64_t rows, n, k;
  double fraction;
  ops::sampler_mode mode;
  int pos_pct, ign_pct;

  [[nodiscard]] ops::sampler_params params(std::uint64_t seed, std::uint32_t offset) const {
    ops::sampler_params p;
    p.k = k;
    p.positive_fraction = fraction;
    p.mode = mode;
    p.seed = seed;
    p.offset = offset;
    return p;
  }
  [[nodiscard]] std::vector<std::int64_t> labels(std::uint64_t seed) const {
    return random_labels(rows * n, seed, pos_pct, ign_pct);
  }
};

/// A case where two items share the selection key that sits exactly at the threshold: every item of
/// a single row of n is positive, and k is chosen so that only one of the two tied items is needed.
/// The lower index must win. Returns false if the row has no tied pair.
struct tie_case {
  std::int64_t n = 0, k = 0;  // k: the items to take
  std::uint32_t lower = 0, upper = 0;  // the tied indices
};
inline bool find_tie(std::uint64_t seed, std::int64_t n, tie_case& out) {
  const philox_stream sel(seed, 0, 0, 0);
  std::vector<std::uint64_t> composite(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) composite[i] = (static_cast<std::uint64_t>(sel.word_at(i)) << 32) | static_cast<std::uint64_t>(i);
  std::sort(composite.begin(), composite.end());
  for (std::size_t j = 1; j < composite.size(); ++j) {
    if ((composite[j] >> 32) == (composite[j - 1] >> 32)) {
      out = {n, static_cast<std::int64_t>(j), static_cast<std::uint32_t>(composite[j - 1]),
             static_cast<std::uint32_t>(composite[j])};
      return true;  // j - 1 items have smaller keys: k = j takes them and exactly one of the pair
    }
  }
  return false;
}

}  // namespace pinfeed::test
