#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

using namespace pinfeed;

using test::no_launcher;
using test::scoped_env;

TEST_CASE("epoch_order.shuffle_is_a_permutation_per_epoch") {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 4097ull, 100003ull}) {
    CAPTURE(n);
    const epoch_order o(n, 42, {true, 0, 1, false});
    std::vector<std::uint64_t> e0(n), e1(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      e0[i] = o.index_at(0, i);
      e1[i] = o.index_at(1, i);
    }
    std::vector<std::uint64_t> sorted = e0;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint64_t i = 0; i < n; ++i) REQUIRE(sorted[i] == i);  // a bijection of [0, n)
    if (n >= 64) {
      CHECK(e0 != e1);                           // a new order every epoch
      std::uint64_t fixed = 0;
      for (std::uint64_t i = 0; i < n; ++i) fixed += e0[i] == i;
      CHECK(fixed < n / 8 + 2);                  // and a real shuffle (a random one fixes ~1 item)
    }
    const epoch_order again(n, 42, {true, 0, 1, false});
    for (std::uint64_t i = 0; i < n; i += 1 + n / 50) CHECK(again.index_at(0, i) == e0[i]);
  }
  const epoch_order a(1000, 1, {true, 0, 1, false}), b(1000, 2, {true, 0, 1, false});
  int same = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) same += a.index_at(0, i) == b.index_at(0, i);
  CHECK(same < 20);  // another seed, another order
}

TEST_CASE("epoch_order.sequential_and_sharding_pad_or_drop") {
  const epoch_order seq(10, 0, {false, 0, 1, false});
  for (std::uint64_t i = 0; i < 10; ++i) CHECK(seq.index_at(3, i) == i);
  for (bool shuffle : {false, true}) {
    for (bool drop : {false, true}) {
      CAPTURE(shuffle);
      CAPTURE(drop);
      const std::uint64_t n = 103;
      const int world = 4;
      std::map<std::uint64_t, int> seen;
      std::uint64_t total = 0;
      for (int r = 0; r < world; ++r) {
        const epoch_order o(n, 9, {shuffle, r, world, drop});
        CHECK(o.size() == (drop ? 25u : 26u));
        for (std::uint64_t p = 0; p < o.size(); ++p) ++seen[o.index_at(5, p)], ++total;
      }
      if (drop) {
        CHECK(total == 100);
        CHECK(seen.size() == 100);  // disjoint: every kept sample once
        for (auto& [idx, count] : seen) CHECK(count == 1);
      } else {
        CHECK(total == 104);
        CHECK(seen.size() == 103);  // every sample covered; one repeated to pad
        int twice = 0;
        for (auto& [idx, count] : seen) twice += count == 2;
        CHECK(twice == 1);
      }
    }
  }
  // More ranks than samples still pads.
  const epoch_order tiny(2, 0, {false, 4, 5, false});
  CHECK(tiny.size() == 1);
  CHECK(tiny.index_at(0, 0) < 2);
}

