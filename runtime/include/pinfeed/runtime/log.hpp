#pragma once
/// @file log.hpp
/// Minimal leveled logging to stderr. The level comes from PINFEED_LOG_LEVEL
/// (error, warn, info, debug; default info) or from set_log_level().

#include <string_view>

namespace pinfeed {

enum class log_level { error = 0, warn = 1, info = 2, debug = 3 };

/// Sets the process-wide log level. Thread-safe.
void set_log_level(log_level level) noexcept;
[[nodiscard]] log_level get_log_level() noexcept;
/// Writes one line "pinfeed [level] message" to stderr if `level` is enabled. Thread-safe.
void log(log_level level, std::string_view message) noexcept;

}  // namespace pinfeed
