#pragma once
// The doctor's analysis, inside: number formats, and the suggestion rules, each a small named
// function of the measured report (rules.cpp) that analyze() runs in order.

#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pinfeed/doctor/doctor.hpp"

namespace pinfeed::analysis {

/// "42%".
inline std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100.0 * f);
  return b;
}
/// `v` with `digits` after the point.
inline std::string num(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

/// `v` as a short figure: std::to_string's digits without trailing zeros ("15", "2.5").
inline std::string figure(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

/// What a rule reads: the report with its stages priced and bottleneck named, and the full
/// pipeline's measurement (L0).
struct evidence {
  const doctor_report& r;
  const doctor_mode& l0;
  /// Whether the bottleneck names `stage`.
  [[nodiscard]] bool named(std::string_view stage) const;
  /// The stage called `name` (one the ladder has).
  [[nodiscard]] const doctor_stage& stage(std::string_view name) const;
  /// "<what> costs X ms per image, Y% of the time per image" for `stage`.
  [[nodiscard]] std::string cost(std::string_view stage, const std::string& what, int digits = 3) const;
};

/// A suggestion rule: what to change, with the number behind it, or nothing when it does not apply.
struct rule {
  const char* name;
  std::optional<doctor_suggestion> (*advise)(const evidence&);
};

/// The rules, in the order their suggestions are listed.
[[nodiscard]] std::span<const rule> suggestion_rules();

}  // namespace pinfeed::analysis
