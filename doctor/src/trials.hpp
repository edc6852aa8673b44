#pragma once
// The suggestions' runs (doctor_options::verify): what a run's change is called, how it is judged
// against the full pipeline (L0), and the advice kept.

#include <cstdint>
#include <string>

#include "pinfeed/doctor/doctor.hpp"

namespace pinfeed::analysis {

/// "prefetch 5", "workers 4", "requests in flight 8", "shard cache 64 MiB".
[[nodiscard]] std::string setting_text(const std::string& setting, std::uint64_t value);

/// Judges s.trial (the full pipeline with s's change) against `l0`: measured, gain, significant
/// and the result line, e.g. "prefetch 5: +12% images/s (410.2 -> 459.4), wait 24% -> 6%".
void judge_trial(doctor_suggestion& s, const doctor_mode& l0);

/// Moves the suggestions measured without a significant gain to r.no_gain.
void keep_measured_gains(doctor_report& r);

}  // namespace pinfeed::analysis
