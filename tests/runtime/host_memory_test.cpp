// host_memory (runtime).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/node_plan.hpp"
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

TEST_CASE("host_memory.buffers_on_a_numa_node") {
  // The node this process's own pages land on (one it may use): a buffer bound there has every
  // page there, first to last. Where the kernel does not say (qemu-user, a seccomp profile that
  // refuses get_mempolicy), the node cannot be read back: the buffer is still checked to work.
  const host_buffer probe(page_size(), false);
  std::memset(probe.data(), 1, page_size());
  const int node = numa_node_of(probe.data());
  if (node < 0) MESSAGE("the kernel does not say which NUMA node a page is on here: placement not read back");
  const unsigned on = node < 0 ? 0u : static_cast<unsigned>(node);
  constexpr std::size_t kBytes = 3 * 1024 * 1024 + 100;
  host_buffer h(kBytes, false, on);
  REQUIRE(h.data() != nullptr);
  CHECK(h.size() == kBytes);
  CHECK(reinterpret_cast<std::uintptr_t>(h.data()) % page_size() == 0);
  if (node >= 0) {
    CHECK(numa_node_of(h.data()) == node);
    CHECK(numa_node_of(h.data() + kBytes - 1) == node);
  }
  std::memset(h.data(), 5, kBytes);
  host_buffer moved(std::move(h));
  CHECK(moved.data()[kBytes - 1] == std::byte{5});
  moved = host_buffer();  // unmapped (ASan and LeakSanitizer see no leak)
  // A node that does not exist: the kernel refuses the binding, the buffer is made all the same.
  host_buffer anywhere(8192, false, 1000u);
  REQUIRE(anywhere.data() != nullptr);
  std::memset(anywhere.data(), 1, 8192);
  if (node >= 0) CHECK(numa_node_of(anywhere.data()) >= 0);
  // Pinned on a node needs a GPU (cudaHostRegister); without one it fails as cudaHostAlloc does.
  if (!cuda_devices().usable) CHECK_THROWS_AS(host_buffer(4096, true, 0u), cuda_error);
}

TEST_CASE("host_memory.scoped_cpu_binding_runs_a_thread_on_its_cpus_and_gives_them_back") {
  const std::vector<unsigned> before = thread_cpus();
  REQUIRE(!before.empty());
  {
    const scoped_cpu_binding bound({before.back()});
    CHECK(thread_cpus() == std::vector<unsigned>{before.back()});
    CHECK(bound.bound() == (before.size() > 1));  // one CPU already: nothing to change
  }
  CHECK(thread_cpus() == before);
  {
    const scoped_cpu_binding outside({100000u});  // not in the mask: the thread stays where it is
    CHECK_FALSE(outside.bound());
    CHECK(thread_cpus() == before);
  }
  const scoped_cpu_binding none({});
  CHECK_FALSE(none.bound());
}
