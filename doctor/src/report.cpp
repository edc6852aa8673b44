// The doctor's analysis (stage costs, verdict, suggestions) and its text and JSON forms.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/remote.hpp"

namespace pinfeed {

namespace {

using analysis::num;
using analysis::pct;

/// Seconds per image of a mode that ran, else NaN.
double per_image(const doctor_mode* m) { return m != nullptr && m->ran && m->images_per_s > 0 ? 1.0 / m->images_per_s : NAN; }

/// The mode that stands for `id`: itself when it ran, else the one its note says it equals.
const doctor_mode* stand_in(const doctor_report& r, const std::string& id) {
  const doctor_mode* m = r.mode(id);
  if (m != nullptr && m->ran) return m;
  if (id == "L1") return stand_in(r, "L2");
  if (id == "L5" && !r.gpu) return stand_in(r, "L4");
  return nullptr;
}

/// The noise (standard error, s per image) of a mode that ran, else 0.
double noise_of(const doctor_mode* m) { return m != nullptr && m->ran ? m->noise_ms_per_image / 1e3 : 0.0; }

/// Each stage's cost: the time per image of its `from` mode less its `to` mode's (each mode, or the
/// one standing for it); a difference not above twice the two modes' combined noise is within
/// noise and costs 0. Shares over the list's positive total.
void price(const doctor_report& r, std::vector<doctor_stage>& stages) {
  double total = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const doctor_mode* from = stand_in(r, stages[i].from);
    const doctor_mode* to = stand_in(r, stages[i].to);
    const double d = per_image(from) - per_image(to);
    const double e_from = noise_of(from), e_to = noise_of(to);
    const double noise = 2.0 * std::sqrt(e_from * e_from + e_to * e_to);
    stages[i].within_noise = std::isfinite(d) && d <= noise;
    stages[i].ms_per_image = !std::isfinite(d) ? NAN : stages[i].within_noise ? 0.0 : d * 1e3;
    if (std::isfinite(stages[i].ms_per_image)) total += stages[i].ms_per_image;
  }
  for (auto& s : stages) s.share = total > 0 && std::isfinite(s.ms_per_image) ? s.ms_per_image / total : 0.0;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return out;
}

std::string bar(double fraction, std::size_t width) {
  const auto n = static_cast<std::size_t>(std::lround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(width)));
  return std::string(n, '#') + std::string(width - n, ' ');
}

/// The ladder's stages (what skipping each one saves per image) and, with per-transform modes, the
/// transforms' own, priced.
void price_stages(doctor_report& r) {
  if (r.own_source) {
    r.stages.push_back({"produce", "producing samples (your source)", "L0", "L3"});
  } else if (r.encoded) {
    r.stages.push_back({"read", "storage reads", "L0", "L1"});
    r.stages.push_back({"decode", "decoding", "L1", "L2"});
  } else {
    r.stages.push_back({"read", "reading the raw images (the source generates them)", "L0", "L2"});
  }
  if (!r.own_source) r.stages.push_back({"transforms", "the transforms", "L2", "L3"});
  r.stages.push_back({"loader", "the loader's own work (samples into slots, batching)", "L3", "L4"});
  r.stages.push_back({"copy", "the host-to-device copy", "L4", "L5"});
  price(r, r.stages);
  // Per transform: the chain L2, T1, ..., T(n-1), L3 prices transforms 1..n.
  const std::size_t n = r.transform_names.size();
  if (n < 2 || r.mode("T1") == nullptr) return;
  const auto after = [](std::size_t k) {  // the mode cached after transform k ("T" + k)
    std::string id = "T";
    id += std::to_string(k);
    return id;
  };
  for (std::size_t k = 0; k < n; ++k)
    r.transforms.push_back({r.transform_names[k], r.transform_names[k], k == 0 ? "L2" : after(k), k + 1 == n ? "L3" : after(k + 1)});
  price(r, r.transforms);
}

/// Names the costliest stages until they cover three quarters of the time per image, and every
/// stage with 15% or more of it (a stage under a tenth is never named, the costliest always is);
/// returns their labels and the deepest level they reach.
std::vector<std::string> name_bottleneck(doctor_report& r, std::string& level) {
  std::vector<const doctor_stage*> ranked;
  for (const auto& s : r.stages)
    if (std::isfinite(s.ms_per_image)) ranked.push_back(&s);
  std::sort(ranked.begin(), ranked.end(), [](auto* a, auto* b) { return a->share > b->share; });
  std::vector<std::string> labels;
  level = "L0";
  double covered = 0;
  for (const auto* s : ranked) {
    if (!r.bottleneck.empty() && ((covered >= 0.75 && s->share < 0.15) || s->share < 0.10)) break;
    r.bottleneck.push_back(s->name);
    labels.push_back(s->label);
    level = std::max(level, s->to);
    covered += s->share;
  }
  return labels;
}

