// loader: the order across epochs, and resuming it from a saved state (on any world size).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"
#include "loader/loader_state.hpp"
#include "test_util.hpp"

using namespace pinfeed;

using test::no_launcher;
using test::scoped_env;

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
/// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("loader.shuffled_order_is_deterministic_and_complete") {
  no_launcher clean;
  loader a(id_source(100), shuffled(1)), b(id_source(100), shuffled(3));
  const auto la = test::epoch_checksums(a, 0, 1), lb = test::epoch_checksums(b, 0, 1);
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
    const auto expected = test::epoch_checksums(original, 0, 1);  // the full two epochs, uninterrupted

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
  expect(R"({"version": 1})", "version 1 is not supported: this pinfeed reads version 2");
  expect(R"({"version": 3})", "version 3 is not supported");
  expect(R"({"version": 2})", "lacks 'dataset_size'");
  auto other = shuffled(1);
  other.seed = 78;
  expect(loader(id_source(100), other).state(), "seed");
  expect(loader(id_source(99), shuffled(1)).state(), "dataset_size");
  other = shuffled(1);
  other.batch_size = 8;
  expect(loader(id_source(100), other).state(), "batch_size");
  other = shuffled(1);
  other.order.shuffle = false;
  expect(loader(id_source(100), other).state(), "order is \"sequential\" there, \"shuffle\" here");
  other = shuffled(1);
  other.order.drop_remainder = true;
  expect(loader(id_source(100), other).state(), "drop_remainder");
  // Another dataset of the same size: the digest of the source's identity differs.
  expect(loader(make_source(100, {{"id", dtype::i64, {}}, {"noise", dtype::u32, {}}}, [](sample&) {}, "other data"),
                shuffled(1))
             .state(),
         "another dataset");
  auto edit = [&](const std::string& from, const std::string& to) { return replaced(good, from, to); };
  expect(edit("\"next_batch\":0", "\"next_batch\":99"), "next_batch 99 is not in [0, 15]");
  expect(edit("\"plan\":[[0,100]]", "\"plan\":[[0,101]]"), "range 0 [0, 101)");
  expect(edit("\"plan\":[[0,100]]", "\"plan\":[[50,60],[10,20]]"), "range 1 [10, 20)");
  expect(edit("\"plan\":[[0,100]]", "\"plan\":[[5]]"), "plan range [5] is not [begin, end]");
  expect(edit("\"plan\":[[0,100]]", "\"plan\":7"), "not a list");
  expect(edit("\"world\":1", "\"world\":0"), "world 0 is not a world size");
  // A state from another world size is not refused: it resumes elastically (tested below).
  other = shuffled(1);
  other.order = {true, 1, 2, false};
  CHECK_NOTHROW(l.resume(loader(id_source(100), other).state()));
}

