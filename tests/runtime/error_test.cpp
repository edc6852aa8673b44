// error (runtime).
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