/// The verdict of a pipeline that does not keep up: its bottleneck, what caching past it gains.
std::string bottleneck_verdict(doctor_report& r, const doctor_mode& l0) {
  std::string level;
  const std::vector<std::string> labels = name_bottleneck(r, level);
  if (r.bottleneck.empty())
    return "the consumer waits " + pct(l0.consumer_wait) + " of the time at L0, but no cached mode was measured to say "
           "which stage costs it";
  const auto named = [&](const char* s) { return std::find(r.bottleneck.begin(), r.bottleneck.end(), s) != r.bottleneck.end(); };
  std::string v = "bottleneck: " + join_names(labels);
  if (!named("copy"))
    v += ", not the copy (" + (r.gpu ? pct(r.stages.back().share) + " of the time per image" : std::string("none on the CPU path")) + ")";
  if (const doctor_mode* after = stand_in(r, level))
    v += " - caching " + std::string(after->id == "L5" ? "device batches" : after->name.substr(0, after->name.find(" cached"))) +
         " raises throughput " + num(after->images_per_s / l0.images_per_s, 1) + "x (" + after->id + " vs L0)";
  if (!r.transforms.empty() && named("transforms")) {
    const auto top = std::max_element(r.transforms.begin(), r.transforms.end(),
                                      [](const auto& a, const auto& b) { return a.share < b.share; });
    v += "; " + top->name + " costs " + pct(top->share) + " of transform time";
  }
  return v;
}

/// No bottleneck when the consumer waits under a tenth of the time or the full pipeline reaches
/// 90% of the ceiling; else the bottleneck's verdict.
std::string verdict_of(doctor_report& r, const doctor_mode& l0) {
  const doctor_mode* ceiling = stand_in(r, "L5");
  const double ratio = ceiling != nullptr ? l0.images_per_s / ceiling->images_per_s : NAN;
  if (l0.consumer_wait >= 0.10 && !(std::isfinite(ratio) && ratio >= 0.9)) return bottleneck_verdict(r, l0);
  return "no bottleneck: the pipeline keeps up with the step - the consumer waits " + pct(l0.consumer_wait) + " of the time" +
         (std::isfinite(ratio) ? " and the full pipeline runs at " + pct(std::min(ratio, 1.0)) + " of the ceiling (" +
                                     ceiling->id + ")"
                               : "");
}

}  // namespace

void analyze(doctor_report& r) {
  r.stages.clear();
  r.transforms.clear();
  r.bottleneck.clear();
  r.suggestions.clear();
  r.no_gain.clear();
  r.verified = false;
  r.caveat.clear();
  price_stages(r);
  const doctor_mode* l0 = r.mode("L0");
  if (l0 == nullptr || !l0->ran) {
    r.verdict = "no verdict: the full pipeline (L0) was not measured";
    return;
  }
  r.verdict = verdict_of(r, *l0);
  // The article's caveat: cached modes replay a pool; a data-dependent step makes them estimates.
  if (r.user_step || r.varying_sizes)
    r.caveat = std::string(r.user_step ? "the step is your own function" : "the images vary in size") +
               ", so the time of a step may depend on its data: the cached modes replay a pool of " +
               std::to_string(r.pool) + " distinct samples, not the whole dataset, and only estimate a full run; "
               "L0 is the measurement to trust";
  const analysis::evidence e{r, *l0};
  for (const analysis::rule& rule : analysis::suggestion_rules())
    if (auto s = rule.advise(e)) r.suggestions.push_back(std::move(*s));
}

