#pragma once
// One parser for the indices that come as text (cuda:N, the launchers' rank variables).

#include <climits>
#include <string_view>

namespace pinfeed::detail {

/// `text` as a decimal integer in [0, INT_MAX], or -1 when it is not exactly one (empty, a sign,
/// spaces, other characters, too large).
inline long parse_index(std::string_view text) noexcept {
  if (text.empty() || text.size() > 10) return -1;
  long value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value <= INT_MAX ? value : -1;
}

}  // namespace pinfeed::detail