TEST_CASE("epoch_order.bad_input_and_environment") {
  no_launcher clean;
  CHECK_THROWS_WITH_AS(epoch_order(10, 0, {false, 4, 4, false}), doctest::Contains("rank 4 is not below world size 4"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(epoch_order(10, 0, {false, 0, 0, false}), doctest::Contains("world size must be >= 1, got 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(epoch_order(3, 0, {false, 1, 4, true}), doctest::Contains("leaves rank 1 nothing"),
                       std::invalid_argument);
  CHECK(distributed_from_env().world == 1);
  CHECK(epoch_order(10, 0, {}).world() == 1);
  {
    scoped_env r("RANK", "2"), w("WORLD_SIZE", "4"), l("LOCAL_RANK", "0");
    const auto env = distributed_from_env();
    CHECK(env.rank == 2);
    CHECK(env.world == 4);
    CHECK(env.launcher == "torchrun");
    const epoch_order o(100, 0, {});  // rank -1: from the environment
    CHECK(o.rank() == 2);
    CHECK(o.world() == 4);
    CHECK(o.index_at(0, 0) == 50);  // rank 2 of 4 takes positions [50, 75)
  }
  {
    scoped_env r("OMPI_COMM_WORLD_RANK", "1"), w("OMPI_COMM_WORLD_SIZE", "2");
    CHECK(distributed_from_env().launcher == "openmpi");
  }
  {
    scoped_env r("SLURM_PROCID", "3"), w("SLURM_NTASKS", "8"), l("SLURM_LOCALID", "1");
    const auto env = distributed_from_env();
    CHECK(env.launcher == "slurm");
    CHECK(env.local_rank == 1);
  }
  {
    scoped_env r("RANK", "5"), w("WORLD_SIZE", "4");
    CHECK_THROWS_WITH_AS((void)distributed_from_env(), doctest::Contains("RANK=5 is not below WORLD_SIZE=4"),
                         std::invalid_argument);
  }
  {
    scoped_env r("RANK", "x");
    CHECK_THROWS_WITH_AS((void)distributed_from_env(), doctest::Contains("RANK='x'"), std::invalid_argument);
  }
  {
    scoped_env r("RANK", "1");
    CHECK_THROWS_WITH_AS((void)distributed_from_env(), doctest::Contains("incomplete"), std::invalid_argument);
  }
  {  // a world size alone, even 0, is a launcher's environment left half set: named, not passed over
    scoped_env w("WORLD_SIZE", "0");
    CHECK_THROWS_WITH_AS((void)distributed_from_env(),
                         "torchrun environment is incomplete: RANK and WORLD_SIZE must both be set (world >= 1)",
                         std::invalid_argument);
  }
  {
    scoped_env r("RANK", "0"), w("WORLD_SIZE", "0");
    CHECK_THROWS_WITH_AS((void)distributed_from_env(), doctest::Contains("incomplete"), std::invalid_argument);
  }
}


TEST_CASE("epoch_order.ranks_take_contiguous_runs") {
  const std::uint64_t n = 103;
  for (int r = 0; r < 4; ++r) {
    const epoch_order o(n, 0, {false, r, 4, false});
    REQUIRE(o.size() == 26);
    for (std::uint64_t p = 0; p < 26; ++p) CHECK(o.index_at(0, p) == (r * 26 + p) % n);  // rank 3 pads with 0
    const epoch_order d(n, 0, {false, r, 4, true});
    REQUIRE(d.size() == 25);
    for (std::uint64_t p = 0; p < 25; ++p) CHECK(d.index_at(0, p) == r * 25 + p);  // 100..102 dropped
  }
}

TEST_CASE("epoch_order.shard_shuffle_keeps_windows_of_groups_together") {
  // An empty group is passed over: the order stays a permutation.
  {
    auto g = std::make_shared<sample_groups>(sample_groups{{4, 0, 6, 0, 0, 3, 5}, 2});
    const epoch_order o(18, 1, {true, 0, 1, false, g});
    for (std::uint32_t e = 0; e < 4; ++e) {
      std::set<std::uint64_t> seen;
      for (std::uint64_t p = 0; p < 18; ++p) seen.insert(o.index_at(e, p));
      CHECK(seen.size() == 18);
      CHECK(*seen.rbegin() == 17);
    }
  }
  // Groups of uneven size, the last window short.
  auto groups = std::make_shared<sample_groups>();
  groups->sizes = {5, 9, 2, 3, 12, 7, 1, 8, 4, 6, 11};
  groups->window = 3;
  std::uint64_t n = 0;
  std::vector<std::uint64_t> group_of;
  for (std::size_t g = 0; g < groups->sizes.size(); ++g)
    for (std::uint64_t i = 0; i < groups->sizes[g]; ++i, ++n) group_of.push_back(g);
  epoch_order_options opt{true, 0, 1, false, groups};
  const epoch_order o(n, 5, opt), again(n, 5, opt);
  CHECK(o.kind() == "shard-shuffle(groups=11,window=3)");
  CHECK(n == 68);
  std::vector<std::vector<std::uint64_t>> group_orders;
  for (std::uint32_t e = 0; e < 6; ++e) {
    CAPTURE(e);
    std::vector<std::uint64_t> seq(n);
    for (std::uint64_t p = 0; p < n; ++p) {
      seq[p] = o.index_at(e, p);
      REQUIRE(seq[p] == again.index_at(e, p));  // a pure function of (seed, epoch)
    }
    std::vector<std::uint64_t> sorted = seq;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint64_t i = 0; i < n; ++i) REQUIRE(sorted[i] == i);  // a permutation
    // The groups in order of first appearance; every window of 3 of them (by that order) holds a
    // contiguous run of positions, so a reader needs only 3 groups at a time.
    std::vector<std::uint64_t> first_seen;
    std::vector<int> window_of_group(groups->sizes.size(), -1);
    int window = -1;
    std::set<std::uint64_t> current;
    for (std::uint64_t p = 0; p < n; ++p) {
      const std::uint64_t g = group_of[seq[p]];
      if (window_of_group[g] < 0) {
        if (current.size() == 3 || window < 0) {
          ++window;
          current.clear();
        }
        current.insert(g);
        window_of_group[g] = window;
        first_seen.push_back(g);
      }
      REQUIRE(window_of_group[g] == window);  // no sample of an earlier window comes back
    }
    group_orders.push_back(first_seen);
  }
  // The groups come in a new order each epoch, and the samples inside a window are shuffled.
  std::set<std::vector<std::uint64_t>> distinct(group_orders.begin(), group_orders.end());
  CHECK(distinct.size() >= 5);
  std::uint64_t in_place = 0;
  for (std::uint64_t p = 0; p + 1 < n; ++p) in_place += o.index_at(0, p) + 1 == o.index_at(0, p + 1);
  CHECK(in_place < n / 4);
  // Window 1 is shuffling group by group, in a shuffled group order.
  groups->window = 1;
  const epoch_order one(n, 5, {true, 0, 1, false, groups});
  for (std::uint64_t p = 1; p < n; ++p)
    if (group_of[one.index_at(2, p)] != group_of[one.index_at(2, p - 1)])
      for (std::uint64_t q = p; q < n; ++q) CHECK(group_of[one.index_at(2, q)] != group_of[one.index_at(2, p - 1)]);
  // Without shuffle the groups change nothing.
  const epoch_order seq(n, 5, {false, 0, 1, false, groups});
  for (std::uint64_t p = 0; p < n; ++p) CHECK(seq.index_at(1, p) == p);
  auto bad = std::make_shared<sample_groups>(sample_groups{{5, 5}, 2});
  CHECK_THROWS_WITH_AS(epoch_order(11, 0, {true, 0, 1, false, bad}),
                       doctest::Contains("the 2 groups hold 10 samples, but the dataset has 11"), std::invalid_argument);
  bad->window = 0;
  CHECK_THROWS_WITH_AS(epoch_order(10, 0, {true, 0, 1, false, bad}), doctest::Contains("window of >= 1"),
                       std::invalid_argument);
}

TEST_CASE("epoch_order.remaining_positions_resplit_over_another_world") {
  for (bool drop : {false, true}) {
    for (bool shuffle : {false, true}) {
      CAPTURE(drop);
      CAPTURE(shuffle);
      const std::uint64_t n = 103, taken = 9;
      // Four ranks take their first 9 positions each.
      std::multiset<std::uint64_t> before;
      std::vector<position_range> remaining;
      for (int r = 0; r < 4; ++r) {
        const epoch_order o(n, 3, {shuffle, r, 4, drop});
        for (std::uint64_t p = 0; p < taken; ++p) before.insert(o.index_at(2, p));
        if (r == 0) remaining = o.remaining_after(2, taken);
      }
      std::uint64_t left = 0;
      for (const auto& x : remaining) left += x.end - x.begin;
      CHECK(left == (drop ? 100 : 103) - 36);
      for (int w2 : {2, 3, 5}) {
        CAPTURE(w2);
        std::multiset<std::uint64_t> after;
        std::uint64_t per = 0;
        for (int r = 0; r < w2; ++r) {
          epoch_order o(n, 3, {shuffle, r, w2, drop});
          o.restrict(2, remaining);
          per = o.size(2);
          CHECK(o.size(3) == o.size());  // other epochs stay whole
          for (std::uint64_t p = 0; p < per; ++p) after.insert(o.index_at(2, p));
        }
        CHECK(per == (drop ? left / w2 : (left + w2 - 1) / w2));
        std::set<std::uint64_t> all(before.begin(), before.end());
        for (auto i : after) CHECK(before.count(i) == 0);  // nothing delivered twice across the resume
        all.insert(after.begin(), after.end());
        std::set<std::uint64_t> after_distinct(after.begin(), after.end());
        CHECK(after.size() - after_distinct.size() == (drop ? 0 : per * w2 - left));  // padding only
        // Every sample once, but for what the drops left out (the old tail, the new one).
        CHECK(all.size() == (drop ? 100 - (left - per * w2) : 103));
      }
    }
  }
  epoch_order o(10, 0, {false, 0, 1, false});
  CHECK_THROWS_WITH_AS(o.restrict(0, {{5, 3}}), doctest::Contains("range 0 [5, 3) is empty"), std::invalid_argument);
  o.restrict(0, {});
  CHECK(o.size(0) == 0);
  CHECK(o.remaining_after(0, 0).empty());
  o.unrestrict();
  CHECK(o.size(0) == 10);
}

