// What remote readers fetch ahead, and when: the whole-shard cache's look-ahead and eviction, the
// range read-ahead's walk, and the requests-in-flight controller. Pure bookkeeping: no network.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include "remote/in_flight.hpp"
#include "remote/range_reads.hpp"
#include "remote/shard_cache.hpp"
#include "remote/task_thread.hpp"

using namespace pinfeed::loaders;

namespace {

/// Epoch e's order is `per_epoch[e]` (a dataset index per position); a read at `position` of
/// `epoch`: the members of the order_cursor that the walks read.
struct vector_order {
  std::uint32_t epoch_;
  std::uint64_t position_;
  const std::vector<std::vector<std::uint64_t>>& per_epoch;
  std::uint64_t pass_ = 1;
  std::uint32_t epoch() const { return epoch_; }
  std::uint64_t pass() const { return pass_; }
  std::uint64_t position() const { return position_; }
  std::uint64_t epoch_size() const { return per_epoch.at(epoch_).size(); }
  std::optional<std::uint64_t> index_at(std::uint32_t e, std::uint64_t p) const {
    if (e >= per_epoch.size() || p >= per_epoch[e].size()) return std::nullopt;
    return per_epoch[e][p];
  }
};

vector_order at(std::uint32_t epoch, std::uint64_t position, const std::vector<std::vector<std::uint64_t>>& per_epoch,
                std::uint64_t pass = 1) {
  return {epoch, position, per_epoch, pass};
}

std::shared_ptr<const remote::blob> bytes(std::size_t n) {
  return std::make_shared<const remote::blob>(std::vector<std::byte>(n), "", 0);
}

}  // namespace

TEST_CASE("remote.shard_cache.fetches_along_the_order_within_the_cap") {
  // 4 shards of 100 bytes, 2 samples each (samples 2s and 2s+1 in shard s); room for 2 shards.
  remote::shard_cache cache({100, 100, 100, 100}, {0, 0, 1, 1, 2, 2, 3, 3}, 200, 4);
  const std::vector<std::vector<std::uint64_t>> order{{6, 7, 2, 3, 0, 1, 4, 5}};
  CHECK(cache.walk(at(0, 0, order)) == 3u);  // position 0 holds sample 6, of shard 3
  // The walk met shards 3 and 1 (positions 0..3), in that order of need: both fit.
  CHECK(cache.take_fetches() == std::vector<std::uint32_t>{3, 1});
  CHECK(cache.at(3).fetching);
  CHECK(cache.used() == 200);
  CHECK(cache.at(3).pending == 2);
  cache.arrived(3, bytes(100));
  cache.arrived(1, bytes(100));
  cache.taken(3u);
  CHECK(cache.walk(at(0, 1, order)) == 3u);
  cache.taken(3u);  // shard 3's samples are all read: it may go
  CHECK(cache.walk(at(0, 2, order)) == 1u);  // walks on to position 5: shard 0 wanted
  // Room for shard 0 is made by evicting shard 3 (nothing pending), never shard 1 (2 pending).
  CHECK(cache.take_fetches() == std::vector<std::uint32_t>{0});
  CHECK_FALSE(cache.at(3).data);
  CHECK(cache.at(1).data);
  CHECK(cache.used() == 200);
  // With shard 1 still to be read and shard 0 on its way, shard 2 waits for room, in order.
  cache.taken(1u);
  CHECK(cache.walk(at(0, 3, order)) == 1u);
  CHECK(cache.take_fetches().empty());
  CHECK_FALSE(cache.reserve(2));
  cache.arrived(0, nullptr);  // a failed fetch frees its room
  CHECK(cache.used() == 100);
  CHECK_FALSE(cache.at(0).fetching);
}

