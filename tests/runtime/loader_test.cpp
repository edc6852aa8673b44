#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <map>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include <mutex>
#include <set>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/global_control.h>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/random.hpp"
#include "loader_fixtures.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {

using test::kFeatures;
using test::produce_reference;
using test::reference_fields;

/// A source with random per-sample delays (from the sample's own stream, up to `max_delay_us`).
std::shared_ptr<source> delayed_source(std::uint64_t n, int max_delay_us) {
  return make_source(n, reference_fields(), [max_delay_us](sample& s) {
    if (max_delay_us > 0) {
      const auto us = s.rng(7).below(static_cast<std::uint32_t>(max_delay_us));
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    produce_reference(s);
  });
}

/// The bytes a single-threaded loop writes for sample i, laid out as the batch's fields.
struct expected_sample {
  std::vector<std::byte> data;
  std::int64_t id;
  float noise;
};
expected_sample reference(std::uint64_t seed, std::uint32_t epoch, std::uint64_t i) {
  const auto fields = reference_fields();
  expected_sample e{std::vector<std::byte>(kFeatures), 0, 0};
  std::byte* bufs[3] = {e.data.data(), reinterpret_cast<std::byte*>(&e.id), reinterpret_cast<std::byte*>(&e.noise)};
  sample s(i, epoch, seed, fields, bufs);
  produce_reference(s);
  return e;
}

void check_batch_against_reference(const batch& b, std::uint64_t seed, std::uint32_t epoch, std::size_t batch_size) {
  REQUIRE(b.location().where == memory_location::kind::host);
  const auto data = b.field("data");
  const auto id = b.field("id");
  const auto noise = b.field("noise");
  REQUIRE(data.shape == std::vector<std::int64_t>{static_cast<std::int64_t>(b.size()), kFeatures});
  REQUIRE(id.shape == std::vector<std::int64_t>{static_cast<std::int64_t>(b.size())});
  CHECK(data.as<std::uint8_t>() == data.data);
  CHECK_THROWS_WITH_AS((void)noise.as<double>(), doctest::Contains("holds float32, not float64"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)id.as<std::int32_t>(), doctest::Contains("holds int64, not int32"), std::invalid_argument);
  for (std::size_t j = 0; j < b.size(); ++j) {
    const std::uint64_t i = b.index() * batch_size + j;
    REQUIRE(b.indices()[j] == i);
    const auto e = reference(seed, epoch, i);
    REQUIRE(std::memcmp(static_cast<std::byte*>(data.data) + j * kFeatures, e.data.data(), kFeatures) == 0);
    REQUIRE(id.as<const std::int64_t>()[j] == e.id);  // the typed accessor, checked against int64
    float got;
    std::memcpy(&got, static_cast<float*>(noise.data) + j, sizeof got);
    REQUIRE(std::memcmp(&got, &e.noise, sizeof got) == 0);
  }
}

loader_options cpu_options(std::size_t batch, std::size_t workers, std::size_t prefetch = 3) {
  return pinfeed::test::cpu_loader(batch, workers, 2024, prefetch);
}

}  // namespace

TEST_CASE("loader.order_cursor_walks_this_ranks_order") {
  // Each sample's cursor is its place in the loader's order: the index there is its own, and the
  // positions around it (and the next epoch's) are the order's.
  const epoch_order_options shuffled{true, 1, 2, false};
  std::mutex m;
  std::vector<std::string> problems;
  std::uint64_t seen = 0;
  const auto src = make_source(30, reference_fields(), [&](sample& s) {
    produce_reference(s);
    const auto c = s.order();
    std::lock_guard lock(m);
    ++seen;
    if (!c) return problems.push_back("no cursor for sample " + std::to_string(s.index()));
    const epoch_order o(30, 7, shuffled);
    if (c->epoch() != s.epoch() || c->epoch_size() != o.size(s.epoch())) problems.push_back("epoch or size");
    if (c->index_at(c->position()) != s.index()) problems.push_back("own position");
    if (c->index_at(c->epoch_size()).has_value()) problems.push_back("past the end");
    if (c->index_at(s.epoch() + 1, 0) != o.index_at(s.epoch() + 1, 0)) problems.push_back("next epoch");
  });
  loader_options opts = cpu_options(4, 2);
  opts.seed = 7;
  opts.order = shuffled;
  loader l(src, opts);
  for (std::uint32_t e = 0; e < 2; ++e) {
    l.start_epoch(e);
    while (l.next()) {
    }
  }
  CHECK(seen == 2 * 15);
  CHECK(problems.empty());
}

