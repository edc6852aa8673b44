#pragma once
/// @file log.hpp
/// Leveled logging: to stderr by default, or to a sink the application sets. The level comes from
/// PINFEED_LOG_LEVEL (error, warn, info, debug; default info) or from set_log_level().

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

namespace pinfeed {

enum class log_level { error = 0, warn = 1, info = 2, debug = 3 };

/// "error", "warn", "info" or "debug".
[[nodiscard]] std::string to_string(log_level level);

/// Sets the process-wide log level. Thread-safe.
void set_log_level(log_level level) noexcept;
[[nodiscard]] log_level get_log_level() noexcept;

/// Where enabled messages go: called with the level and the message (no "pinfeed [level]" prefix,
/// no newline), from whatever thread logs (workers, the feeder, the consumer), one call at a time.
/// If it throws, that message goes to stderr instead (logging never fails the caller); a message
/// the sink itself logs through pinfeed goes to stderr too.
using log_sink = std::function<void(log_level level, std::string_view message)>;
/// Sends pinfeed's messages to `sink` from now on (a trainer's logger, a file, a test's list); an
/// empty sink restores the default, one line "pinfeed [level] message" on stderr. Thread-safe;
/// returns the sink it replaces (empty for the default).
log_sink set_log_sink(log_sink sink);

/// Sends `message` to the sink (stderr by default) if `level` is enabled. Thread-safe.
void log(log_level level, std::string_view message) noexcept;

/// Logs what `message()` makes the first time only (`done` remembers: one flag a warning, any
/// thread). Never throws: a message that cannot be made (memory) is left out.
template <class Message>
void log_once(std::atomic<bool>& done, log_level level, const Message& message) noexcept {
  if (done.exchange(true, std::memory_order_relaxed)) return;
  try {
    log(level, message());
  } catch (...) {
  }
}

}  // namespace pinfeed