namespace {

/// The first lines: the pipeline, the settings, and what remote reads cost.
void header_text(const doctor_report& r, std::ostream& out) {
  out << "pinfeed doctor: " << r.pipeline << "\n";
  out << "device " << r.device << ", " << r.workers << " worker(s) on " << r.hardware_threads
      << " hardware thread(s) (" << r.plan_cores << " for this process in the node plan), batch " << r.batch_size << ", prefetch " << r.prefetch << ", step "
      << (r.user_step ? std::string("user function") : r.step_ms > 0 ? num(r.step_ms, 2) + " ms" : std::string("0 ms (pipeline alone)"))
      << ", cache pool " << r.pool << " samples\n";
  if (r.tuned)
    out << "settings tuned in " << num(r.tuning_seconds, 1) << " s (every mode ran with them): " << r.tuning.to_string() << "\n";
  if (r.compared)
    out << "expected speed-up " << num(r.expected_speedup, 2) << "x: the full pipeline ran "
        << num(r.tuned_images_per_s, 1) << " images/s with these settings, " << num(r.baseline_images_per_s, 1)
        << " with " << r.baseline_workers << " worker(s), prefetch " << r.baseline_prefetch << " (measured one after the other)\n";
  if (!r.remote) return;
  const loaders::remote_counters& f = r.fetch;
  out << "remote reads: " << f.requests << " requests (" << f.retries << " retries), "
      << num(static_cast<double>(f.bytes) / 1048576.0, 1) << " MiB, readers waited " << num(f.wait_ms, 1) << " ms"
      << (f.index_cached > 0 ? ", " + std::to_string(f.index_cached) + " shard indexes from the index cache" : std::string())
      << (f.window_shards > 0 ? ", " + std::to_string(f.shards) + " shards fetched whole (window " +
                                    std::to_string(f.window_shards) + "), " + std::to_string(f.streamed) +
                                    " samples range-read for want of room"
                              : std::string(", one range request per sample"))
      << "\n";
}

/// A line per mode, then a bar per mode that ran (a log scale when they span more than 20x: a
/// ceiling with no step is far above the rest).
void modes_text(const std::vector<doctor_mode>& modes, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-30s %6s %9s %10s %7s %6s\n", "mode", "what", "steps", "steps/s", "images/s", "wait", "CPU");
  out << line;
  double best = 0;
  for (const auto& m : modes)
    if (m.ran) best = std::max(best, m.images_per_s);
  double worst = best;
  for (const auto& m : modes) {
    if (m.ran && m.images_per_s > 0) worst = std::min(worst, m.images_per_s);
    if (m.ran)
      std::snprintf(line, sizeof line, "%-4s %-30s %6zu %9.2f %10.1f %6.1f%% %5.0f%%\n", m.id.c_str(),
                    m.name.substr(0, 30).c_str(), m.steps, m.steps_per_s, m.images_per_s, 100 * m.consumer_wait,
                    100 * m.cpu_utilization);
    else
      std::snprintf(line, sizeof line, "%-4s %-30s %6s   %s\n", m.id.c_str(), m.name.substr(0, 30).c_str(), "-", m.note.c_str());
    out << line;
  }
  const bool log_scale = worst > 0 && best / worst > 20;
  out << "\nthroughput (images/s" << (log_scale ? ", log scale" : "") << ")\n";
  for (const auto& m : modes) {
    if (!m.ran) continue;
    double f = best > 0 ? m.images_per_s / best : 0;
    if (log_scale) f = std::log(m.images_per_s / worst * 2) / std::log(best / worst * 2);
    std::snprintf(line, sizeof line, "  %-4s |%s| %.1f\n", m.id.c_str(), bar(f, 40).c_str(), m.images_per_s);
    out << line;
  }
}

void costs_text(const char* title, const std::vector<doctor_stage>& v, std::ostream& out) {
  char line[256];
  out << "\n" << title << "\n";
  for (const auto& s : v) {
    const std::string name = s.name.substr(0, 34);
    if (!std::isfinite(s.ms_per_image))
      std::snprintf(line, sizeof line, "  %-34s %s -> %s   not measured\n", name.c_str(), s.from.c_str(), s.to.c_str());
    else if (s.within_noise)
      std::snprintf(line, sizeof line, "  %-34s %s -> %-3s within noise\n", name.c_str(), s.from.c_str(), s.to.c_str());
    else
      std::snprintf(line, sizeof line, "  %-34s %s -> %-3s %9.4f ms %5.0f%% |%s|\n", name.c_str(), s.from.c_str(),
                    s.to.c_str(), s.ms_per_image, 100 * s.share, bar(s.share, 30).c_str());
    out << line;
  }
}

}  // namespace

std::string doctor_report::to_text() const {
  std::ostringstream out;
  header_text(*this, out);
  out << "\n";
  modes_text(modes, out);
  costs_text("stage costs (time per image that caching past the stage saves)", stages, out);
  if (!transforms.empty()) costs_text("transform costs (per-transform ladder)", transforms, out);
  out << "\nverdict: " << verdict << "\n";
  if (!caveat.empty()) out << "caveat: " << caveat << "\n";
  if (bad_samples > 0)
    out << "bad samples: " << bad_samples << " skipped (" << replaced << " slot" << (replaced == 1 ? "" : "s")
        << " filled by a stand-in in the full pipeline's runs)\n";
  if (!decode_path.empty()) {
    out << "decode: on the " << decode_path << "; " << decoded.to_string() << "\n";
    if (decode_probe) out << "decode probe: " << decode_probe->to_string() << "\n";
    out << "decode advice: " << decode_choice << " (" << decode_why << ")\n";
  }
  if (!augment_steps.empty()) {
    out << "augment: " << augment_steps << " on the " << augment_path;
    if (augment_host_ms >= 0) out << "; " << (analysis::num(augment_host_ms, 3) + " ms") << " an image on a worker";
    if (augment_device_ms >= 0) out << ", " << (analysis::num(augment_device_ms, 3) + " ms") << " on the GPU (batches of 64)";
    if (!augment_why.empty()) out << " (not on the device: " << augment_why << ")";
    out << "\n";
  }
  if (!suggestions.empty()) {
    const bool ran = std::any_of(suggestions.begin(), suggestions.end(), [](const auto& s) { return s.measured; });
    out << "suggestions" << (ran ? " (each naming a setting was run with it, against L0)" : "") << ":\n";
    for (const auto& s : suggestions) {
      out << "  - " << s.what << ": " << s.evidence << "\n";
      if (s.measured) out << "    measured: " << s.result << "\n";
      else if (!s.result.empty()) out << "    " << s.result << "\n";
      else if (!s.setting.empty()) out << "    not measured (--no-verify)\n";
    }
  }
  if (!no_gain.empty()) {
    out << "tried, no gain (not advice):\n";
    for (const auto& s : no_gain) out << "  - " << s.what << ": " << s.result << "\n";
  }
  return out.str();
}

}  // namespace pinfeed
