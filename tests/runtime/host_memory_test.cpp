// host_memory (runtime).
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

TEST_CASE("host_memory.pageable_is_page_aligned_and_pinned_needs_gpu") {
  host_buffer h(10000, false);
  CHECK(reinterpret_cast<std::uintptr_t>(h.data()) % page_size() == 0);
  CHECK(h.size() == 10000);
  std::memset(h.data(), 7, h.size());
  host_buffer moved(std::move(h));
  CHECK(moved.data() != nullptr);
  CHECK(h.data() == nullptr);  // NOLINT: moved-from state is specified
  if (!cuda_devices().usable) CHECK_THROWS_AS(host_buffer(4096, true), cuda_error);
  host_buffer empty(0, false);
  CHECK(empty.data() == nullptr);
}
