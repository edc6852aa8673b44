#include "pinfeed/runtime/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pinfeed {
namespace {

log_level level_from_env() {
  const char* v = std::getenv("PINFEED_LOG_LEVEL");
  if (v == nullptr) return log_level::info;
  if (std::strcmp(v, "error") == 0) return log_level::error;
  if (std::strcmp(v, "warn") == 0) return log_level::warn;
  if (std::strcmp(v, "debug") == 0) return log_level::debug;
  return log_level::info;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

constexpr const char* kNames[] = {"error", "warn", "info", "debug"};

}  // namespace

void set_log_level(log_level level) noexcept { level_ref().store(static_cast<int>(level)); }
log_level get_log_level() noexcept { return static_cast<log_level>(level_ref().load()); }

void log(log_level level, std::string_view message) noexcept {
  if (static_cast<int>(level) > level_ref().load(std::memory_order_relaxed)) return;
  static std::mutex m;
  std::lock_guard lock(m);
  std::fprintf(stderr, "pinfeed [%s] %.*s\n", kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace pinfeed