TEST_CASE("loader.passes.each_start_of_an_epoch_is_a_pass_of_its_own") {
  // Every sample of one start carries its number; another start, of the same epoch or by another
  // loader, has another; a sample outside a loader has 0, and a stand-in shares its place's.
  std::mutex m;
  std::vector<std::uint64_t> seen;
  const auto src = make_source(24, reference_fields(), [&](sample& s) {
    produce_reference(s);
    std::lock_guard lock(m);
    REQUIRE(s.order());
    seen.push_back(s.order()->pass());
  });
  auto passes_of = [&](loader& l, std::uint32_t epoch) {
    seen.clear();
    l.start_epoch(epoch);
    while (l.next()) {
    }
    return std::set<std::uint64_t>(seen.begin(), seen.end());
  };
  loader a(src, cpu_options(5, 2)), b(src, cpu_options(5, 2));
  const auto first = passes_of(a, 0), again = passes_of(a, 0), other = passes_of(b, 0), next = passes_of(a, 1);
  REQUIRE(first.size() == 1);
  REQUIRE(again.size() == 1);
  REQUIRE(other.size() == 1);
  REQUIRE(next.size() == 1);
  const std::set<std::uint64_t> all{*first.begin(), *again.begin(), *other.begin(), *next.begin()};
  CHECK(all.size() == 4);
  CHECK(all.count(0) == 0);
  const auto fields = reference_fields();
  expected_sample e{std::vector<std::byte>(kFeatures), 0, 0};
  std::byte* bufs[3] = {e.data.data(), reinterpret_cast<std::byte*>(&e.id), reinterpret_cast<std::byte*>(&e.noise)};
  sample outside(3, 0, 1, fields, bufs);
  CHECK_FALSE(outside.order());
  seen.clear();
  {
    loader c(make_source(8, reference_fields(), [&](sample& s) {
               sample stand_in(4, 0, 1, fields, bufs);  // written to by no one: only placed
               stand_in.share_place(s);
               produce_reference(s);
               std::lock_guard lock(m);
               seen.push_back(stand_in.order() && stand_in.order()->pass() == s.order()->pass() &&
                                      stand_in.order()->position() == s.order()->position()
                                  ? 1
                                  : 0);
             }),
             cpu_options(4, 1));
    while (c.next()) {
    }
  }
  CHECK(seen == std::vector<std::uint64_t>(8, 1));
}

TEST_CASE("loader.order.random_delays_1_2_8_workers") {
  for (std::size_t workers : {1, 2, 8}) {
    CAPTURE(workers);
    loader l(delayed_source(203, 400), cpu_options(8, workers));
    std::uint64_t expect = 0;
    while (auto b = l.next()) {
      REQUIRE(b->index() == expect);
      check_batch_against_reference(*b, 2024, 0, 8);
      ++expect;
    }
    CHECK(expect == 26);  // 203 = 25 * 8 + 3: the last batch is partial
    CHECK(l.stats().samples == 203);
  }
}

TEST_CASE("loader.workers.tbb_thread_cap_belongs_to_the_application") {
  using tbb::global_control;
  const std::size_t cap = global_control::active_value(global_control::max_allowed_parallelism);
  const std::size_t allowed = cap > 1 ? cap - 1 : 1;
  // Counts the distinct threads that produced samples; each sample sleeps so that tasks overlap.
  auto run = [](std::size_t workers, std::size_t& reported) {
    std::mutex m;
    std::set<std::thread::id> threads;
    auto src = make_source(96, reference_fields(), [&](sample& s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      produce_reference(s);
      std::lock_guard lock(m);
      threads.insert(std::this_thread::get_id());
    });
    loader l(src, cpu_options(32, workers));
    reported = l.workers();
    std::uint64_t batches = 0;
    while (auto b = l.next()) {
      check_batch_against_reference(*b, 2024, 0, 32);
      ++batches;
    }
    CHECK(batches == 3);
    return threads.size();
  };
  SUBCASE("more workers than the cap: the loader runs what TBB allows and leaves the cap alone") {
    std::size_t reported = 0;
    const std::size_t used = run(allowed + 3, reported);
    CHECK(reported == allowed);
    CHECK(used <= reported);
    CHECK(global_control::active_value(global_control::max_allowed_parallelism) == cap);
  }
  SUBCASE("up to the cap, every worker asked for runs") {
    std::size_t reported = 0;
    const std::size_t used = run(allowed, reported);
    CHECK(reported == allowed);
    if (allowed >= 2) CHECK(used >= 2);
    CHECK(used <= allowed);
  }
  SUBCASE("the loader follows the cap the application holds") {
    const global_control lower(global_control::max_allowed_parallelism, 3);  // the lowest control wins
    std::size_t reported = 0;
    const std::size_t used = run(8, reported);
    CHECK(reported == 2);
    CHECK(used <= 2);
  }
  CHECK(global_control::active_value(global_control::max_allowed_parallelism) == cap);
}

