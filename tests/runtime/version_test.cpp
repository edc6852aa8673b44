// version (runtime).
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

TEST_CASE("version.header_matches_the_project") {
  // pinfeed/version.hpp is generated from the project's version; the tool and the package agree.
  CHECK(PINFEED_VERSION == PINFEED_VERSION_MAJOR * 10000 + PINFEED_VERSION_MINOR * 100 + PINFEED_VERSION_PATCH);
  CHECK(std::string(PINFEED_VERSION_STRING) == std::to_string(PINFEED_VERSION_MAJOR) + "." +
                                                   std::to_string(PINFEED_VERSION_MINOR) + "." +
                                                   std::to_string(PINFEED_VERSION_PATCH));
}