TEST_CASE("remote.shard_cache.a_shard_past_the_cap_is_never_fetched_and_the_next_epoch_is_kept") {
  remote::shard_cache cache({300, 100, 100}, {0, 1, 2}, 200, 8);
  const std::vector<std::vector<std::uint64_t>> order{{0, 1}, {2, 1}};  // epoch 0 of 2 samples, then epoch 1
  (void)cache.walk(at(0, 0, order));
  // Shard 0 never fits (its samples are range-read); shard 1 is fetched; and, the walk passing
  // the epoch's end, shard 2 of the next epoch's first positions.
  CHECK(cache.take_fetches() == std::vector<std::uint32_t>{1, 2});
  CHECK_FALSE(cache.reserve(0));
  cache.arrived(1, bytes(100));
  cache.arrived(2, bytes(100));
  CHECK(cache.at(2).next_epoch);
  cache.taken(std::nullopt);
  // Shard 1's samples read, shard 2 waits for the next epoch: neither may be evicted for shard 0,
  // and shard 1 only goes when its room is needed.
  (void)cache.walk(at(0, 1, order));
  cache.taken(1u);
  CHECK_FALSE(cache.reserve(0));
  CHECK(cache.at(1).data);
  // A new pass over the same epoch starts the walk anew.
  CHECK(cache.walk(at(0, 0, order, 2)) == 0u);
  CHECK(cache.at(1).pending == 1);
}

TEST_CASE("remote.shard_cache.adopted_copies_count_against_the_cap") {
  remote::shard_cache cache({100, 100}, {0, 1}, 150, 4);
  cache.adopt(1, bytes(100));
  CHECK(cache.used() == 100);
  CHECK(cache.use(1));
  CHECK_FALSE(cache.use(0));
  // Shard 1 has no sample pending: it is evicted to make room for shard 0.
  CHECK(cache.reserve(0));
  CHECK_FALSE(cache.at(1).data);
  CHECK(cache.used() == 100);
  cache.release(0);
  CHECK(cache.used() == 0);
}

TEST_CASE("remote.read_ahead.walks_the_order_then_into_the_next_epoch") {
  const std::vector<std::vector<std::uint64_t>> order{{5, 4, 3, 2, 1, 0}, {10, 11, 12}};
  remote::read_ahead_walk walk;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> queued;
  const auto queue = [&](std::uint32_t e, std::uint64_t i) {
    queued.emplace_back(e, i);
    return true;
  };
  walk.step(at(0, 0, order), 2, 100, 0, queue);  // positions 1 and 2
  CHECK(queued == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 4}, {0, 3}});
  queued.clear();
  walk.step(at(0, 1, order), 2, 100, 2, queue);  // position 3 only: 2 was queued already
  CHECK(queued == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 2}});
  queued.clear();
  walk.step(at(0, 4, order), 4, 100, 0, queue);  // position 5, then the next epoch's first 3
  CHECK(queued == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 0}, {1, 10}, {1, 11}, {1, 12}});
  queued.clear();
  // A worker behind where the walk began (at 4): the positions between are walked too, however
  // short the depth, rather than requested one by one by the workers that take them.
  remote::read_ahead_walk late;
  late.step(at(0, 3, order), 1, 100, 0, queue);
  CHECK(queued == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 1}});
  queued.clear();
  late.step(at(0, 0, order), 1, 100, 0, queue);
  CHECK(queued == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 4}, {0, 3}, {0, 2}});
  queued.clear();
  // No more than max_pending at once; a sample the queue refuses (taken) is not counted.
  remote::read_ahead_walk bounded;
  bounded.step(at(0, 0, order), 5, 2, 1, queue);
  CHECK(queued.size() == 1);
  queued.clear();
  remote::read_ahead_walk refusing;
  refusing.step(at(0, 0, order), 3, 2, 0, [&](std::uint32_t e, std::uint64_t i) {
    queued.emplace_back(e, i);
    return i != 4;
  });
  CHECK(queued.size() == 3);
}