TEST_CASE("loader.contents.bit_identical_for_any_worker_count") {
  std::vector<std::string> lines_by_workers[3];
  int k = 0;
  for (std::size_t workers : {1, 2, 8}) {
    auto o = cpu_options(16, workers, 2);
    loader l(delayed_source(100, 50), o);
    for (std::uint32_t e = 0; e < 2; ++e) {
      l.start_epoch(e);
      while (auto b = l.next()) lines_by_workers[k].push_back(checksum_line(*b));
    }
    ++k;
  }
  CHECK(lines_by_workers[0].size() == 14);
  CHECK(lines_by_workers[0] == lines_by_workers[1]);
  CHECK(lines_by_workers[0] == lines_by_workers[2]);
  // Epochs differ: each sample's stream depends on the epoch.
  CHECK(lines_by_workers[0][0].substr(lines_by_workers[0][0].find(" data=")) !=
        lines_by_workers[0][7].substr(lines_by_workers[0][7].find(" data=")));
}

TEST_CASE("loader.epochs.drop_last_partial_and_restart") {
  SUBCASE("drop_last drops the partial batch") {
    auto o = cpu_options(8, 2);
    o.drop_last = true;
    loader l(delayed_source(203, 0), o);
    CHECK(l.batches_per_epoch() == 25);
    std::size_t n = 0;
    while (auto b = l.next()) {
      CHECK(b->size() == 8);
      ++n;
    }
    CHECK(n == 25);
    CHECK_FALSE(l.next().has_value());  // stays at the end
  }
  SUBCASE("start_epoch mid-epoch restarts cleanly; start at a batch resumes") {
    auto o = cpu_options(4, 2);
    o.max_batches_in_use = 2;  // `first` and `second` are held while the next batch is asked for
    loader l(delayed_source(64, 100), o);
    auto first = l.next();
    REQUIRE(first);
    auto second = l.next();
    l.start_epoch(3, 5);  // cancel epoch 0 with work in flight
    CHECK(l.epoch() == 3);
    auto b = l.next();
    REQUIRE(b);
    CHECK(b->index() == 5);
    CHECK(b->epoch() == 3);
    check_batch_against_reference(*b, 2024, 3, 4);
    // Batches held from the cancelled epoch stay valid.
    check_batch_against_reference(*first, 2024, 0, 4);
    check_batch_against_reference(*second, 2024, 0, 4);
  }
}

TEST_CASE("loader.range_for_over_epochs") {
  loader l(delayed_source(50, 0), cpu_options(8, 2));
  for (std::uint32_t e = 0; e < 2; ++e) {
    l.start_epoch(e);
    std::uint64_t expect = 0, samples = 0;
    for (batch& b : l) {
      CHECK(b.index() == expect++);
      CHECK(b.epoch() == e);
      check_batch_against_reference(b, 2024, e, 8);
      samples += b.size();
    }
    CHECK(expect == 7);
    CHECK(samples == 50);
  }
}

TEST_CASE("loader.errors.exception_reaches_consumer_at_its_batch") {
  auto src = make_source(64, reference_fields(), [](sample& s) {
    if (s.index() == 37) throw std::runtime_error("disk on fire");
    produce_reference(s);
  });
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    loader l(src, cpu_options(8, workers));
    for (std::uint64_t b = 0; b < 4; ++b) REQUIRE(l.next()->index() == b);
    try {
      (void)l.next();
      FAIL("batch 4 holds sample 37 and must throw");
    } catch (const sample_error& e) {
      CHECK(e.index() == 37);
      CHECK(e.stage() == "produce");
      CHECK(e.message() == "disk on fire");
      CHECK(std::string(e.what()).find("sample 37") != std::string::npos);
      CHECK(std::string(e.what()).find("disk on fire") != std::string::npos);
    }
    // The loader stays usable: the next batch follows.
    auto b5 = l.next();
    REQUIRE(b5);
    CHECK(b5->index() == 5);
    check_batch_against_reference(*b5, 2024, 0, 8);
    CHECK(l.stats().errors == 1);
  }
}

