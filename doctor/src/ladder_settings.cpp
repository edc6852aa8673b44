// The ladder's settings: the tuning pass before the modes, and the suggestions' runs after them.
#include <algorithm>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "analysis.hpp"
#include "ladder.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "trials.hpp"

namespace pinfeed::doctor_run {

/// The full pipeline under a loader that tunes: runs until the tuner has settled and held three
/// windows (or max_tuning_seconds), then fixes the ladder's workers and prefetch to its choice.
/// With recommend, then times the full pipeline with them and with the settings it started from.
void ladder::tune() {
  loader_options start = loader_options_;
  start.trace = false;
  loader_options tuning = start;
  if (o_.recommend) tuning.workers = tuning.prefetch = auto_tune;
  const auto t0 = clock_type::now();
  {
    loader l(full_, tuning);
    std::optional<batch> current;
    std::uint64_t settled_at = 0;
    for (;;) {
      (void)loader_step(l, current, "the tuning pass");
      const auto t = l.tuning(false);  // once a batch: the settings, not the path
      if (t.settled && settled_at == 0) settled_at = t.windows;
      if ((settled_at != 0 && t.windows >= settled_at + 3) || seconds_since(t0) > o_.max_tuning_seconds) break;
    }
    current.reset();
    drain_consumer();
    r_.tuning = l.tuning();
  }
  r_.tuned = true;
  r_.tuning_seconds = seconds_since(t0);
  loader_options_.workers = r_.tuning.workers;
  loader_options_.prefetch = r_.tuning.prefetch;
  if (!o_.recommend) return;
  // The settings it started from: the caller's, or for auto the library's defaults.
  loader_options baseline = start;
  if (baseline.workers == auto_tune) baseline.workers = 0;
  if (baseline.prefetch == auto_tune) baseline.prefetch = loader_options{}.prefetch;
  doctor_mode tuned_pass{"tuned", "full pipeline, tuned settings"}, baseline_pass{"start", "full pipeline, settings given"};
  (void)run_measured(tuned_pass, full_, loader_options_);
  r_.baseline_workers = run_measured(baseline_pass, full_, baseline);
  r_.baseline_prefetch = baseline.prefetch;
  r_.compared = true;
  r_.tuned_images_per_s = tuned_pass.images_per_s;
  r_.baseline_images_per_s = baseline_pass.images_per_s;
  r_.expected_speedup = baseline_pass.images_per_s > 0 ? tuned_pass.images_per_s / baseline_pass.images_per_s : 0;
}

/// The loader for suggestion `s`'s run (trace off): the full pipeline with its workers or prefetch,
/// or over the remote reader made anew with its setting. A change that cannot be made (the loader
/// refuses the value, the reader cannot be made again) says why; a lack of memory stops the doctor.
ladder::trial_setup ladder::set_up_trial(const doctor_suggestion& s) {
  trial_setup t;
  loader_options lo = loader_options_;
  lo.trace = false;
  std::shared_ptr<source> src = full_;
  try {
    if (s.setting == "workers") {
      lo.workers = s.value;
    } else if (s.setting == "prefetch") {
      lo.prefetch = s.value;
    } else {
      t.remote = true;
      loaders::remote_change change;
      if (s.setting == "requests_in_flight") {
        // With range reads, the read-ahead the library gives that many requests (twice as many
        // samples), which the advice names beside them: requests in flight need samples to fetch.
        change.requests_in_flight = s.value;
        if (r_.fetch.window_shards == 0) change.read_ahead = std::max<std::uint64_t>(r_.fetch.read_ahead_depth, 2 * s.value);
      }
      if (s.setting == "remote_cache_bytes") change.cache_bytes = s.value;
      auto reader = p_.reader ? p_.reader->with_remote(change) : nullptr;
      if (!reader) {
        t.failed = "the reader has no setting '" + s.setting + "' to change";
        return t;
      }
      src = std::make_shared<loaders::pipeline_source>(std::move(reader), p_.steps, p_.source);
    }
    t.l.emplace(std::move(src), lo);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    t.failed = std::string("the change could not be made: ") + e.what();
  }
  return t;
}

const doctor_mode* ladder::control_for(bool remote) {
  const doctor_mode* l0 = r_.mode("L0");
  const bool traced = o_.trace_mode == "L0" && !o_.trace_path.empty();
  if (!remote && !traced) return l0;
  doctor_mode& c = remote ? fresh_control_ : untraced_control_;
  if (c.ran) return &c;
  c = doctor_mode{"S0", remote ? "unchanged, remote reader made anew" : "unchanged, untraced",
                  "nothing: the full pipeline as it is"};
  loader_options lo = loader_options_;
  lo.trace = false;
  std::shared_ptr<source> src = full_;
  if (remote) {
    auto reader = p_.reader ? p_.reader->with_remote(loaders::remote_change{}) : nullptr;
    if (!reader) return l0;
    src = std::make_shared<loaders::pipeline_source>(std::move(reader), p_.steps, p_.source);
  }
  (void)run_measured(c, std::move(src), lo);
  if (o_.on_mode) o_.on_mode(c);
  return &c;
}

/// Runs each suggestion that names a setting: the full pipeline with the change, as a mode of
/// its own (S1, ...), judged against L0 (or a control run where L0 is not comparable); the ones
/// that gain nothing move to no_gain. What the consumer's step throws reaches the caller.
void ladder::verify() {
  const doctor_mode* l0 = r_.mode("L0");
  if (l0 == nullptr || !l0->ran) return;
  std::size_t k = 0;
  for (doctor_suggestion& s : r_.suggestions) {
    if (s.setting.empty()) continue;
    s.trial = doctor_mode{"S" + std::to_string(++k), analysis::setting_text(s.setting, s.value),
                          "nothing: the full pipeline with the change"};
    trial_setup t = set_up_trial(s);
    if (!t.l) {
      s.result = "not measured: " + t.failed;
      continue;
    }
    if (s.setting == "workers" && t.l->workers() == r_.workers) {
      s.result = "not measured: the loader runs at most " + std::to_string(r_.workers) + " workers here (TBB's thread cap)";
      continue;
    }
    const std::size_t ran = measure_loader(s.trial, *t.l);
    t.l.reset();
    if (o_.on_mode) o_.on_mode(s.trial);
    const doctor_mode* against = control_for(t.remote);
    analysis::judge_trial(s, *against);
    if (against != l0) s.result += " (against " + against->name + ")";
    if (s.setting == "workers" && ran != s.value) s.result += " (the loader ran " + std::to_string(ran) + " workers: the most it may)";
  }
  r_.verified = true;
  analysis::keep_measured_gains(r_);
}

}  // namespace pinfeed::doctor_run
