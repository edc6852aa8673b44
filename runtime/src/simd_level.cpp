#include "pinfeed/runtime/random.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace {

simd_level detect() noexcept {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return simd_level::avx512;
  if (__builtin_cpu_supports("avx2")) return simd_level::avx2;
#endif
  return simd_level::scalar;  // other CPUs run the portable paths (same bits)
}

/// The CPU's level, capped by PINFEED_SIMD when it is set. A bad value is reported and ignored here
/// (this runs inside noexcept calls); the command line checks it up front with parse_simd_level().
simd_level initial_level() noexcept {
  const simd_level cpu = cpu_simd_support();
  const char* env = std::getenv("PINFEED_SIMD");
  if (env == nullptr || *env == '\0') return cpu;
  try {
    const simd_level want = parse_simd_level(env);
    if (static_cast<int>(want) > static_cast<int>(cpu))
      log(log_level::warn, std::string("PINFEED_SIMD=") + env + ": this CPU supports " + to_string(cpu) +
                               " at most; using " + to_string(cpu));
    return static_cast<simd_level>(std::min(static_cast<int>(want), static_cast<int>(cpu)));
  } catch (const std::exception& e) {
    log(log_level::error, std::string(e.what()) + "; using " + to_string(cpu));
    return cpu;
  }
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

}  // namespace

simd_level parse_simd_level(std::string_view name) {
  if (name == "scalar") return simd_level::scalar;
  if (name == "avx2") return simd_level::avx2;
  if (name == "avx512") return simd_level::avx512;
  throw pinfeed::invalid_argument("SIMD level '" + std::string(name) + "' is not one of scalar, avx2, avx512");
}

simd_level cpu_simd_support() noexcept {
  static const simd_level level = detect();
  return level;
}
void set_simd_level(simd_level level) noexcept {
  level_ref().store(std::min(static_cast<int>(level), static_cast<int>(cpu_simd_support())), std::memory_order_relaxed);
}
simd_level simd_level_in_use() noexcept { return static_cast<simd_level>(level_ref().load(std::memory_order_relaxed)); }
std::string to_string(simd_level level) {
  switch (level) {
    case simd_level::scalar: return "scalar";
    case simd_level::avx2: return "avx2";
    case simd_level::avx512: return "avx512";
  }
  return "?";
}

}  // namespace pinfeed
