// error (runtime).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

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

TEST_CASE("error.cuda_error_carries_call_location_and_message") {
  try {
    PINFEED_CUDA_TRY(cudaErrorInvalidValue);
    FAIL("must throw");
  } catch (const cuda_error& e) {
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(e.call() == "cudaErrorInvalidValue");
    CHECK(e.line() > 0);
    const std::string w = e.what();
    CHECK(w.find("cudaErrorInvalidValue") != std::string::npos);
    CHECK(w.find("error_test.cpp") != std::string::npos);
    CHECK(w.find(cudaGetErrorString(cudaErrorInvalidValue)) != std::string::npos);
  }
  // The nothrow variant only logs.
  CHECK_NOTHROW(PINFEED_CUDA_TRY_NOTHROW(cudaErrorInvalidValue));
  const sample_error se(12, "decode", "/data/x.jpg", "truncated");
  CHECK(std::string(se.what()) == "sample 12 (/data/x.jpg) failed in stage 'decode': truncated");
}

namespace {
/// Throws `e`, then catches it as a pinfeed::error and, in a second throw, as the standard base
/// `Std` and as a std::exception: each clause must see the same message.
template <class Std, class E>
void caught_by_every_root(const E& e) {
  CAPTURE(e.what());
  static_assert(std::is_base_of_v<pinfeed::error, E> && std::is_base_of_v<Std, E>);
  static_assert(std::is_convertible_v<const E*, const std::exception*>, "one std::exception base, unambiguous");
  static_assert(!std::is_base_of_v<std::exception, pinfeed::error>);
  int caught = 0;
  try {
    throw e;
  } catch (const pinfeed::error& r) {
    CHECK(std::string(r.what()) == e.what());
    ++caught;
  }
  try {
    throw e;
  } catch (const Std& r) {
    CHECK(std::string(r.what()) == e.what());
    ++caught;
  }
  try {
    throw e;
  } catch (const std::exception& r) {
    CHECK(std::string(r.what()) == e.what());
    ++caught;
  }
  CHECK(caught == 3);
}
}  // namespace

TEST_CASE("error.every_type_is_a_pinfeed_error_and_its_standard_base") {
  caught_by_every_root<std::invalid_argument>(pinfeed::invalid_argument("bad option"));
  caught_by_every_root<std::out_of_range>(pinfeed::out_of_range("index 9 of 3"));
  caught_by_every_root<std::length_error>(pinfeed::length_error("too many extents"));
  caught_by_every_root<std::logic_error>(pinfeed::logic_error("empty batch"));
  caught_by_every_root<std::runtime_error>(pinfeed::runtime_error("file gone"));
  caught_by_every_root<std::runtime_error>(cuda_error(cudaErrorInvalidValue, "call()", "f.cu", 3));
  caught_by_every_root<std::runtime_error>(sample_error(7, "decode", "a.jpg", "truncated"));
  caught_by_every_root<std::runtime_error>(fatal_error("budget"));
  caught_by_every_root<std::runtime_error>(loader_closed("closed"));
  caught_by_every_root<std::logic_error>(batches_held_error(3, 2, "held"));
}

TEST_CASE("error.api_failures_are_caught_as_pinfeed_error") {
  // A sample of the API's failure kinds, each caught by the one root clause and naming its cause.
  const auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const pinfeed::error& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  CHECK(message_of([] { (void)parse_bytes("12 parsecs"); }).find("12 parsecs") != std::string::npos);
  CHECK(message_of([] { (void)parse_dtype("float7"); }).find("float7") != std::string::npos);
  CHECK(message_of([] { tensor_shape s; for (int i = 0; i < 64; ++i) s.push_back(1); }).find("extents") !=
        std::string::npos);
  CHECK(message_of([] { (void)loader_config::read("/nonexistent/pinfeed.config"); })
            .find("/nonexistent/pinfeed.config") != std::string::npos);
  CHECK(message_of([] {
          batch b;
          (void)b.field("image");
        }).find("empty") != std::string::npos);
}
