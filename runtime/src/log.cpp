#include "pinfeed/runtime/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace pinfeed {
namespace {

constexpr const char* kNames[] = {"error", "warn", "info", "debug"};

/// The level PINFEED_LOG_LEVEL names; a value that names none is reported once, on stderr (the
/// sink may not be set yet), and the default stays.
log_level level_from_env() {
  const char* v = std::getenv("PINFEED_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return log_level::info;
  for (int i = 0; i < 4; ++i)
    if (std::strcmp(v, kNames[i]) == 0) return static_cast<log_level>(i);
  std::fprintf(stderr, "pinfeed [warn] PINFEED_LOG_LEVEL='%s' is not a level (error, warn, info, debug): using info\n", v);
  return log_level::info;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

/// The sink and the lock that makes its calls one at a time.
struct sink_state {
  std::mutex mutex;
  log_sink sink;
};
sink_state& sinks() {
  static sink_state s;
  return s;
}

}  // namespace

std::string to_string(log_level level) {
  const int i = static_cast<int>(level);
  return i >= 0 && i < 4 ? kNames[i] : "log_level(" + std::to_string(i) + ")";
}

void set_log_level(log_level level) noexcept { level_ref().store(static_cast<int>(level)); }
log_level get_log_level() noexcept { return static_cast<log_level>(level_ref().load()); }

log_sink set_log_sink(log_sink sink) {
  auto& s = sinks();
  std::lock_guard lock(s.mutex);
  return std::exchange(s.sink, std::move(sink));
}

void log(log_level level, std::string_view message) noexcept {
  if (static_cast<int>(level) > level_ref().load(std::memory_order_relaxed)) return;
  // A sink that logs through pinfeed again would wait on its own lock: that message goes to stderr.
  static thread_local bool in_sink = false;
  auto& s = sinks();
  if (!in_sink) {
    std::lock_guard lock(s.mutex);
    if (s.sink) {
      in_sink = true;
      try {
        s.sink(level, message);
        in_sink = false;
        return;
      } catch (...) {  // a failing sink must not fail the caller: the message goes to stderr instead
      }
      in_sink = false;
    }
  }
  static std::mutex stderr_mutex;
  std::lock_guard lock(stderr_mutex);
  std::fprintf(stderr, "pinfeed [%s] %.*s\n", kNames[static_cast<int>(level)], static_cast<int>(message.size()),
               message.data());
}

}  // namespace pinfeed