TEST_CASE("remote.read_ahead.samples_taken_are_remembered_for_their_pass_only") {
  // Contract: a sample a worker took in this pass is not read ahead again (its bytes would be
  // fetched twice and held until dropped): the reads remember every sample taken in the pass, the
  // last `most` of them, and forget them all when the pass changes (sample::pass(): a new epoch's
  // pass, or a loader restarted at an earlier one).
  remote::taken_samples t;
  t.remember(10, 1, 3);
  t.remember(11, 1, 3);
  t.remember(10, 1, 3);  // taken again (a retried sample): still one
  CHECK(t.contains(10));
  CHECK(t.contains(11));
  CHECK(t.size() == 2);
  t.remember(12, 1, 3);
  t.remember(13, 1, 3);  // past the most: the oldest goes
  CHECK_FALSE(t.contains(10));
  CHECK(t.contains(11));
  CHECK(t.contains(12));
  CHECK(t.contains(13));
  CHECK(t.size() == 3);
  t.remember(20, 2, 3);  // a new pass
  CHECK(t.size() == 1);
  CHECK(t.contains(20));
  CHECK_FALSE(t.contains(13));
  t.remember(21, 2, 3);
  CHECK(t.contains(20));
  t.remember(30, 1, 3);  // an earlier pass again: forgotten too
  CHECK(t.size() == 1);
  CHECK(t.contains(30));
  CHECK_FALSE(t.contains(21));
}

TEST_CASE("remote.read_ahead.full_pending_reads_keep_this_epoch_and_the_next") {
  // Contract: when the range read-ahead's pending reads are full (restarts left other epochs'
  // behind), those of the current epoch and of the next one (read ahead across its start) stay,
  // every other epoch's go; after the last epoch number there is no next one.
  struct read {
    std::uint32_t epoch;
  };
  std::map<std::uint64_t, read> pending;
  const auto fill = [&](std::vector<std::uint32_t> epochs) {
    pending.clear();
    for (std::size_t i = 0; i < epochs.size(); ++i) pending[i] = {epochs[i]};
  };
  const auto epochs_left = [&] {
    std::vector<std::uint32_t> out;
    for (const auto& [key, r] : pending) out.push_back(r.epoch);
    return out;
  };
  fill({0, 1, 2, 3, 2, 1, 4});
  remote::drop_other_epochs(pending, 2);
  CHECK(epochs_left() == std::vector<std::uint32_t>{2, 3, 2});
  fill({0, 1, 2, 3, 2, 1, 4});
  remote::drop_other_epochs(pending, 0);
  CHECK(epochs_left() == std::vector<std::uint32_t>{0, 1, 1});
  fill({~0u, 0, ~0u - 1, 5});
  remote::drop_other_epochs(pending, ~0u);
  CHECK(epochs_left() == std::vector<std::uint32_t>{~0u});
}

TEST_CASE("remote.in_flight.grows_where_held_back_and_reverts_without_gain") {
  using clock = remote::in_flight_controller::clock;
  remote::in_flight_controller c(1024);
  const auto t0 = clock::now();
  bool held = true;
  const auto held_back = [&] { return held; };
  std::size_t cap = 64;
  // 1000 samples/s at 100 ms latency: Little's law wants 2 x 100 in flight.
  const auto window = [&](clock::time_point start) {
    std::optional<std::size_t> out;
    for (int i = 0; i <= 300; ++i)
      if (auto n = c.on_read(start + std::chrono::milliseconds(i), 0.1, cap, held_back)) out = n;
    return out;
  };
  CHECK_FALSE(c.on_read(t0, 0.1, cap, held_back));  // the first read starts a window
  auto next = window(t0);
  REQUIRE(next);
  CHECK(*next >= cap + cap / 2);  // by half at least, double at most
  CHECK(*next <= 2 * cap);
  const std::size_t before = cap;
  cap = *next;
  // The next window reads no faster: back to where it was, and that is the ceiling for now.
  next = window(t0 + std::chrono::milliseconds(301));
  REQUIRE(next);
  CHECK(*next == before);
  CHECK(c.ceiling() == before);
}

