#pragma once
// Helpers shared by pinfeed's tests.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <unistd.h>

#include "pinfeed/runtime/device.hpp"

namespace pinfeed::test {

/// True when a CUDA device is usable; otherwise prints why the calling GPU case is skipped.
inline bool gpu_available(const char* what) {
  const auto& s = cuda_devices();
  if (!s.usable) {
    const std::string note = std::string("skipped (no GPU): ") + what + " - " + s.reason;
    MESSAGE(note);
  }
  return s.usable;
}

/// Resident set size of this process in bytes (Linux /proc/self/statm).
inline std::size_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Runs `fn` on another thread; fails the test (and aborts: a hung thread cannot be joined) if it
/// does not finish within `limit`.
inline void run_with_timeout(std::chrono::seconds limit, const std::function<void()>& fn, const char* what) {
  std::packaged_task<void()> task(fn);
  auto done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    FAIL_CHECK(what, " did not finish within ", limit.count(), " s (hang)");
    std::fflush(nullptr);
    std::abort();
  }
  t.join();
  done.get();  // rethrows
}

}  // namespace pinfeed::test
