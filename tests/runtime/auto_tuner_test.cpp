#include <doctest/doctest.h>

#include "pinfeed/runtime/detail/auto_tuner.hpp"

using pinfeed::detail::auto_tuner;
using pinfeed::detail::tuner_window;

namespace {
/// A window of one second: `wait` of it the consumer waited, `busy` cores busy of `cores`.
tuner_window window(double rate, double wait, double busy, double cores = 8) {
  return {1.0, wait, busy, cores, static_cast<std::uint64_t>(rate)};
}
auto_tuner both(std::size_t workers_most, std::size_t prefetch_most, std::size_t workers = 1, std::size_t prefetch = 2) {
  return auto_tuner({true, true, workers_most, prefetch_most}, workers, prefetch);
}
}  // namespace

TEST_CASE("auto_tuner.grows_workers_while_the_consumer_waits_and_a_core_idles") {
  auto t = both(7, 8);
  CHECK(t.judge(window(1000, 0.5, 1.0)));  // waits half the time, 7 cores idle
  CHECK(t.workers() == 2);
  CHECK(t.prefetch() == 2);
  CHECK(t.reason().find("waited 50.0%") != std::string::npos);
  CHECK_FALSE(t.judge(window(1900, 0.3, 2.0)));  // 90% faster: kept, judged next window
  CHECK(t.workers() == 2);
  CHECK(t.reason().find("kept") != std::string::npos);
  CHECK(t.judge(window(1900, 0.3, 2.0)));
  CHECK(t.workers() == 3);
}

TEST_CASE("auto_tuner.a_growth_that_gains_under_5_percent_goes_back_and_becomes_a_ceiling") {
  auto t = both(7, 1, 3);  // prefetch cannot grow: only workers move
  CHECK(t.judge(window(1000, 0.5, 3.0)));
  CHECK(t.workers() == 4);
  CHECK(t.judge(window(1040, 0.5, 4.0)));  // +4%: back
  CHECK(t.workers() == 3);
  CHECK(t.reason().find("back to 3") != std::string::npos);
  // The consumer still waits and cores idle, but 4 was tried: nothing more to do.
  CHECK_FALSE(t.judge(window(1000, 0.5, 3.0)));
  CHECK(t.workers() == 3);
  CHECK(t.settled());
  // After kCeilingWindows the ceiling is tried again.
  for (std::uint64_t i = 0; i < auto_tuner::kCeilingWindows; ++i) (void)t.judge(window(1000, 0.5, 3.0));
  CHECK(t.workers() == 4);
}

TEST_CASE("auto_tuner.past_four_workers_it_grows_by_a_quarter_and_never_past_the_cap") {
  auto t = both(10, 1, 8);
  CHECK(t.judge(window(1000, 0.5, 8.0, 32)));
  CHECK(t.workers() == 10);  // 8 + 2
  CHECK_FALSE(t.judge(window(2000, 0.5, 10.0, 32)));  // kept
  CHECK_FALSE(t.judge(window(2000, 0.5, 10.0, 32)));  // at the cap: settled
  CHECK(t.workers() == 10);
}

TEST_CASE("auto_tuner.with_no_idle_core_it_tries_prefetch_instead") {
  auto t = both(7, 4, 2, 2);
  CHECK(t.judge(window(1000, 0.2, 7.8)));  // 0.2 cores idle
  CHECK(t.workers() == 2);
  CHECK(t.prefetch() == 3);
  CHECK(t.judge(window(1000, 0.2, 7.8)));  // no gain: back
  CHECK(t.prefetch() == 2);
  CHECK_FALSE(t.judge(window(1000, 0.2, 7.8)));
  CHECK(t.prefetch() == 2);
  CHECK(t.settled());
}

TEST_CASE("auto_tuner.gives_workers_back_when_the_consumer_never_waits") {
  auto t = both(7, 8, 4);
  CHECK_FALSE(t.judge(window(1000, 0.001, 4.0)));  // one calm window is not enough
  CHECK(t.judge(window(1000, 0.001, 4.0)));
  CHECK(t.workers() == 3);
  CHECK_FALSE(t.judge(window(1000, 0.002, 3.0)));  // still never waits: kept
  CHECK(t.judge(window(1000, 0.002, 3.0)));         // two calm windows again
  CHECK(t.workers() == 2);
  CHECK(t.judge(window(900, 0.2, 2.0)));  // now the consumer waits: back, and 3 is the floor
  CHECK(t.workers() == 3);
  for (int i = 0; i < 6; ++i) CHECK_FALSE(t.judge(window(1000, 0.0, 3.0)));
  CHECK(t.workers() == 3);
}

TEST_CASE("auto_tuner.tunes_only_what_it_is_given") {
  auto_tuner prefetch_only({false, true, 7, 8}, 3, 2);
  CHECK(prefetch_only.judge(window(1000, 0.5, 1.0)));  // cores idle, but workers are fixed
  CHECK(prefetch_only.workers() == 3);
  CHECK(prefetch_only.prefetch() == 3);
  auto_tuner workers_only({true, false, 7, 8}, 3, 2);
  for (int i = 0; i < 4; ++i) (void)workers_only.judge(window(1000, 0.0, 3.0));
  CHECK(workers_only.prefetch() == 2);
  CHECK(workers_only.workers() < 3);
}

TEST_CASE("auto_tuner.starts_within_its_bounds_and_ignores_empty_windows") {
  auto t = both(2, 3, 10, 10);
  CHECK(t.workers() == 2);
  CHECK(t.prefetch() == 3);
  CHECK_FALSE(t.judge(tuner_window{0.0, 0, 0, 8, 0}));
  CHECK(t.changes() == 0);
  CHECK(t.windows() == 1);
}

TEST_CASE("auto_tuner.a_kept_growth_is_a_floor_for_a_while") {
  auto t = both(7, 1, 1);
  CHECK(t.judge(window(1000, 0.5, 1.0)));
  CHECK(t.workers() == 2);
  CHECK_FALSE(t.judge(window(2000, 0.0, 2.0)));  // kept: 2 is the floor now
  for (std::uint64_t i = 0; i < auto_tuner::kCeilingWindows - 1; ++i) CHECK_FALSE(t.judge(window(2000, 0.0, 2.0)));
  CHECK(t.workers() == 2);
  // The floor has expired: two calm windows give a worker back.
  (void)t.judge(window(2000, 0.0, 2.0));
  (void)t.judge(window(2000, 0.0, 2.0));
  CHECK(t.workers() == 1);
}

TEST_CASE("auto_tuner.a_prefetch_that_cannot_be_allocated_is_a_ceiling") {
  auto t = both(2, 8, 2, 2);
  CHECK(t.judge(window(1000, 0.5, 2.0, 2)));  // no idle core: prefetch 3
  CHECK(t.prefetch() == 3);
  t.refuse_prefetch(2);
  CHECK(t.prefetch() == 2);
  CHECK_FALSE(t.judge(window(2000, 0.5, 2.0, 2)));  // no trial to judge, and 3 is out of reach
  CHECK(t.prefetch() == 2);
  CHECK(t.settled());
}
