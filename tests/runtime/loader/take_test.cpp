// The consumer's take (runtime/src/loader/take.cpp): next() refuses at once a call that could
// never be served (every slot held), and goes on once a batch is released; the interrupt hook.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "runtime/loader_fixtures.hpp"
#include "test_util.hpp"

using namespace pinfeed;

TEST_CASE("loader.held.one_more_than_allowed_throws_and_releasing_one_goes_on") {
  // prefetch 2 + max_batches_in_use 1: 3 slots. Before, the 4th held batch hung next() for good.
  for (std::size_t workers : {1u, 2u}) {
    CAPTURE(workers);
    loader reference(test::small_source(100), test::shuffled_small(8, workers));
    std::vector<std::string> expected;
    while (auto b = reference.next()) expected.push_back(checksum_line(*b));

    loader l(test::small_source(100), test::shuffled_small(8, workers));
    std::vector<std::string> got;
    std::optional<batch> kept = l.next();  // holds 0 at the call
    REQUIRE(kept);
    got.push_back(checksum_line(*kept));
    std::optional<batch> second = l.next();  // holds 1 (= max_batches_in_use) at the call: allowed
    REQUIRE(second);
    got.push_back(checksum_line(*second));
    try {
      (void)l.next();  // holds 2
      FAIL("next() with 2 batches held and max_batches_in_use 1 did not throw");
    } catch (const batches_held_error& e) {
      const std::string what = e.what();
      CHECK(e.held() == 2);
      CHECK(e.limit() == 1);
      CHECK(what.find("holds 2 batches") != std::string::npos);
      CHECK(what.find("max_batches_in_use is 1") != std::string::npos);
      CHECK(what.find("prefetch 2") != std::string::npos);
      CHECK(what.find("Release a batch") != std::string::npos);
    }
    CHECK(l.next_batch() == 2);  // nothing was consumed by the refused call
    // It is a std::logic_error (a usage error), and stays refused while nothing is released.
    CHECK_THROWS_AS((void)l.next(), std::logic_error);
    kept.reset();  // one back: the loop goes on, and the batches are those of a loop that held none
    while (auto b = l.next()) got.push_back(checksum_line(*b));
    CHECK(got == expected);
  }
}

TEST_CASE("loader.held.dlpack_views_count_as_held_batches") {
  loader l(test::small_source(64), test::shuffled_small(8, 2, 1));  // prefetch 1 + 1: 2 slots
  auto b0 = l.next();
  REQUIRE(b0);
  DLManagedTensor* view = b0->to_dlpack("pixels");
  b0.reset();  // the view still holds the slot
  auto b1 = l.next();  // 1 held at the call: allowed
  REQUIRE(b1);
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("holds 2 batches (batch objects, or DLPack views"),
                       batches_held_error);
  view->deleter(view);
  b1.reset();
  std::size_t rest = 0;
  while (auto b = l.next()) ++rest;
  CHECK(rest == 6);
}

TEST_CASE("loader.held.a_larger_max_batches_in_use_lets_a_trainer_keep_batches") {
  // Gradient accumulation over 4 batches: 3 are kept while the 4th is asked for.
  auto o = test::shuffled_small(8, 2);
  o.max_batches_in_use = 3;
  loader l(test::small_source(100), o);
  CHECK(l.slots() == 5);
  std::vector<batch> kept;
  std::vector<std::string> got;
  while (auto b = l.next()) {
    got.push_back(checksum_line(*b));
    kept.push_back(std::move(*b));
    if (kept.size() == 4) kept.clear();  // the optimizer step
  }
  CHECK(got == test::uninterrupted_small(1));
  // One more than that is refused.
  l.start_epoch(1, 0);
  kept.clear();
  for (int i = 0; i < 4; ++i) {
    auto b = l.next();
    REQUIRE(b);
    kept.push_back(std::move(*b));
  }
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("max_batches_in_use is 3"), batches_held_error);
}

TEST_CASE("loader.interrupt.a_waiting_next_throws_what_the_hook_throws_and_consumes_nothing") {
  // A source whose samples take 60 ms: next() waits, and the hook runs while it does (about every
  // 100 ms, no more often). Its exception leaves next() with nothing consumed; the next call
  // delivers the same batch, and the run's batches are those of a run without the hook.
  const auto slow = make_source(32, {{"pixels", dtype::u8, {2, 3}}, {"label", dtype::i64, {}}}, [](sample& s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    fill_random_bytes(s.rng(), s.bytes("pixels"));
    s.as<std::int64_t>("label")[0] = static_cast<std::int64_t>(s.index() % 10);
  });
  std::vector<std::string> expected;
  {
    loader reference(slow, test::shuffled_small(8, 1));
    while (auto b = reference.next()) expected.push_back(checksum_line(*b));
  }
  struct stop_asked : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  auto o = test::shuffled_small(8, 1);
  std::atomic<int> calls{0};
  std::atomic<bool> armed{true};
  const auto consumer = std::this_thread::get_id();
  std::atomic<bool> on_consumer{true};
  o.interrupt = [&] {
    ++calls;
    if (std::this_thread::get_id() != consumer) on_consumer = false;
    if (armed.exchange(false)) throw stop_asked("Ctrl-C");
  };
  const auto t0 = std::chrono::steady_clock::now();
  loader l(slow, o);
  CHECK_THROWS_AS((void)l.next(), stop_asked);  // 8 samples of 60 ms: the hook runs before the batch
  CHECK(l.next_batch() == 0);
  std::vector<std::string> got;
  while (auto b = l.next()) got.push_back(checksum_line(*b));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(got == expected);
  CHECK(calls.load() >= 2);  // it ran again while the later batches were waited for
  // About every 100 ms of waiting, not at every wake-up: a wait spent polling the hook would
  // hold a core (and a Python binding's GIL) for nothing. Each call follows 100 ms without news.
  MESSAGE(calls.load() << " calls in " << ms << " ms");
  CHECK(calls.load() <= ms / 100 + 1);
  CHECK(on_consumer.load());
}
