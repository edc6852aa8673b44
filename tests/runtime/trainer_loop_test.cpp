// A trainer's loop: held batches that would hang are refused at once, epochs that know about
// resume, typed views of the fields, and a log sink the trainer owns.
#include <doctest/doctest.h>

#include <atomic>
#include <new>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/random.hpp"
#include "loader_fixtures.hpp"
#include "test_util.hpp"

using namespace pinfeed;

TEST_CASE("loader.epochs.resume_then_the_readme_loop_delivers_the_rest_once") {
  const auto all = test::uninterrupted_small(3);  // 13 batches an epoch
  REQUIRE(all.size() == 39);
  // A first run stops after epoch 1's batch 3 (4 batches taken) and saves its state.
  std::string state;
  {
    loader l(test::small_source(100), test::shuffled_small(8, 2));
    for (std::uint32_t e : l.epochs(3)) {
      std::size_t taken = 0;
      for (batch& b : l) {
        (void)b;
        if (e == 1 && ++taken == 4) break;
      }
      if (e == 1) break;
    }
    state = l.state();
  }
  const std::vector<std::string> rest(all.begin() + 13 + 4, all.end());
  SUBCASE("the epochs range") {
    loader l(test::small_source(100), test::shuffled_small(8, 1));
    l.resume(state);
    std::vector<std::string> got;
    std::vector<std::uint32_t> epochs;
    for (std::uint32_t e : l.epochs(3)) {
      epochs.push_back(e);
      for (batch& b : l) got.push_back(checksum_line(b));
    }
    CHECK(epochs == std::vector<std::uint32_t>{1, 2});
    CHECK(got == rest);
  }
  SUBCASE("start_epoch(e) at each epoch's top keeps the resumed position") {
    loader l(test::small_source(100), test::shuffled_small(8, 2));
    l.resume(state);
    std::vector<std::string> got;
    for (std::uint32_t e = l.epoch(); e < 3; ++e) {
      l.start_epoch(e);
      while (auto b = l.next()) got.push_back(checksum_line(*b));
    }
    CHECK(got == rest);
  }
  SUBCASE("start_epoch(e, 0) is an explicit restart") {
    loader l(test::small_source(100), test::shuffled_small(8, 2));
    l.resume(state);
    l.start_epoch(1, 0);
    std::vector<std::string> got;
    while (auto b = l.next()) got.push_back(checksum_line(*b));
    CHECK(got == std::vector<std::string>(all.begin() + 13, all.begin() + 26));
  }
  // The first batch after resume(), one batch taken (or not), then start_epoch(e).
  const auto first_after = [&](bool take_one, std::uint32_t e) {
    loader l(test::small_source(100), test::shuffled_small(8, 2));
    l.resume(state);
    if (take_one) REQUIRE(l.next());
    l.start_epoch(e);
    auto b = l.next();
    REQUIRE(b);
    return checksum_line(*b);
  };
  SUBCASE("once a batch is taken, start_epoch(e) restarts the epoch") { CHECK(first_after(true, 1) == all[13]); }
  SUBCASE("another epoch than the resumed one starts from its first batch") { CHECK(first_after(false, 2) == all[26]); }
  SUBCASE("the resumed epoch itself goes on at the saved batch") { CHECK(first_after(false, 1) == all[13 + 4]); }
}