TEST_CASE("remote.in_flight.a_memory_limit_keeps_what_the_controller_learned") {
  // A second loader over the same reader meets its memory budget again (source::limit_memory):
  // a limit at or above the controller's most must not forget the ceiling a growth without gain
  // set, nor the window under way; a lower one lowers both.
  using clock = remote::in_flight_controller::clock;
  remote::in_flight_controller c(1024);
  const auto t0 = clock::now();
  const auto held_back = [] { return true; };
  std::size_t cap = 128;
  // A read a millisecond (1000 samples/s) from `start` + `from` ms to + `to` ms, at `latency`.
  const auto reads = [&](clock::time_point start, int from, int to, double latency) {
    std::optional<std::size_t> out;
    for (int i = from; i <= to; ++i)
      if (auto n = c.on_read(start + std::chrono::milliseconds(i), latency, cap, held_back)) out = n;
    return out;
  };
  auto next = reads(t0, 0, 300, 0.1);  // 2 x 1000/s x 100 ms wanted: grows...
  REQUIRE(next);
  CHECK(*next >= 192);
  cap = *next;
  next = reads(t0 + std::chrono::milliseconds(301), 0, 300, 0.1);  // ...gains nothing: back, the ceiling for now
  REQUIRE(next);
  CHECK(*next == 128);
  cap = *next;
  REQUIRE(c.ceiling() == 128);
  // Its own most again (and more): nothing changes, nothing to set.
  CHECK_FALSE(c.limit(1024, cap));
  CHECK_FALSE(c.limit(4096, cap));
  CHECK(c.most() == 1024);
  CHECK(c.ceiling() == 128);
  // The window under way goes on. After a pause, at 500 ms latency (a window of a second; the
  // ceiling lifts, the latency having doubled): 600 ms of reads, the limit, and the window ends
  // at one second, growing the cap; a controller made anew at the limit would end none by then.
  const auto t1 = t0 + std::chrono::seconds(5);
  CHECK_FALSE(reads(t1, 0, 600, 0.5));
  CHECK_FALSE(c.limit(1024, cap));
  next = reads(t1, 601, 1200, 0.5);
  REQUIRE(next);
  CHECK(*next == 256);
  cap = *next;
  // Lower: the most and the ceiling follow, and a cap past it is to be lowered.
  CHECK(c.limit(100, cap) == std::optional<std::size_t>(100));
  CHECK(c.most() == 100);
  CHECK(c.ceiling() == 100);
  CHECK_FALSE(c.limit(100, 100));
  // Never below kMinRequestsInFlight.
  CHECK(c.limit(0, 100) == std::optional<std::size_t>(kMinRequestsInFlight));
  CHECK(c.most() == kMinRequestsInFlight);
}

TEST_CASE("remote.in_flight.shrinks_slowly_and_a_pause_starts_anew") {
  using clock = remote::in_flight_controller::clock;
  remote::in_flight_controller c(1024);
  const auto t0 = clock::now();
  const auto never = [] { return false; };
  const std::size_t cap = 512;
  std::optional<std::size_t> next;
  // 100 samples/s at 10 ms: 2 wanted, kMinRequestsInFlight at least: shrinks by a quarter a window.
  for (int i = 0; i <= 70; ++i)
    if (auto n = c.on_read(t0 + std::chrono::milliseconds(10 * i), 0.01, cap, never)) next = n;
  REQUIRE(next);
  CHECK(*next == cap - cap / 4);
  // A gap of two seconds is a pause: no window ends on it.
  remote::in_flight_controller paused(1024);
  for (int i = 0; i < 40; ++i) (void)paused.on_read(t0 + std::chrono::milliseconds(10 * i), 0.01, cap, never);
  CHECK_FALSE(paused.on_read(t0 + std::chrono::seconds(3), 0.01, cap, never));
  for (int i = 1; i < 40; ++i)
    CHECK_FALSE(paused.on_read(t0 + std::chrono::seconds(3) + std::chrono::milliseconds(10 * i), 0.01, cap, never));
}

