// The suggestions' runs, judged: a change that names a setting is kept as advice only when the
// full pipeline, run with it, gained beyond the noise of the two measurements.
#include <algorithm>
#include <cmath>

#include "analysis.hpp"
#include "trials.hpp"

namespace pinfeed::analysis {

std::string setting_text(const std::string& setting, std::uint64_t value) {
  if (setting == "remote_cache_bytes") return "shard cache " + std::to_string(value >> 20) + " MiB";
  if (setting == "requests_in_flight") return "requests in flight " + std::to_string(value);
  return setting + " " + std::to_string(value);
}

void judge_trial(doctor_suggestion& s, const doctor_mode& l0) {
  s.measured = s.trial.ran && s.trial.images_per_s > 0 && l0.ran && l0.images_per_s > 0;
  if (!s.measured) {
    if (s.result.empty()) s.result = "not measured";
    return;
  }
  // As the stages are priced: the time per image must fall by more than twice the two runs'
  // combined noise (standard errors), and by 2% at least.
  const double before = 1e3 / l0.images_per_s, after = 1e3 / s.trial.images_per_s;  // ms per image
  const double noise = 2.0 * std::hypot(l0.noise_ms_per_image, s.trial.noise_ms_per_image);
  s.gain = s.trial.images_per_s / l0.images_per_s - 1.0;
  s.significant = before - after > noise && s.gain >= 0.02;
  const double noise_share = noise / before;
  s.result = setting_text(s.setting, s.value) + ": " + (s.gain >= 0 ? "+" : "") + pct(s.gain) + " images/s (" +
             num(l0.images_per_s, 1) + " -> " + num(s.trial.images_per_s, 1) + "), wait " + pct(l0.consumer_wait) + " -> " +
             pct(s.trial.consumer_wait) +
             (s.significant ? std::string() : "; no gain beyond the noise (+-" + pct(noise_share) + ")");
}

void keep_measured_gains(doctor_report& r) {
  const auto no_gain = [](const doctor_suggestion& s) { return s.measured && !s.significant; };
  for (const auto& s : r.suggestions)
    if (no_gain(s)) r.no_gain.push_back(s);
  r.suggestions.erase(std::remove_if(r.suggestions.begin(), r.suggestions.end(), no_gain), r.suggestions.end());
}

}  // namespace pinfeed::analysis