TEST_CASE("loader.epochs.range_on_a_new_loader_and_at_its_end") {
  loader l(test::small_source(100), test::shuffled_small(8, 2));
  std::vector<std::string> got;
  std::vector<std::uint32_t> seen;
  for (std::uint32_t e : l.epochs(3)) {
    seen.push_back(e);
    while (auto b = l.next()) got.push_back(checksum_line(*b));
  }
  CHECK(seen == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(got == test::uninterrupted_small(3));
  // At epoch 2's end: epochs(3) is empty, epochs(4) continues with epoch 3 from its start after
  // the finished epoch 2 (which yields nothing more).
  std::size_t steps = 0;
  for (std::uint32_t e : l.epochs(3)) {
    (void)e;
    ++steps;
  }
  CHECK(steps == 1);  // epoch 2 itself, finished: its loop body sees no batch
  std::vector<std::uint32_t> more;
  for (std::uint32_t e : l.epochs(4)) {
    std::size_t n = 0;
    while (auto b = l.next()) ++n;
    if (n > 0) more.push_back(e);
  }
  CHECK(more == std::vector<std::uint32_t>{3});
  // A loader set to start at epoch 5 by its options: epochs(5) is empty.
  auto o = test::shuffled_small(8, 2);
  o.epoch = 5;
  loader late(test::small_source(100), o);
  std::size_t none = 0;
  for (std::uint32_t e : late.epochs(5)) none += e + 1;
  CHECK(none == 0);
}

TEST_CASE("batch.typed_field_views_check_the_dtype_and_slice_samples") {
  loader l(test::small_source(20), test::cpu_loader(8, 1, 3));
  auto b = l.next();
  REQUIRE(b);
  const auto pixels = b->field<std::uint8_t>("pixels");
  CHECK(pixels.size() == 8);
  CHECK(pixels.sample_elements() == 6);
  CHECK(pixels.shape() == std::vector<std::int64_t>{8, 2, 3});
  CHECK(pixels.elements().size() == 48);
  CHECK(pixels.data() == b->field("pixels").data);
  std::vector<std::byte> expect(6);
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    fill_random_bytes(philox_stream(3, 0, b->indices()[i]), expect);
    const auto s = pixels.sample(i);
    REQUIRE(s.size() == 6);
    CHECK(std::memcmp(s.data(), expect.data(), 6) == 0);
  }
  const auto labels = b->field<const std::int64_t>("label");
  CHECK(labels.sample_elements() == 1);
  for (std::size_t i = 0; i < labels.size(); ++i)
    CHECK(labels.sample(i)[0] == static_cast<std::int64_t>(b->indices()[i] % 10));
  CHECK_THROWS_WITH_AS((void)pixels.sample(8), "typed_view::sample: index 8 is past the view's 8 samples",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS((void)b->field<float>("pixels"), "batch field 'pixels' holds uint8, not float32",
                       std::invalid_argument);
  CHECK_THROWS_AS((void)b->field<std::uint8_t>("nope"), std::out_of_range);
  // The last, partial batch: 20 = 8 + 8 + 4.
  (void)l.next();
  auto last = l.next();
  REQUIRE(last);
  CHECK(last->field<std::int64_t>("label").size() == 4);
  CHECK_THROWS_AS((void)last->field<std::int64_t>("label").sample(4), std::out_of_range);
}

TEST_CASE("log.a_sink_gets_the_messages_and_the_default_comes_back") {
  struct entry {
    log_level level;
    std::string message;
  };
  std::mutex m;
  std::vector<entry> got;
  const log_level was = get_log_level();
  set_log_level(log_level::info);
  log_sink previous = set_log_sink([&](log_level level, std::string_view message) {
    std::lock_guard lock(m);
    got.push_back({level, std::string(message)});
  });
  CHECK_FALSE(static_cast<bool>(previous));  // the default was in place
  log(log_level::warn, "from the test");
  log(log_level::debug, "not enabled");
  // Messages from other threads arrive one at a time.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) log(log_level::info, "thread " + std::to_string(t));
    });
  for (auto& t : threads) t.join();
  // A sink that throws, or logs itself, never fails the caller.
  set_log_sink([](log_level, std::string_view) { throw std::runtime_error("sink down"); });
  log(log_level::error, "to stderr instead");
  set_log_sink([](log_level, std::string_view) { log(log_level::error, "from inside the sink"); });
  log(log_level::error, "nested");
  CHECK(static_cast<bool>(set_log_sink({})));  // back to stderr
  set_log_level(was);
  std::lock_guard lock(m);
  REQUIRE(got.size() == 201);
  CHECK(got[0].level == log_level::warn);
  CHECK(got[0].message == "from the test");
  for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i].message.rfind("thread ", 0) == 0);
  CHECK(to_string(log_level::debug) == "debug");
}

TEST_CASE("log.once_logs_the_first_call_only_and_never_throws") {
  std::vector<std::string> got;
  const log_level was = get_log_level();
  set_log_level(log_level::info);
  (void)set_log_sink([&](log_level, std::string_view message) { got.emplace_back(message); });
  std::atomic<bool> said{false};
  int made = 0;
  for (int i = 0; i < 3; ++i) log_once(said, log_level::warn, [&] { return "warning " + std::to_string(++made); });
  CHECK(made == 1);  // the message is not even made again
  std::atomic<bool> other{false};
  CHECK_NOTHROW(log_once(other, log_level::warn, []() -> std::string { throw std::bad_alloc(); }));
  CHECK(other.load());  // left out, and not tried again
  (void)set_log_sink({});
  set_log_level(was);
  CHECK(got == std::vector<std::string>{"warning 1"});
}

TEST_CASE("loader.stats_summary_per_epoch") {
  loader l(test::small_source(100), test::shuffled_small(8, 2));
  std::vector<std::string> lines;
  for (std::uint32_t e : l.epochs(2)) {
    (void)e;
    for (batch& b : l) (void)b;
    const stats_snapshot s = l.stats();
    CHECK(s.batches == 13);
    CHECK(s.samples == 100);
    lines.push_back(s.summary());
    l.reset_stats();
  }
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines) {
    CHECK(line.rfind("batches 13, samples 100, errors 0", 0) == 0);
    CHECK(line.find("consumer wait") != std::string::npos);
    CHECK(line.find('\n') == std::string::npos);
  }
  CHECK(l.stats().to_string().find(l.stats().summary().substr(0, 20)) != std::string::npos);
}