TEST_CASE("loader.resume_on_another_world_size_delivers_the_rest_exactly_once") {
  no_launcher clean;
  const std::uint64_t n = 103;
  // The exact global shuffle, and a shard-aware one over uneven shards (windows of two).
  const auto shards = std::make_shared<sample_groups>(sample_groups{{9, 14, 11, 0, 17, 8, 13, 12, 19}, 2});
  std::map<bool, std::multiset<std::int64_t>> first_delivered;  // per order, without drop_remainder
  for (const bool shard_aware : {false, true})
  for (bool drop_remainder : {false, true}) {
    CAPTURE(shard_aware);
    CAPTURE(drop_remainder);
    auto opts = [&](int rank, int world) {
      loader_options o = shuffled(1);
      o.order = {true, rank, world, drop_remainder};
      if (shard_aware) o.order.groups = shards;
      return o;
    };
    auto ids = [](const batch& b) {
      std::vector<std::int64_t> v(b.size());
      std::memcpy(v.data(), b.field("id").data, b.size() * sizeof(std::int64_t));
      return v;
    };
    // Four ranks each deliver 2 batches of 7, then stop; every rank saves the same progress.
    std::multiset<std::int64_t> before;
    std::string state;
    for (int r = 0; r < 4; ++r) {
      loader l(id_source(n), opts(r, 4));
      for (int k = 0; k < 2; ++k)
        for (auto i : ids(*l.next())) before.insert(i);
      if (r == 0) state = l.state();
    }
    if (!drop_remainder) first_delivered[shard_aware] = before;
    for (int w2 : {2, 3}) {
      CAPTURE(w2);
      std::multiset<std::int64_t> after;
      std::vector<std::uint64_t> batches;
      std::vector<std::string> next_epoch, uninterrupted;
      std::vector<std::string> warnings;  // what resume() warns of, rank by rank
      std::mutex warned;
      const log_sink previous = set_log_sink([&](log_level level, std::string_view m) {
        const std::lock_guard lock(warned);
        if (level == log_level::warn) warnings.emplace_back(m);
      });
      struct restore {
        const log_sink& sink;
        ~restore() { set_log_sink(sink); }
      } restore_sink{previous};
      for (int r = 0; r < w2; ++r) {
        loader l(id_source(n), opts(r, w2));
        l.resume(state);
        CHECK(l.epoch() == 0);
        batches.push_back(l.batches_per_epoch());
        while (auto b = l.next()) for (auto i : ids(*b)) after.insert(i);
        l.start_epoch(1);  // the next epoch is that of an uninterrupted w2-rank run
        while (auto b = l.next()) next_epoch.push_back(checksum_line(*b));
        loader fresh(id_source(n), opts(r, w2));
        fresh.start_epoch(1);
        while (auto b = fresh.next()) uninterrupted.push_back(checksum_line(*b));
      }
      CHECK(std::all_of(batches.begin(), batches.end(), [&](auto b) { return b == batches[0]; }));  // no rank waits
      CHECK(next_epoch == uninterrupted);
      const std::uint64_t kept = drop_remainder ? 100 : 103, left = kept - 56;
      // drop_remainder on a world the rest does not divide over: each rank warns of what is dropped.
      const std::uint64_t dropped = drop_remainder ? left % static_cast<std::uint64_t>(w2) : 0;
      if (dropped > 0)
        CHECK(warnings == std::vector<std::string>(static_cast<std::size_t>(w2),
                                                   "loader: resuming epoch 0 with drop_remainder drops the " + std::to_string(dropped) +
                                                       " of its " + std::to_string(left) + " remaining samples that do not divide over " +
                                                       std::to_string(w2) + " ranks"));
      else
        CHECK(warnings.empty());
      std::set<std::int64_t> distinct(after.begin(), after.end());
      CHECK(distinct.size() == (drop_remainder ? left - left % w2 : left));
      for (auto i : distinct) CHECK(before.count(i) == 0);
      if (!drop_remainder) {
        CHECK(after.size() == (left + w2 - 1) / w2 * w2);  // padded to equal shares
        std::set<std::int64_t> all(before.begin(), before.end());
        all.insert(distinct.begin(), distinct.end());
        CHECK(all.size() == n);  // every sample of the epoch, once across the two runs
      }
    }
    // Resumed at the same world size: each rank goes on exactly where it was.
    loader again(id_source(n), opts(1, 4)), whole(id_source(n), opts(1, 4));
    again.resume(state);
    CHECK(again.next_batch() == 2);
    for (int k = 0; k < 2; ++k) (void)whole.next();
    while (auto b = whole.next()) {
      auto c = again.next();
      REQUIRE(c);
      CHECK(checksum_line(*b) == checksum_line(*c));
    }
    CHECK_FALSE(again.next());
  }
  CHECK(first_delivered[true] != first_delivered[false]);  // the shard-aware order is another one
  // A state saved at the end of an epoch resumes as an empty epoch on another world size.
  loader_options o = shuffled(1);
  o.order = {true, 0, 4, false};
  loader end(id_source(n), o);
  while (end.next()) {
  }
  const std::string at_end = end.state();
  o.order = {true, 2, 3, false};
  loader three(id_source(n), o);
  three.resume(at_end);
  CHECK(three.batches_per_epoch() == 0);
  CHECK_FALSE(three.next());
  // A start refused for its batch leaves the loader where it was.
  CHECK_THROWS_AS(three.start_epoch(1, 6), std::out_of_range);
  CHECK(three.batches_per_epoch() == 0);
  CHECK(three.epoch() == 0);
  CHECK_FALSE(three.next());
  three.start_epoch(1);
  CHECK(three.batches_per_epoch() == 5);  // 35 positions of 7
  CHECK(three.next());
}

