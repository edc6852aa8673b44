// stats (runtime).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/stats.hpp"
#include "pinfeed/runtime/tensor.hpp"
#include "pinfeed/version.hpp"
#include "test_util.hpp"

using namespace pinfeed;

using test::scoped_env;

TEST_CASE("stats.counters_and_fractions") {
  stage_stats s;
  s.add(stage::produce, 1000);
  s.add(stage::produce, 3000);
  s.add(stage::consumer_wait, 500);
  s.add_batch(4, 400);
  auto snap = s.snapshot();
  CHECK(snap[stage::produce].count == 2);
  CHECK(snap[stage::produce].total_ns == 4000);
  CHECK(snap[stage::produce].max_ns == 3000);
  snap.wall_ns = 1000;
  CHECK(snap.consumer_wait_fraction() == doctest::Approx(0.5));
  CHECK(snap.samples_per_s() == doctest::Approx(4e6));
  snap.wall_ns = 0;
  CHECK(snap.consumer_wait_fraction() == 0.0);
  trace_recorder t(2);
  t.record(stage::copy, 0, 10);
  t.record(stage::copy, 10, 10);
  t.record(stage::copy, 20, 10);
  CHECK(t.size() == 2);
  CHECK(t.dropped() == 1);
}
