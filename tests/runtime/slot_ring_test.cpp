#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "pinfeed/runtime/detail/slot_ring.hpp"
#include "test_util.hpp"

using pinfeed::detail::slot_ring;
using pinfeed::detail::slot_state;

TEST_CASE("slot_ring.cycle_through_every_state") {
  slot_ring ring(2);
  const auto s = ring.acquire(10);
  REQUIRE(s.has_value());
  CHECK(ring.state(*s) == slot_state::filling);
  CHECK(ring.seq(*s) == 10);
  ring.advance(*s, slot_state::filling, slot_state::filled);
  ring.advance(*s, slot_state::filled, slot_state::copying);
  ring.publish(*s, slot_state::copying);
  CHECK(ring.state(*s) == slot_state::ready);
  const auto t = ring.take(10);
  REQUIRE(t == s);
  CHECK(ring.state(*s) == slot_state::in_use);
  ring.release(*s);
  CHECK(ring.state(*s) == slot_state::free);
  CHECK(ring.count(slot_state::free) == 2);
}

TEST_CASE("slot_ring.wrong_transition_names_slot_and_states") {
  slot_ring ring(3);
  const auto s = ring.acquire(0);
  REQUIRE(s);
  try {
    ring.advance(*s, slot_state::filled, slot_state::ready);
    FAIL("expected std::logic_error");
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    CHECK(what.find("slot " + std::to_string(*s)) != std::string::npos);
    CHECK(what.find("expected state filled") != std::string::npos);
    CHECK(what.find("found filling") != std::string::npos);
  }
  CHECK_THROWS_AS(ring.release(*s), std::logic_error);  // not in use: cannot be released
  CHECK_THROWS_AS((void)ring.state(3), std::out_of_range);
  CHECK_THROWS_AS(slot_ring(0), std::invalid_argument);
}

TEST_CASE("slot_ring.acquire_waits_for_release_and_close_wakes") {
  slot_ring ring(1);
  auto s = ring.acquire(0);
  REQUIRE(s);
  std::atomic<bool> got{false};
  std::thread producer([&] {
    auto t = ring.acquire(1);
    got = t.has_value();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(got.load());  // the only slot is filling
  ring.advance(*s, slot_state::filling, slot_state::filled);
  ring.publish(*s, slot_state::filled);
  REQUIRE(ring.take(0) == s);
  ring.release(*s);
  producer.join();
  CHECK(got.load());

  // close() wakes a consumer waiting for a batch that never comes.
  std::optional<std::size_t> r = 7;
  std::thread consumer([&] { r = ring.take(99); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ring.close();
  consumer.join();
  CHECK_FALSE(r.has_value());
  CHECK_FALSE(ring.acquire(5).has_value());
  ring.reopen();
  CHECK(ring.count(slot_state::free) == 1);  // the filling slot was forced back to free
  CHECK(ring.acquire(5).has_value());
}

TEST_CASE("slot_ring.stress.never_two_owners") {
  // A producer acquires, workers fill, a consumer takes in order and releases at random times.
  // Every owner marks the slot it holds; a second simultaneous owner fails the test.
  constexpr std::size_t kSlots = 4;
  constexpr std::uint64_t kBatches = 3000;
  slot_ring ring(kSlots);
  std::vector<std::atomic<int>> owners(kSlots);
  std::atomic<int> violations{0};
  auto own = [&](std::size_t s) {
    if (owners[s].fetch_add(1) != 0) ++violations;
  };
  auto disown = [&](std::size_t s) { owners[s].fetch_sub(1); };

  pinfeed::test::run_with_timeout(std::chrono::seconds(120), [&] {
    std::thread producer([&] {
      for (std::uint64_t b = 0; b < kBatches; ++b) {
        auto s = ring.acquire(b);
        if (!s) return;
        own(*s);  // the producer hands the filling slot to a worker thread below
        disown(*s);
        // Two "workers" race to finish the slot; only the CAS winner publishes.
        std::atomic<int> done{0};
        auto finish = [&, slot = *s] {
          if (done.fetch_add(1) == 1) {
            own(slot);
            ring.advance(slot, slot_state::filling, slot_state::filled);
            if (slot % 2) {
              ring.advance(slot, slot_state::filled, slot_state::copying);
              disown(slot);
              ring.publish(slot, slot_state::copying);
            } else {
              disown(slot);
              ring.publish(slot, slot_state::filled);
            }
          }
        };
        std::thread w1(finish), w2(finish);
        w1.join();
        w2.join();
      }
    });
    std::mt19937 rng(1);
    std::vector<std::size_t> held;
    for (std::uint64_t b = 0; b < kBatches; ++b) {
      auto s = ring.take(b);
      REQUIRE(s);
      own(*s);
      held.push_back(*s);
      // Hold up to 2 batches, release in random order.
      while (held.size() > 2 || (!held.empty() && rng() % 3 == 0)) {
        const std::size_t k = rng() % held.size();
        disown(held[k]);
        ring.release(held[k]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (auto s : held) {
      disown(s);
      ring.release(s);
    }
    producer.join();
  }, "slot ring stress");
  CHECK(violations.load() == 0);
  CHECK(ring.count(slot_state::free) == kSlots);
}

TEST_CASE("slot_ring.hands_out_only_the_usable_slots") {
  slot_ring ring(4);
  CHECK(ring.usable() == 4);
  ring.set_usable(2);
  const auto a = ring.acquire(0), b = ring.acquire(1);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(*a < 2);
  CHECK(*b < 2);
  // Both usable slots are busy: acquire waits until set_usable() grows the ring.
  std::atomic<bool> got{false};
  std::optional<std::size_t> c;
  std::thread t([&] {
    c = ring.acquire(2);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());
  ring.set_usable(3);
  t.join();
  REQUIRE(c.has_value());
  CHECK(*c == 2);
  CHECK_THROWS_WITH_AS(ring.set_usable(0), "slot_ring: 0 usable slots asked for, the ring has 4", std::out_of_range);
  CHECK_THROWS_AS(ring.set_usable(5), std::out_of_range);
}