TEST_CASE("loader.errors.lowest_failing_index_is_reported_and_non_std_exceptions") {
  auto src = make_source(16, reference_fields(), [](sample& s) {
    if (s.index() == 13) throw 42;  // not a std::exception
    if (s.index() == 11) throw std::invalid_argument("bad 11");
    produce_reference(s);
  });
  loader l(src, cpu_options(16, 2));
  try {
    (void)l.next();
    FAIL("must throw");
  } catch (const sample_error& e) {
    CHECK(e.index() == 11);
    CHECK(e.message() == "bad 11");
  }
  CHECK(l.stats().errors == 2);
  CHECK_FALSE(l.next().has_value());
}

TEST_CASE("loader.memory.arena_fixed_and_rss_flat_over_100k_samples") {
  auto src = make_source(100000, reference_fields(), produce_reference);
  auto o = cpu_options(64, 2, 4);
  loader l(src, o);
  const std::size_t arena = l.host_bytes();
  CHECK(arena == l.slots() * l.slot_bytes());
  CHECK(l.slots() == o.prefetch + o.max_batches_in_use);
  std::size_t rss_after_warmup = 0;
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    seen += b->size();
    if (b->index() == 100) rss_after_warmup = test::rss_bytes();
    REQUIRE(l.host_bytes() == arena);
  }
  CHECK(seen == 100000);
  const std::size_t rss_end = test::rss_bytes();
  MESSAGE("RSS after 6.4k samples: ", rss_after_warmup / 1024, " KiB; after 100k: ", rss_end / 1024, " KiB");
  // Flat: no growth with the dataset (a leak of even 100 bytes a sample would add 9 MiB). The
  // sanitizers' own bookkeeping grows a little with the threads' history.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr std::size_t slack = 6u << 20;
#else
  constexpr std::size_t slack = 2u << 20;
#endif
  CHECK(rss_end <= rss_after_warmup + slack);
  const auto st = l.stats();
  CHECK(st.samples == 100000);
  CHECK(st[stage::produce].count == 100000);
  CHECK(st.host_bytes == arena);
}

TEST_CASE("loader.shutdown.destroy_mid_epoch_under_load_100_times") {
  std::atomic<int> in_flight{0};
  std::atomic<bool> loader_alive{false};
  std::atomic<int> calls_after_destroy{0};
  auto src = make_source(1u << 20, reference_fields(), [&](sample& s) {
    if (!loader_alive.load()) ++calls_after_destroy;
    ++in_flight;
    std::this_thread::sleep_for(std::chrono::microseconds(s.rng(3).below(300)));
    produce_reference(s);
    --in_flight;
  });
  test::run_with_timeout(std::chrono::seconds(240), [&] {
    for (int round = 0; round < 100; ++round) {
      {
        loader_alive = true;
        loader l(src, cpu_options(16, 1 + round % 4, 1 + round % 3));
        const int take = round % 5;  // 0: destroyed before the first batch was even asked for
        for (int i = 0; i < take; ++i) REQUIRE(l.next());
        if (round % 2) l.start_epoch(1);  // restart with work in flight, then destroy
      }
      loader_alive = false;
      REQUIRE(in_flight.load() == 0);  // the destructor waited for every running sample
    }
  }, "100 loader destructions");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls_after_destroy.load() == 0);
  CHECK(in_flight.load() == 0);
}

