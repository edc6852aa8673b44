#pragma once
// Helpers shared by pinfeed's tests.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <list>
#include <future>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <filesystem>
#include <unistd.h>

#include <exception>
#include <optional>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/loader.hpp"

namespace pinfeed::test {

/// Loader options for a CPU-only test run.
inline loader_options cpu_loader(std::size_t batch, std::size_t workers, std::uint64_t seed, std::size_t prefetch = 2) {
  loader_options o;
  o.batch_size = batch;
  o.workers = workers;
  o.prefetch = prefetch;
  o.device = "cpu";
  o.seed = seed;
  return o;
}

/// Marks the running case skipped, with the reason (test_main.cpp): when every case a run ran was
/// skipped, the executable exits 77, which CTest reports as skipped, never as passed. The case
/// logs a MESSAGE "skipped: <reason>", and is not held to the rule that a case asserts something.
void skip_case(const std::string& reason);

/// True when a CUDA device is usable; otherwise skips the calling case (skip_case) with the reason
/// and returns false: the case returns at once. Where no device is usable test_main leaves the
/// suite "gpu" out of the run (doctest counts its cases skipped), so this guards a case run anyway.
inline bool gpu_available(const char* what) {
  const auto& s = cuda_devices();
  if (!s.usable) skip_case(std::string("no usable CUDA device for ") + what + " (" + s.reason + ")");
  return s.usable;
}

/// True when the CUDA device is GPGPU-Sim's functional simulator (tools/gpu-sim): its results are
/// the kernels' real results, but it has no speed, runs one operation at a time and is about a
/// million times slower than a GPU, so the GPU cases give it inputs small enough to simulate.
inline bool simulated_gpu() {
  const auto& s = cuda_devices();
  return s.usable && !s.devices.empty() && s.devices[0].name.rfind("GPGPU-Sim", 0) == 0;
}

/// True where the GPU cases take their small shapes: on the simulator, and where
/// PINFEED_TEST_SMALL_SHAPES=1 (the GPU runner's compute-sanitizer steps: the same kernel paths
/// at a bounded, counted amount of work, whatever the tool's slowdown).
inline bool small_gpu_shapes() {
  const char* v = std::getenv("PINFEED_TEST_SMALL_SHAPES");
  return simulated_gpu() || (v != nullptr && std::string(v) == "1");
}

/// `real` on a GPU, `simulated` where the cases take small shapes (small_gpu_shapes()).
template <class T>
T on_gpu_or_simulator(T real, T simulated) {
  return small_gpu_shapes() ? simulated : real;
}

/// On the simulator, skips the calling case (skip_case) because it needs what only a GPU has
/// (speed, real concurrency, sizes beyond simulation), and returns true: the case returns at once.
inline bool needs_real_gpu(const std::string& why) {
  if (!simulated_gpu()) return false;
  skip_case("needs a real GPU: " + why);
  return true;
}

/// Whether `device`'s primary context is active in this process (cuDevicePrimaryCtxGetState, reached
/// through the runtime); nullopt when the driver cannot be asked.
inline std::optional<bool> primary_context_active(int device) {
#if PINFEED_WITH_CUDA
  using get_state = int (*)(int, unsigned*, int*);  // CUresult (CUdevice, unsigned int*, int*)
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 7000, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess || fn == nullptr) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  unsigned flags = 0;
  int active = 0;
  if (reinterpret_cast<get_state>(fn)(device, &flags, &active) != 0) return std::nullopt;
  return active != 0;
#else
  (void)device;
  return std::nullopt;
#endif
}

/// For a case that checks that pinfeed on device 1 never touches device 0: skips it (skip_case)
/// and returns false unless there are two devices and device 0's primary context is not active
/// yet (an earlier case of the same process may have used it: then run the case alone).
inline bool device_one_with_device_zero_untouched() {
  if (cuda_devices().devices.size() < 2) {
    skip_case("needs two CUDA devices (the GPU simulator has them with GPGPUSIM_NUM_DEVICES=2)");
    return false;
  }
  const auto active = primary_context_active(0);
  if (!active) {
    skip_case("the driver cannot tell whether device 0's primary context is active");
    return false;
  }
  if (*active) {
    skip_case("device 0's primary context is already active in this process: run this case alone");
    return false;
  }
  return true;
}

/// Runs fn on a new thread that has never made a CUDA call (so no device is current on it) and
/// rethrows here what it threw.
template <class Fn>
void on_fresh_thread(Fn&& fn) {
  std::exception_ptr failure;
  std::thread([&] {
    try {
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
}

/// Resident set size of this process in bytes (Linux /proc/self/statm).
inline std::size_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// One checksum_line per batch of epochs `first` to `last`, each started anew.
inline std::vector<std::string> epoch_checksums(loader& l, std::uint32_t first, std::uint32_t last) {
  std::vector<std::string> lines;
  for (std::uint32_t e = first; e <= last; ++e) {
    l.start_epoch(e);
    while (auto b = l.next()) lines.push_back(checksum_line(*b));
  }
  return lines;
}

/// Resets the process's peak resident set (VmHWM) to its current size; false where the kernel
/// does not let it (then peak_rss_bytes() is the peak since the process started).
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  return static_cast<bool>(out << "5" << std::flush);
}

/// The process's peak resident set (VmHWM) in bytes; 0 where /proc does not say.
inline std::size_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<std::size_t>(std::stoull(line.substr(6))) * 1024;
  return 0;
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

/// Sets (value) or unsets (nullptr) an environment variable for a scope, then restores it.
struct scoped_env {
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

/// The variables of the launchers that loaders shard by (torchrun, Open MPI, Slurm).
inline constexpr const char* kLauncherVariables[] = {
    "RANK",          "WORLD_SIZE",   "LOCAL_RANK",    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

/// Clears every launcher variable for a scope (test_main clears them for the whole run; a case that
/// sets some and calls code that must see none uses this).
struct no_launcher {
  std::list<scoped_env> cleared;
  no_launcher() {
    for (const char* name : kLauncherVariables) cleared.emplace_back(name, nullptr);
  }
};

/// A fresh directory under the system's temp directory, removed with everything in it.
struct temp_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("pinfeed_test_" + std::to_string(::getpid()) + "_" +
                                std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

}  // namespace pinfeed::test
