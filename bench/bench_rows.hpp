#pragma once
// What every benchmark row carries besides its figure: the host it ran on and how it was built.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/runtime/random.hpp"

namespace pinfeed::bench {

/// `row` with cpu (model), simd (the level in use when the row is written), compiler and
/// build_type added.
[[nodiscard]] nlohmann::json with_host(nlohmann::json row);

/// The SIMD levels named by `names` ("scalar", "avx2", "avx512", or "all": every level this CPU
/// supports), in order; empty names: the level in use now. Throws std::invalid_argument for an
/// unknown name or a level this CPU does not support.
[[nodiscard]] std::vector<simd_level> simd_levels(const std::vector<std::string>& names);

/// This thread's CPU cycles in user space (perf_event_open), where the kernel and the machine let a
/// process count them (a VM often has no PMU; perf_event_paranoid above 2 refuses).
class cycle_counter {
 public:
  cycle_counter();
  ~cycle_counter();
  cycle_counter(const cycle_counter&) = delete;
  cycle_counter& operator=(const cycle_counter&) = delete;
  [[nodiscard]] bool readable() const { return fd_ >= 0; }
  /// Why not readable (the system call's error).
  [[nodiscard]] const std::string& why_not() const { return why_; }
  /// The count so far (0 where not readable).
  [[nodiscard]] std::uint64_t read() const;

 private:
  int fd_ = -1;
  std::string why_;
};

/// The median of `v` (the upper one of an even count); v must not be empty.
[[nodiscard]] inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Runs fn() once per level of `levels`, with that level in use, and restores the previous one.
template <class Fn>
void for_each_simd_level(const std::vector<simd_level>& levels, Fn&& fn) {
  const simd_level before = simd_level_in_use();
  try {
    for (const simd_level l : levels) {
      set_simd_level(l);
      fn();
    }
  } catch (...) {
    set_simd_level(before);
    throw;
  }
  set_simd_level(before);
}

}  // namespace pinfeed::bench