TEST_CASE("loader.batches_and_dlpack_outlive_loader") {
  std::optional<batch> kept;
  DLManagedTensor* dl = nullptr;
  {
    loader l(delayed_source(40, 0), cpu_options(8, 2, 1));
    kept = l.next();
    auto b1 = l.next();
    REQUIRE(b1);
    dl = b1->to_dlpack("data");
    b1->release();  // the DLPack view still holds the slot
    CHECK_FALSE(static_cast<bool>(*b1));
    CHECK_THROWS_AS((void)b1->size(), std::logic_error);
    // With max_batches_in_use = 1 and prefetch = 1 there are 2 slots; one is held by `kept`, one by
    // the DLPack view: the loader stalls rather than overwrite them. Destroying it must not hang.
  }
  check_batch_against_reference(*kept, 2024, 0, 8);
  REQUIRE(dl != nullptr);
  CHECK(dl->dl_tensor.ndim == 2);
  CHECK(dl->dl_tensor.shape[0] == 8);
  CHECK(dl->dl_tensor.shape[1] == kFeatures);
  CHECK(dl->dl_tensor.dtype.code == kDLUInt);
  CHECK(dl->dl_tensor.dtype.bits == 8);
  CHECK(dl->dl_tensor.device.device_type == kDLCPU);
  CHECK(dl->dl_tensor.strides == nullptr);
  const auto e = reference(2024, 0, 8);  // first sample of batch 1
  CHECK(std::memcmp(dl->dl_tensor.data, e.data.data(), kFeatures) == 0);
  dl->deleter(dl);
}

TEST_CASE("loader.dlpack.types_and_slot_held_until_deleter") {
  loader l(delayed_source(64, 0), cpu_options(8, 2, 1));
  auto b0 = l.next();
  DLManagedTensor* id = b0->to_dlpack("id");
  DLManagedTensor* noise = b0->to_dlpack("noise");
  CHECK(id->dl_tensor.dtype.code == kDLInt);
  CHECK(id->dl_tensor.dtype.bits == 64);
  CHECK(id->dl_tensor.ndim == 1);
  CHECK(noise->dl_tensor.dtype.code == kDLFloat);
  CHECK(noise->dl_tensor.dtype.bits == 32);
  CHECK_THROWS_AS((void)b0->to_dlpack("nope"), std::out_of_range);
  b0.reset();
  // Consume more batches through the one remaining slot: the held slot is never rewritten.
  for (int i = 0; i < 5; ++i) REQUIRE(l.next());
  const auto* ids = static_cast<const std::int64_t*>(id->dl_tensor.data);
  for (int j = 0; j < 8; ++j) CHECK(ids[j] == j);
  id->deleter(id);
  noise->deleter(noise);
  while (l.next()) {
  }
}

