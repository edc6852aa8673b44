#pragma once
// Inputs shared by the sampler's CPU and GPU tests.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <doctest/doctest.h>

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

/// Labels for `rows` rows of n items where, in every row, both classes have a pair of items with
/// equal selection keys sitting exactly at that class's threshold (want items taken per class, so
/// k = 2 * want with positive_fraction 0.5): the lower index of each pair must be taken and the
/// upper one not. Items not needed for that are ignored (-1). Returns false if some row has fewer
/// than two usable tied pairs.
struct tied_rows {
  std::vector<std::int64_t> labels;
  std::vector<std::uint32_t> taken, left;  // per row and class (row * 2 + class): lower and upper index
};
inline bool make_tied_rows(std::uint64_t seed, std::int64_t rows, std::int64_t n, std::int64_t want, tied_rows& out) {
  out.labels.assign(static_cast<std::size_t>(rows * n), -1);
  out.taken.clear();
  out.left.clear();
  for (std::int64_t r = 0; r < rows; ++r) {
    const philox_stream sel(seed, 0, static_cast<std::uint64_t>(r), 0);
    std::vector<std::uint64_t> composite(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      composite[i] = (static_cast<std::uint64_t>(sel.word_at(static_cast<std::uint64_t>(i))) << 32) | static_cast<std::uint64_t>(i);
    std::sort(composite.begin(), composite.end());
    // Two tied pairs, each with at least 2 * want items of smaller key before it.
    std::vector<std::size_t> pairs;
    // Exactly two items share the key (no triple), and the pairs do not touch.
    auto key = [&](std::size_t j) { return composite[j] >> 32; };
    for (std::size_t j = static_cast<std::size_t>(2 * want) + 1; j + 1 < composite.size() && pairs.size() < 2; ++j)
      if (key(j) == key(j - 1) && key(j - 2) != key(j) && key(j + 1) != key(j) &&
          (pairs.empty() || j - 1 > pairs.back() + 2))
        pairs.push_back(j - 1);
    if (pairs.size() < 2) return false;
    std::int64_t* row = out.labels.data() + r * n;
    auto idx = [&](std::size_t j) { return static_cast<std::uint32_t>(composite[j]); };
    for (int c = 0; c < 2; ++c) {
      const std::int64_t label = c == 0 ? 1 : 0;
      const std::size_t at = pairs[c];
      // want - 1 items of this class below the pair, alternating classes so both draw from the same
      // key range: items j with j % 2 == c below the first pair.
      std::int64_t placed = 0;
      for (std::size_t j = 0; j < at && placed < want - 1; ++j) {
        if (row[idx(j)] != -1 || j % 2 != static_cast<std::size_t>(c)) continue;
        if (j == pairs[0] || j == pairs[0] + 1 || j == pairs[1] || j == pairs[1] + 1) continue;
        row[idx(j)] = label;
        ++placed;
      }
      if (placed < want - 1) return false;
      row[idx(at)] = label;
      row[idx(at + 1)] = label;
      out.taken.push_back(idx(at));
      out.left.push_back(idx(at + 1));
      // Some items of this class above the pair too.
      std::int64_t above = 0;
      for (std::size_t j = at + 2; j < composite.size() && above < want; ++j)
        if (row[idx(j)] == -1 && j % 2 == static_cast<std::size_t>(c) && j != pairs[1] && j != pairs[1] + 1) {
          row[idx(j)] = label;
          ++above;
        }
    }
  }
  return true;
}

/// A CPU run's outputs: indices, valid counts and gathered labels (int64).
struct result {
  std::vector<std::int64_t> indices;
  std::vector<std::int32_t> valid;
  std::vector<std::int64_t> labels;
};

/// Outputs for `rows` rows of k picks.
inline result make_result(std::int64_t rows, std::int64_t k) {
  return {std::vector<std::int64_t>(static_cast<std::size_t>(rows * k)), std::vector<std::int32_t>(static_cast<std::size_t>(rows)),
          std::vector<std::int64_t>(static_cast<std::size_t>(rows * k))};
}

/// Arguments over the given buffers (host or device): int64 labels and indices, valid counts and,
/// optionally, gathered labels.
inline ops::sampler_args args_over(std::int64_t rows, std::int64_t n, const void* labels, void* indices, std::int32_t* valid,
                                   void* gathered_labels = nullptr) {
  ops::sampler_args a;
  a.rows = rows;
  a.n = n;
  a.labels = labels;
  a.indices = indices;
  a.valid = valid;
  a.gathered_labels = gathered_labels;
  return a;
}

/// The gathered feature rows (fb bytes each) are the picked items' rows, zero bytes past the valid ones.
inline void check_gathered_features(const result& r, std::int64_t rows, std::int64_t n, std::int64_t k,
                                    const std::vector<std::byte>& features, const std::vector<std::byte>& gathered,
                                    std::size_t fb) {
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t j = 0; j < k; ++j) {
      const auto idx = r.indices[row * k + j];
      const std::byte* got = gathered.data() + (row * k + j) * fb;
      if (idx < 0) CHECK(std::all_of(got, got + fb, [](std::byte b) { return b == std::byte{0}; }));
      else CHECK(std::memcmp(got, features.data() + (row * n + idx) * fb, fb) == 0);
    }
}

/// Checks the invariants every output must satisfy, whatever the randomness.
inline void check_invariants(const std::vector<std::int64_t>& labels, std::int64_t rows, std::int64_t n, const ops::sampler_params& p,
                      const result& r) {
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t positives = 0, negatives = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto l = labels[row * n + i];
      negatives += l == p.negative_label;
      positives += l != p.negative_label && l != p.ignore_label;
    }
    const auto cc = ops::balanced_counts(positives, negatives, p.k, ops::positive_target(p), p.mode);
    REQUIRE(r.valid[row] == cc.num_pos + cc.num_neg);
    std::set<std::int64_t> seen;
    std::int64_t got_pos = 0, got_neg = 0;
    for (std::int64_t j = 0; j < p.k; ++j) {
      const auto idx = r.indices[row * p.k + j];
      if (j >= r.valid[row]) {
        REQUIRE(idx == -1);
        REQUIRE(r.labels[row * p.k + j] == p.ignore_label);
        continue;
      }
      REQUIRE(idx >= 0);
      REQUIRE(idx < n);
      REQUIRE(seen.insert(idx).second);  // distinct
      const auto l = labels[row * n + idx];
      REQUIRE(l != p.ignore_label);        // ignored items are never chosen
      REQUIRE(r.labels[row * p.k + j] == l);  // gathered labels match
      (l == p.negative_label ? got_neg : got_pos)++;
    }
    REQUIRE(got_pos == cc.num_pos);
    REQUIRE(got_neg == cc.num_neg);
  }
}

}  // namespace pinfeed::test
