// checksum (runtime).
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

TEST_CASE("checksum.hash_bytes") {
  const char a[] = "pinfeed keeps gpus fed";
  CHECK(hash_bytes(a, sizeof a) == hash_bytes(a, sizeof a));
  char b[sizeof a];
  std::memcpy(b, a, sizeof a);
  b[20] ^= 1;
  CHECK(hash_bytes(a, sizeof a) != hash_bytes(b, sizeof b));
  CHECK(hash_bytes(a, 8) != hash_bytes(a, 9));  // the tail counts
  CHECK(hash_bytes(a, 0) != hash_bytes(a, 0, 1));
}
