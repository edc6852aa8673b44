#pragma once
// The launches of the batched job kernels (resize, augmentations, erasing): a job a blockIdx.y,
// 65535 of them at most a launch, the threads of the x blocks striding over the job's work.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops::detail {

inline constexpr std::size_t kMostJobsPerLaunch = 65535;  // gridDim.y

/// Throws the cuda_error of a failed launch of `kernel`, naming it, its grid and its first job.
[[noreturn]] inline void throw_launch_error(cuda_result code, const char* kernel, const dim3& grid, unsigned threads,
                                            std::size_t first, const char* file, int line) {
  const std::string what = std::string(kernel) + "<<<(" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + "), " +
                           std::to_string(threads) + ">>> (the jobs from " + std::to_string(first) + " on)";
  ::pinfeed::detail::throw_cuda_error(code, what.c_str(), file, line);
}

/// Launches `kernel` (its name, for errors) over `count` jobs, kMostJobsPerLaunch a launch:
/// launch(grid, first) for the jobs from `first` on, grid.y of them and grid.x the blocks of
/// `threads` that cover the most work units (units(i), of job i) of a job among them, at most 4 a
/// multiprocessor of the current device. A launch whose jobs have no units is left out. Each launch
/// is checked: a cuda_error names the kernel, its grid and its first job.
template <class Units, class Launch>
void launch_over_jobs(const char* kernel, std::size_t count, unsigned threads, Units&& units, Launch&& launch) {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  const std::uint64_t cap = 4 * static_cast<std::uint64_t>(multiprocessor_count(device));
  for (std::size_t first = 0; first < count; first += kMostJobsPerLaunch) {
    const std::size_t n = std::min(kMostJobsPerLaunch, count - first);
    std::uint64_t most = 0;
    for (std::size_t i = first; i < first + n; ++i) most = std::max<std::uint64_t>(most, units(i));
    if (most == 0) continue;
    const dim3 grid(static_cast<unsigned>(std::min<std::uint64_t>((most + threads - 1) / threads, cap)), static_cast<unsigned>(n));
    launch(grid, first);
    if (const cuda_result e = PINFEED_CUDART(cudaGetLastError)(); e != PINFEED_CUDART(cudaSuccess))
      throw_launch_error(e, kernel, grid, threads, first, __FILE__, __LINE__);
  }
}

}  // namespace pinfeed::ops::detail
