#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
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
    CHECK(o.index_at(0, 0) == 2);
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
}

namespace {
std::shared_ptr<source> id_source(std::uint64_t n) {
  return make_source(n, {{"id", dtype::i64, {}}, {"noise", dtype::u32, {}}}, [](sample& s) {
    s.as<std::int64_t>(0)[0] = static_cast<std::int64_t>(s.index());
    s.as<std::uint32_t>(1)[0] = s.rng().next_u32();
  });
}
loader_options shuffled(std::size_t workers) {
  loader_options o;
  o.batch_size = 7;
  o.workers = workers;
  o.device = "cpu";
  o.seed = 77;
  o.order = {true, 0, 1, false};
  return o;
}
std::vector<std::string> run_epochs(loader& l, std::uint32_t first, std::uint32_t last) {
  std::vector<std::string> lines;
  for (std::uint32_t e = first; e <= last; ++e) {
    l.start_epoch(e);
    while (auto b = l.next()) lines.push_back(checksum_line(*b));
  }
  return lines;
}
}  // namespace

TEST_CASE("loader.shuffled_order_is_deterministic_and_complete") {
  no_launcher clean;
  loader a(id_source(100), shuffled(1)), b(id_source(100), shuffled(3));
  const auto la = run_epochs(a, 0, 1), lb = run_epochs(b, 0, 1);
  CHECK(la == lb);
  CHECK(la.size() == 30);
  a.start_epoch(2);
  std::set<std::int64_t> ids;
  std::vector<std::int64_t> order;
  while (auto batch = a.next()) {
    const auto* id = static_cast<const std::int64_t*>(batch->field("id").data);
    for (std::size_t j = 0; j < batch->size(); ++j) {
      CHECK(id[j] == static_cast<std::int64_t>(batch->indices()[j]));
      ids.insert(id[j]);
      order.push_back(id[j]);
    }
  }
  CHECK(ids.size() == 100);
  CHECK(!std::is_sorted(order.begin(), order.end()));
}

TEST_CASE("loader.resume_yields_exactly_the_remaining_batches") {
  no_launcher clean;
  for (std::size_t stop_after : {0u, 1u, 6u, 15u, 29u}) {
    CAPTURE(stop_after);
    loader original(id_source(100), shuffled(2));
    const auto expected = run_epochs(original, 0, 1);  // the full two epochs, uninterrupted

    loader first(id_source(100), shuffled(2));
    std::vector<std::string> got;
    std::string saved;
    std::uint32_t e = 0;
    first.start_epoch(0);
    while (got.size() < stop_after) {
      auto b = first.next();
      if (!b) {
        first.start_epoch(++e);
        continue;
      }
      got.push_back(checksum_line(*b));
    }
    saved = first.state();
    loader second(id_source(100), shuffled(1));  // another worker count, a fresh process's loader
    second.resume(saved);
    for (;;) {
      auto b = second.next();
      if (!b) {
        if (second.epoch() == 1) break;
        second.start_epoch(second.epoch() + 1);
        continue;
      }
      got.push_back(checksum_line(*b));
    }
    CHECK(got == expected);
  }
}

TEST_CASE("loader.resume_rejects_foreign_or_malformed_states") {
  no_launcher clean;
  loader l(id_source(100), shuffled(1));
  const std::string good = l.state();
  CHECK_NOTHROW(l.resume(good));
  auto expect = [&](const std::string& state, const char* needle) {
    CAPTURE(state);
    CHECK_THROWS_WITH_AS(l.resume(state), doctest::Contains(needle), std::invalid_argument);
  };
  expect("not json", "not JSON");
  expect("[1, 2]", "lacks 'version'");
  expect(R"({"version": 2})", "version 2");
  auto other = shuffled(1);
  other.seed = 78;
  expect(loader(id_source(100), other).state(), "seed");
  expect(loader(id_source(99), shuffled(1)).state(), "dataset_size");
  other = shuffled(1);
  other.batch_size = 8;
  expect(loader(id_source(100), other).state(), "batch_size");
  other = shuffled(1);
  other.order.shuffle = false;
  expect(loader(id_source(100), other).state(), "shuffle");
  other = shuffled(1);
  other.order = {true, 1, 2, false};
  expect(loader(id_source(100), other).state(), "rank");
  std::string bad = good;
  bad.replace(bad.find("\"next_batch\":0"), 14, "\"next_batch\":99");
  expect(bad, "next_batch 99 is not in [0, 15]");
}