TEST_CASE("loader.stats_and_trace") {
  auto o = cpu_options(8, 2);
  o.trace = true;
  loader l(delayed_source(64, 200), o);
  while (auto b = l.next()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto st = l.stats();
  CHECK(st.batches == 8);
  CHECK(st.samples == 64);
  CHECK(st[stage::produce].count == 64);
  CHECK(st[stage::consumer_wait].count == 8);
  CHECK(st[stage::wait_slot].count == 8);
  CHECK(st[stage::copy].count == 0);  // CPU path: no copy stage
  CHECK(st.wall_ns > 0);
  CHECK(st.consumer_wait_fraction() >= 0.0);
  CHECK(st.consumer_wait_fraction() <= 1.0);
  CHECK(st.bytes > 64 * (kFeatures + 8 + 4) - 1);
  CHECK(st.to_string().find("produce") != std::string::npos);

  const auto j = nlohmann::json::parse(l.trace()->to_json());
  REQUIRE(j.contains("traceEvents"));
  std::map<std::string, int> names;
  for (const auto& ev : j["traceEvents"]) {
    CHECK(ev["ph"] == "X");
    CHECK(ev["dur"].get<double>() >= 0.0);
    names[ev["name"].get<std::string>()]++;
  }
  CHECK(names["produce"] == 64);
  CHECK(names["consumer_wait"] == 8);
  CHECK(names["wait_slot"] == 8);
  l.reset_stats();
  CHECK(l.stats().samples == 0);

  loader no_trace(delayed_source(8, 0), cpu_options(8, 1));
  CHECK(no_trace.trace() == nullptr);
  CHECK_THROWS_AS(no_trace.write_trace("/tmp/x.json"), std::logic_error);
  CHECK_THROWS_WITH_AS(l.write_trace("/nonexistent-dir/t.json"), doctest::Contains("/nonexistent-dir/t.json"),
                       std::runtime_error);
}

TEST_CASE("loader.bad_input") {
  auto src = delayed_source(10, 0);
  auto expect_invalid = [&](loader_options o, const char* needle) {
    CAPTURE(needle);
    CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains(needle), std::invalid_argument);
  };
  auto o = cpu_options(4, 1);
  o.batch_size = 0;
  expect_invalid(o, "batch_size");
  o = cpu_options(4, 1);
  o.prefetch = 0;
  expect_invalid(o, "prefetch");
  o = cpu_options(4, 1);
  o.max_batches_in_use = 0;
  expect_invalid(o, "max_batches_in_use");
  o = cpu_options(4, 1);
  o.workers = 5000;
  expect_invalid(o, "5000");
  o = cpu_options(4, 1);
  // A bad device spelling fails where the option is set, before any loader exists.
  CHECK_THROWS_WITH_AS(o.device = "gpu7", doctest::Contains("gpu7"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(o.device = "cuda:x", doctest::Contains("cuda:x"), std::invalid_argument);
  o = cpu_options(20, 1);
  o.drop_last = true;
  expect_invalid(o, "fewer than batch_size 20");
  o = cpu_options(4, 1);
  o.after_copy = [](std::size_t, cudaStream_t) {};  // no copy on the CPU path: a hook on it is an error
  expect_invalid(o, "after_copy hooks the host-to-device copy, but batches stay on the cpu: nothing is copied");

  CHECK_THROWS_WITH_AS(loader(nullptr, cpu_options(4, 1)), doctest::Contains("null"), std::invalid_argument);
  auto empty = make_source(0, reference_fields(), produce_reference, "empty-set");
  CHECK_THROWS_WITH_AS(loader(empty, cpu_options(4, 1)), doctest::Contains("empty-set"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_source(4, {{"a", dtype::u8, {3, 0}}}, produce_reference),
                       doctest::Contains("extent 0"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_source(4, {{"deep", dtype::u8, {1, 1, 1, 1, 1, 1, 1, 1}}}, produce_reference),
                       doctest::Contains("'deep' has 8 dimensions; at most 7"), std::invalid_argument);
  tensor_shape full{1, 2, 3, 4, 5, 6, 7, 8};  // a batch of rank-7 samples: the most a view holds
  CHECK(full.size() == tensor_shape::kCapacity);
  CHECK(full == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK_THROWS_AS(full.push_back(9), std::length_error);
  CHECK_THROWS_WITH_AS(make_source(4, {{"a", dtype::u8, {3}}, {"a", dtype::u8, {}}}, produce_reference),
                       doctest::Contains("'a' is declared twice"), std::invalid_argument);
  CHECK_THROWS_AS(make_source(4, {}, produce_reference), std::invalid_argument);
  CHECK_THROWS_AS(make_source(4, reference_fields(), nullptr), std::invalid_argument);

  // Field access errors inside a source surface as sample errors naming the field.
  auto wrong = make_source(4, reference_fields(), [](sample& s) { (void)s.as<std::int32_t>("id"); });
  loader lw(wrong, cpu_options(4, 1));
  CHECK_THROWS_WITH_AS((void)lw.next(), doctest::Contains("field 'id' has element type int64"), sample_error);
  loader l(src, cpu_options(4, 1));
  CHECK_THROWS_AS(l.start_epoch(0, 99), std::out_of_range);

  if (!cuda_devices().usable) {
    o = cpu_options(4, 1);
    o.device = "cuda:0";
    CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("no CUDA device is usable"), std::runtime_error);
  }
}

TEST_CASE("loader.cpu_only_path_end_to_end_with_auto_device") {
  if (cuda_devices().usable) {
    test::skip_case("a GPU is present: the auto device is CUDA, covered by the gpu suite");
    return;
  }
  auto o = cpu_options(8, 2);
  o.device = "auto";
  loader l(delayed_source(50, 0), o);
  CHECK_FALSE(l.device().is_cuda());
  CHECK(l.stream() == nullptr);
  CHECK(l.device_bytes() == 0);
  std::size_t n = 0;
  while (auto b = l.next()) {
    CHECK(b->ready_event() == nullptr);
    check_batch_against_reference(*b, 2024, 0, 8);
    n += b->size();
  }
  CHECK(n == 50);
}

TEST_CASE("loader.release_after_on_the_cpu_path_releases") {
  // One slot for the consumer: the next batch can only come once release_after() returned it.
  auto o = test::cpu_loader(4, 2, 5);
  o.max_batches_in_use = 1;
  loader l(make_source(32, {{"x", dtype::u8, {8}}}, [](sample& s) { s.bytes(0)[0] = std::byte{1}; }), o);
  std::size_t n = 0;
  test::run_with_timeout(std::chrono::seconds(30), [&] {
    while (auto b = l.next()) {
      n += b->size();
      b->release_after(nullptr);
      CHECK(!*b);
      b->release_after(nullptr);  // an empty batch: nothing to do
    }
  }, "release_after on CPU batches");
  CHECK(n == 32);
}

namespace {
/// The reference source, with memory() and limit_memory() that throw on request.
class memory_throwing_source final : public source {
 public:
  enum class fails { none, limit, report, report_non_std };
  explicit memory_throwing_source(fails f) : fails_(f), base_(make_source(32, reference_fields(), produce_reference)) {}
  std::uint64_t size() const override { return base_->size(); }
  std::vector<field_spec> fields() const override { return base_->fields(); }
  void produce(sample& s) override { base_->produce(s); }
  std::vector<memory_use> memory() const override {
    ++reports;
    if (fails_ == fails::report) throw std::runtime_error("cache size unknown");
    if (fails_ == fails::report_non_std) throw 7;
    return {{"sample cache", 1u << 20}};
  }
  void limit_memory(std::uint64_t bytes) override {
    if (fails_ == fails::limit) throw std::invalid_argument("cannot shrink below " + std::to_string(bytes + 1));
    limit = bytes;
  }
  fails fails_;
  mutable int reports = 0;
  std::uint64_t limit = 0;

 private:
  std::shared_ptr<source> base_;
};
}  // namespace

TEST_CASE("loader.callbacks.a_source_whose_memory_calls_throw_fails_construction_with_its_exception") {
  // memory() and limit_memory() run in the loader's constructor: what they throw leaves it as
  // thrown (no loader, nothing held), and the same source then serves a loader once it stops.
  using fails = memory_throwing_source::fails;
  loader_options o = cpu_options(8, 2);
  o.memory_budget = 64u << 20;
  auto src = std::make_shared<memory_throwing_source>(fails::limit);
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("cannot shrink below"), std::invalid_argument);
  src->fails_ = fails::report;
  CHECK_THROWS_WITH_AS(loader(src, o), "cache size unknown", std::runtime_error);
  src->fails_ = fails::report_non_std;
  try {
    loader l(src, o);
    FAIL("memory()'s exception must leave the constructor");
  } catch (int v) {
    CHECK(v == 7);
  }
  CHECK(src.use_count() == 1);  // no loader kept a reference
  src->fails_ = fails::none;
  loader l(src, o);
  CHECK(src->limit > 0);
  CHECK(src->limit < o.memory_budget.value());
  std::size_t batches = 0;
  while (auto b = l.next()) {
    check_batch_against_reference(*b, o.seed, 0, o.batch_size);
    ++batches;
  }
  CHECK(batches == 32 / 8);
}

namespace {
/// A batch's samples against the reference, by the indices it holds (any order, any epoch).
void check_samples_against_reference(const std::byte* data, const std::int64_t* ids, std::span<const std::uint64_t> indices,
                                     std::uint64_t seed, std::uint32_t epoch) {
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const auto e = reference(seed, epoch, indices[j]);
    REQUIRE(ids[j] == e.id);
    REQUIRE(std::memcmp(data + j * kFeatures, e.data.data(), kFeatures) == 0);
  }
}
}  // namespace

TEST_CASE("loader.cancel.destroyed_at_random_points_with_batches_and_views_held") {
  // Each seed draws a loader (batch size, workers fixed or auto, prefetch fixed or auto, shuffle,
  // how many batches the consumer may hold), a run (batches taken, some held, some handed out as
  // DLPack views, a restart of the epoch, a state()/resume() round trip) and a moment to destroy
  // it (at once, or after a random wait while the workers and the tuner are busy). After each
  // destruction no sample is still being produced and none starts later; every batch and view the
  // consumer kept still holds the reference bytes; the views' deleters run on another thread.
  // PINFEED_CANCEL_SEEDS sets the count (default 200); run it under ASan and TSan too
  // (scripts/test.sh --sanitize address|thread).
  const char* env = std::getenv("PINFEED_CANCEL_SEEDS");
  const int seeds = env != nullptr ? std::atoi(env) : 200;
  REQUIRE(seeds > 0);
  std::atomic<int> in_flight{0};
  std::atomic<bool> loader_alive{false};
  std::atomic<int> calls_after_destroy{0};
  auto src = make_source(4096, reference_fields(), [&](sample& s) {
    if (!loader_alive.load()) ++calls_after_destroy;
    ++in_flight;
    std::this_thread::sleep_for(std::chrono::microseconds(s.rng(3).below(150)));
    produce_reference(s);
    --in_flight;
  });
  constexpr std::uint64_t kSeed = 2024;
  int restarts = 0, resumes = 0, views_kept = 0, batches_kept = 0;
  test::run_with_timeout(std::chrono::seconds(300), [&] {
    for (int seed = 0; seed < seeds; ++seed) {
      CAPTURE(seed);
      std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 0x9e3779b97f4a7c15ull + 1);
      const auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
      loader_options o = pinfeed::test::cpu_loader(4 + pick(13), 1 + pick(4), kSeed, 1 + pick(3));
      if (pick(3) == 0) o.workers = auto_tune;
      if (pick(3) == 0) o.prefetch = auto_tune;
      o.order.shuffle = pick(2) == 1;
      o.max_batches_in_use = 1 + pick(3);
      struct kept_batch {
        batch b;
        std::uint32_t epoch;
      };
      struct kept_view {
        DLManagedTensor* data;
        DLManagedTensor* id;
        std::vector<std::uint64_t> indices;
        std::uint32_t epoch;
      };
      std::vector<kept_batch> batches;
      std::vector<kept_view> views;
      {
        loader_alive = true;
        loader l(src, o);
        std::uint32_t epoch = 0;
        std::size_t held = 0;  // batches and views that count against max_batches_in_use
        const std::size_t take = pick(7);
        for (std::size_t t = 0; t < take; ++t) {
          if (pick(8) == 0) {
            l.start_epoch(++epoch);  // a restart with work in flight
            ++restarts;
          } else if (pick(8) == 0) {
            const std::string state = l.state();
            l.resume(state);  // the same place again: the feeder stops and starts over
            ++resumes;
          }
          if (held >= o.max_batches_in_use) break;  // the consumer holds all it may
          auto b = l.next();
          REQUIRE(b);
          CHECK(b->epoch() == epoch);
          switch (pick(3)) {
            case 0: break;  // released at once
            case 1:
              batches.push_back({std::move(*b), epoch});
              ++held;
              break;
            default: {
              kept_view v{b->to_dlpack("data"), b->to_dlpack("id"), {b->indices().begin(), b->indices().end()}, epoch};
              b->release();  // the views alone hold the slot now
              views.push_back(std::move(v));
              ++held;
            }
          }
        }
        const auto wait = pick(4);
        if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds(pick(3000)));
      }  // destroyed here, with workers, the feeder and perhaps the tuner busy
      loader_alive = false;
      REQUIRE(in_flight.load() == 0);
      for (const auto& k : batches) {
        const auto data = k.b.field("data");
        const auto id = k.b.field("id");
        check_samples_against_reference(static_cast<const std::byte*>(data.data), static_cast<const std::int64_t*>(id.data),
                                        k.b.indices(), kSeed, k.epoch);
        ++batches_kept;
      }
      std::thread deleters([&] {
        for (auto& v : views) {
          const auto at = [](const DLManagedTensor* t) {
            return static_cast<const std::byte*>(t->dl_tensor.data) + t->dl_tensor.byte_offset;
          };
          check_samples_against_reference(at(v.data), reinterpret_cast<const std::int64_t*>(at(v.id)), v.indices, kSeed,
                                          v.epoch);
          v.data->deleter(v.data);
          v.id->deleter(v.id);
          ++views_kept;
        }
      });
      deleters.join();
      batches.clear();  // the last owners of their slots
    }
  }, "loaders destroyed at random points");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(calls_after_destroy.load() == 0);
  CHECK(in_flight.load() == 0);
  MESSAGE(seeds, " seeds: ", restarts, " restarts, ", resumes, " resumes, ", batches_kept, " batches and ", views_kept,
          " DLPack views outlived their loader");
  if (seeds >= 50) {  // enough draws that each kind of interruption happened
    CHECK(restarts > 0);
    CHECK(resumes > 0);
    CHECK(batches_kept > 0);
    CHECK(views_kept > 0);
  }
}
