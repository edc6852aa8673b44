// Cases for the assertion rule of the tests' main (test_main.cpp), run one at a time by
// assertion_probe_test.sh: a case that passes without a single assertion fails its run, naming it;
// one that asserts passes; one that records a skip is skipped (exit 77).
#include <doctest/doctest.h>

#include "test_util.hpp"

TEST_CASE("probe.passes_without_assertion") {
  const int x = 1 + 1;  // runs, checks nothing
  (void)x;
}

TEST_CASE("probe.asserts") { CHECK(1 + 1 == 2); }

TEST_CASE("probe.skips") { pinfeed::test::skip_case("the probe's own skip"); }