TEST_CASE("remote.in_flight.most_is_the_read_ahead_bytes_share_within_open_files_and_a_given_read_ahead") {
  // The contract of the adapted requests in flight: never more than keep kReadAheadBytes of
  // samples read ahead (two samples a request), than a quarter of the open files allow, or than
  // a given read_ahead can use; never fewer than kMinRequestsInFlight.
  using remote::in_flight_most;
  constexpr std::uint64_t KiB = 1024;
  CHECK(in_flight_most(1 * KiB, std::nullopt, 1024) == 1024);         // 128 Ki samples would fit: the open files bound
  CHECK(in_flight_most(1 * KiB, std::nullopt, 300) == 300);
  CHECK(in_flight_most(1024 * KiB, std::nullopt, 1024) == 128);      // 1 MiB samples: 256 MiB holds 256, 2 a request
  CHECK(in_flight_most(1024 * KiB + 1, std::nullopt, 1024) == 127);  // (rounded down)
  CHECK(in_flight_most(64u << 20, std::nullopt, 1024) == kMinRequestsInFlight);  // 64 MiB samples: the floor
  CHECK(in_flight_most(0, std::nullopt, 1024) == 1024);              // (no mean size yet: no division by zero)
  CHECK(in_flight_most(1 * KiB, std::nullopt, 10) == kMinRequestsInFlight);  // the floor holds over the open files
  // A read_ahead given: more requests at once than it (and the workers' own) is no use.
  CHECK(in_flight_most(1 * KiB, std::size_t{100}, 1024) == 100);
  CHECK(in_flight_most(1 * KiB, std::size_t{8}, 1024) == kMinRequestsInFlight);
  CHECK(in_flight_most(1 * KiB, std::size_t{65}, 1024) == 65);
  CHECK(in_flight_most(1 * KiB, std::size_t{4096}, 1024) == 1024);
  CHECK(in_flight_most(1024 * KiB, std::size_t{200}, 1024) == 128);
  // What the controller then takes: growing where held back, it stops at that most.
  using clock = remote::in_flight_controller::clock;
  remote::in_flight_controller c(in_flight_most(1 * KiB, std::size_t{100}, 1024));
  auto t = clock::now();
  const auto held = [] { return true; };
  std::size_t cap = kMinRequestsInFlight, highest = cap;
  for (int i = 0; i < 4000; ++i) {
    // A link-bound reader at 300 ms a request: cap / 0.3 s samples a second, each growth a gain.
    t += std::chrono::microseconds(300'000 / cap);
    if (auto n = c.on_read(t, 0.3, cap, held)) cap = *n;
    highest = std::max(highest, cap);
  }
  CHECK(highest == 100);
  CHECK(cap == 100);
}

TEST_CASE("remote.in_flight.open_file_share_is_a_quarter_of_the_soft_open_file_limit") {
  // Requests in flight hold a connection each and as many are kept for reuse: a quarter of the
  // open files, within [kMinRequestsInFlight, kMaxRequestsInFlight]. Set here by lowering the
  // soft limit (allowed unprivileged) and put back after.
  rlimit was{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &was) == 0);
  const auto share_at = [&](rlim_t soft) -> std::optional<std::size_t> {
    if (was.rlim_max != RLIM_INFINITY && soft > was.rlim_max) return std::nullopt;
    rlimit now = was;
    now.rlim_cur = soft;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &now) == 0);
    const std::size_t share = remote::open_file_share();
    REQUIRE(setrlimit(RLIMIT_NOFILE, &was) == 0);
    return share;
  };
  // (Each limit the hard limit allows: a soft limit may not go above it.)
  for (const auto& [soft, share] : std::vector<std::pair<rlim_t, std::size_t>>{
           {100, kMinRequestsInFlight}, {256, kMinRequestsInFlight}, {1000, 250}, {1203, 300}, {8000, kMaxRequestsInFlight}}) {
    CAPTURE(soft);
    if (const auto got = share_at(soft)) CHECK(*got == share);
    else MESSAGE("the hard open-file limit " << was.rlim_max << " is under " << soft << ": not checked there");
  }
  CHECK(remote::open_file_share() == std::clamp<std::size_t>(static_cast<std::size_t>(was.rlim_cur == RLIM_INFINITY ? ~rlim_t{0} : was.rlim_cur / 4),
                                                              kMinRequestsInFlight, kMaxRequestsInFlight));
}

TEST_CASE("remote.task_thread.runs_tasks_in_order_then_inline_after_shutdown") {
  std::vector<int> ran;
  remote::task_thread t("pinfeed-test");
  for (int i = 0; i < 100; ++i) t.post([&ran, i] { ran.push_back(i); });
  t.post([] { throw std::runtime_error("a task's failure stays in the task"); });
  t.shutdown();  // runs what is queued first
  REQUIRE(ran.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(ran[i] == i);
  t.post([&ran] { ran.push_back(-1); });
  CHECK(ran.back() == -1);
}