TEST_CASE("loader_state.round_trips_through_json_and_names_a_field_of_the_wrong_kind") {
  detail::loader_state s;
  s.dataset = "00112233aabbccdd";
  s.dataset_size = 1000;
  s.seed = 7;
  s.order = "shuffle";
  s.batch_size = 32;
  s.drop_last = true;
  s.drop_remainder = false;
  s.epoch = 3;
  s.world = 4;
  s.rank = 2;
  s.next_batch = 5;
  s.plan = {{0, 10}, {20, 250}};
  const auto back = detail::loader_state::from_json(s.to_json());
  CHECK(back.dataset == s.dataset);
  CHECK(back.dataset_size == 1000);
  CHECK(back.seed == 7);
  CHECK(back.order == "shuffle");
  CHECK(back.batch_size == 32);
  CHECK(back.drop_last);
  CHECK(!back.drop_remainder);
  CHECK(back.epoch == 3);
  CHECK(back.world == 4);
  CHECK(back.rank == 2);
  CHECK(back.next_batch == 5);
  CHECK(back.plan == s.plan);
  CHECK_NOTHROW(s.check_same_loader(back));
  auto edited = [&](const std::string& from, const std::string& to) { return replaced(s.to_json(), from, to); };

  auto expect = [](const std::string& text, const char* needle) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS((void)detail::loader_state::from_json(text), doctest::Contains(needle), std::invalid_argument);
  };
  expect(edited("\"seed\":7", "\"seed\":\"seven\""), "seed \"seven\" is not an unsigned number");
  expect(edited("\"drop_last\":true", "\"drop_last\":1"), "drop_last 1 is not true or false");
  expect(edited("\"order\":\"shuffle\"", "\"order\":2"), "order 2 is not a string");
  expect(edited("\"epoch\":3", "\"epoch\":4294967296"), "epoch 4294967296 is not a 32-bit unsigned number");
  // Not a whole unsigned number at all: a fraction, a negative one, text.
  expect(edited("\"epoch\":3", "\"epoch\":2.5"), "epoch 2.5 is not a 32-bit unsigned number");
  expect(edited("\"epoch\":3", "\"epoch\":-3"), "epoch -3 is not a 32-bit unsigned number");
  expect(edited("\"epoch\":3", "\"epoch\":\"3\""), "epoch \"3\" is not a 32-bit unsigned number");
  expect(edited("\"world\":4", "\"world\":16777217"), "world 16777217 is not a world size");
  expect(edited("\"next_batch\":5", "\"next_batch\":-1"), "next_batch -1 is not an unsigned number");
  // Another loader: the first field that differs is named, with both values and why.
  detail::loader_state other = back;
  other.batch_size = 64;
  CHECK_THROWS_WITH_AS(s.check_same_loader(other), doctest::Contains("batch_size is 64 there, 32 here"),
                       std::invalid_argument);
  other = back;
  other.dataset = "ffffffffffffffff";
  CHECK_THROWS_WITH_AS(s.check_same_loader(other), doctest::Contains("another dataset: its files or shards differ"),
                       std::invalid_argument);
}
