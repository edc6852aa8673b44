// The doctor's analysis (stage costs, verdict, suggestions) and its text and JSON forms.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "pinfeed/doctor/doctor.hpp"

namespace pinfeed {

namespace {

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100.0 * f);
  return b;
}
std::string num(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
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

}  // namespace

void analyze(doctor_report& r) {
  r.stages.clear();
  r.transforms.clear();
  r.bottleneck.clear();
  r.suggestions.clear();
  r.caveat.clear();

  // The ladder's stages: what skipping each one saves per image.
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
  if (n >= 2 && r.mode("T1") != nullptr) {
    for (std::size_t k = 0; k < n; ++k)
      r.transforms.push_back({r.transform_names[k], r.transform_names[k], k == 0 ? "L2" : "T" + std::to_string(k),
                              k + 1 == n ? "L3" : "T" + std::to_string(k + 1)});
    price(r, r.transforms);
  }

  const doctor_mode* l0 = r.mode("L0");
  const doctor_mode* ceiling = stand_in(r, "L5");
  if (l0 == nullptr || !l0->ran) {
    r.verdict = "no verdict: the full pipeline (L0) was not measured";
    return;
  }
  const double ratio_to_ceiling = ceiling != nullptr ? l0->images_per_s / ceiling->images_per_s : NAN;
  const bool keeps_up = l0->consumer_wait < 0.10 || (std::isfinite(ratio_to_ceiling) && ratio_to_ceiling >= 0.9);
  const double copy_share = r.stages.back().share;
  if (keeps_up) {
    r.verdict = "no bottleneck: the pipeline keeps up with the step - the consumer waits " + pct(l0->consumer_wait) +
                " of the time" +
                (std::isfinite(ratio_to_ceiling) ? " and the full pipeline runs at " + pct(std::min(ratio_to_ceiling, 1.0)) +
                                                       " of the ceiling (" + ceiling->id + ")"
                                                 : "");
  } else {
    std::vector<const doctor_stage*> ranked;
    for (const auto& s : r.stages)
      if (std::isfinite(s.ms_per_image)) ranked.push_back(&s);
    std::sort(ranked.begin(), ranked.end(), [](auto* a, auto* b) { return a->share > b->share; });
    // Name the costliest stages until they cover three quarters of the time per image, and every
    // stage with 15% or more of it (a stage under a tenth is never named, the costliest always is).
    std::vector<std::string> labels;
    std::string level = "L0";
    double covered = 0;
    for (const auto* s : ranked) {
      if (!r.bottleneck.empty() && ((covered >= 0.75 && s->share < 0.15) || s->share < 0.10)) break;
      r.bottleneck.push_back(s->name);
      labels.push_back(s->label);
      level = std::max(level, s->to);
      covered += s->share;
    }
    if (r.bottleneck.empty()) {
      r.verdict = "the consumer waits " + pct(l0->consumer_wait) +
                  " of the time at L0, but no cached mode was measured to say which stage costs it";
    } else {
      const doctor_mode* after = stand_in(r, level);
      std::string v = "bottleneck: " + join_names(labels);
      if (std::find(r.bottleneck.begin(), r.bottleneck.end(), "copy") == r.bottleneck.end())
        v += ", not the copy (" + (r.gpu ? pct(copy_share) + " of the time per image" : std::string("none on the CPU path")) +
             ")";
      if (after != nullptr)
        v += " - caching " +
             std::string(after->id == "L5" ? "device batches" : after->name.substr(0, after->name.find(" cached"))) +
             " raises throughput " + num(after->images_per_s / l0->images_per_s, 1) + "x (" + after->id + " vs L0)";
      if (!r.transforms.empty() &&
          std::find(r.bottleneck.begin(), r.bottleneck.end(), "transforms") != r.bottleneck.end()) {
        const auto top = std::max_element(r.transforms.begin(), r.transforms.end(),
                                          [](const auto& a, const auto& b) { return a.share < b.share; });
        v += "; " + top->name + " costs " + pct(top->share) + " of transform time";
      }
      r.verdict = v;
    }
  }

  // The article's caveat: cached modes replay a pool; a data-dependent step makes them estimates.
  if (r.user_step || r.varying_sizes)
    r.caveat = std::string(r.user_step ? "the step is your own function" : "the images vary in size") +
               ", so the time of a step may depend on its data: the cached modes replay a pool of " +
               std::to_string(r.pool) + " distinct samples, not the whole dataset, and only estimate a full run; "
               "L0 is the measurement to trust";

  // Suggestions, each with the number behind it.
  const auto named = [&](const char* s) { return std::find(r.bottleneck.begin(), r.bottleneck.end(), s) != r.bottleneck.end(); };
  const auto stage = [&](const char* s) -> const doctor_stage& {
    return *std::find_if(r.stages.begin(), r.stages.end(), [&](const auto& x) { return x.name == s; });
  };
  if (!r.bottleneck.empty() && l0->cpu_utilization < 0.75) {
    const std::string evidence = "the CPU is busy " + pct(l0->cpu_utilization) + " of " + std::to_string(r.hardware_threads) +
                                 " hardware threads while the consumer waits " + pct(l0->consumer_wait) + " (L0)";
    if (r.workers < r.hardware_threads)
      r.suggestions.push_back({"raise workers from " + std::to_string(r.workers) + " to " + std::to_string(r.hardware_threads), evidence});
    else
      r.suggestions.push_back({"raise workers beyond the core count (try " + std::to_string(2 * r.workers) +
                                   "): they wait rather than compute",
                               evidence});
  }
  if (l0->consumer_wait >= 0.02 && l0->consumer_wait <= 0.6 && l0->wait_top_share > 0.5 && l0->steps >= 10) {
    // Enough batches ahead to cover the longest stall at the consumer's own pace per step.
    const double own_ms = std::max(1e-3, l0->seconds * (1.0 - l0->consumer_wait) / static_cast<double>(l0->steps) * 1e3);
    const auto more = static_cast<std::size_t>(std::ceil(l0->max_wait_ms / own_ms));
    const std::size_t to = std::max(r.prefetch + std::max<std::size_t>(more, 1), 2 * r.prefetch);
    r.suggestions.push_back({"raise prefetch from " + std::to_string(r.prefetch) + " to " + std::to_string(to),
                             pct(l0->wait_top_share) + " of the consumer's wait falls in the slowest 10% of steps (the "
                             "longest " + num(l0->max_wait_ms, 1) + " ms, against " + num(own_ms, 1) +
                             " ms of the consumer's own work per step): the pipeline keeps up on average but stalls in bursts"});
  }
  if (named("copy")) {
    const doctor_mode* l4 = r.mode("L4");
    const std::string rate =
        l4 != nullptr && l4->ran ? ", " + num(l4->steps_per_s * static_cast<double>(r.batch_bytes) / 1e9, 2) + " GB/s" : "";
    if (r.float_images)
      r.suggestions.push_back({"keep uint8 until the GPU: run the colour/scale/normalize tail on the device",
                               "the copy costs " + pct(stage("copy").share) + " of the time per image and the images cross "
                               "as float32, 4x the bytes of uint8 (" + num(r.batch_bytes / 1048576.0, 1) + " MiB per batch" + rate + ")"});
    else
      r.suggestions.push_back({"send fewer bytes: labels as ids (not one-hot), binary maps packed into bits",
                               "the copy costs " + pct(stage("copy").share) + " of the time per image (" +
                               num(r.batch_bytes / 1048576.0, 1) + " MiB per batch" + rate + ")"});
  }
  if (named("produce"))
    r.suggestions.push_back({"make the source's produce() cheaper" +
                                 std::string(l0->cpu_utilization < 0.75 ? "" : ", or give it more cores"),
                             "producing a sample costs " + num(stage("produce").ms_per_image, 3) + " ms, " +
                                 pct(stage("produce").share) + " of the time per image"});
  if (named("read") && r.remote) {
    const std::string cost = "fetching from remote storage costs " + num(stage("read").ms_per_image, 3) +
                             " ms per image, " + pct(stage("read").share) + " of the time per image";
    if (r.fetch.window_shards > 0 && r.fetch.streamed > 0)
      r.suggestions.push_back({"give the shard cache room for three windows of shards: raise --remote-cache-mb "
                               "(remote_options::cache_bytes), or narrow --shard-window",
                               cost + "; " + std::to_string(r.fetch.streamed) +
                                   " samples were range-read one by one because their shard had no room in the cache"});
    else if (r.fetch.window_shards > 0)
      r.suggestions.push_back({"fetch more shards at once: raise --requests-in-flight (remote_options::"
                               "requests_in_flight), or use larger shards",
                               cost + " with whole shards fetched ahead"});
    else
      r.suggestions.push_back({"keep more remote reads in flight: raise --requests-in-flight (remote_options::"
                               "requests_in_flight; unset, it follows the latency up to " +
                                   std::to_string(loaders::kMaxRequestsInFlight) +
                                   ") and remote_options::read_ahead; or read whole shards, the "
                                   "remote default (no --shard-window 0; a shard-aware shuffle): one request per shard, "
                                   "not per sample",
                               cost + " with " + std::to_string(r.fetch.requests_in_flight) + " requests in flight and " +
                                   std::to_string(r.fetch.read_ahead_depth) + " samples read ahead"});
  }
  if (named("read") && r.encoded && !r.sharded)
    r.suggestions.push_back({"group the files into tar shards (pinfeed pack) and read those",
                             "reading files costs " + num(stage("read").ms_per_image, 3) + " ms per image, " +
                             pct(stage("read").share) + " of the time per image"});
  if (named("read") && !r.encoded)
    r.suggestions.push_back({"make the source cheaper (it produces whole images that the first transform cuts down) "
                             "or give it more workers",
                             "producing the images costs " + num(stage("read").ms_per_image, 3) + " ms per image, " +
                                 pct(stage("read").share) + " of the time per image"});
  if (named("decode"))
    r.suggestions.push_back({r.planned_decode
                                 ? "store the images nearer the training size, or decode on the GPU" +
                                       std::string(l0->cpu_utilization < 0.75 ? ", or add workers" : "") +
                                       ": JPEGs already decode only the window the first transform uses"
                                 : "decode less: start the pipeline with rrc(...), a crop or resize(...) so JPEGs decode "
                                   "only that window, at a DCT scale when it is large",
                             "decoding costs " + num(stage("decode").ms_per_image, 3) + " ms per image, " +
                                 pct(stage("decode").share) + " of the time per image"});
  if (named("transforms") && !r.transforms.empty()) {
    const auto top = std::max_element(r.transforms.begin(), r.transforms.end(),
                                      [](const auto& a, const auto& b) { return a.share < b.share; });
    const bool pointwise = top->name.find("(fused)") != std::string::npos;
    r.suggestions.push_back({pointwise && r.gpu ? "run " + top->name + " on the GPU (the device tail)"
                                                : "make " + top->name + " cheaper, or move it to the GPU",
                             top->name + " costs " + num(top->ms_per_image, 3) + " ms per image, " + pct(top->share) +
                                 " of transform time"});
  }
}

std::string doctor_report::to_text() const {
  std::ostringstream out;
  out << "pinfeed doctor: " << pipeline << "\n";
  out << "device " << device << ", " << workers << " worker(s) on " << hardware_threads << " hardware thread(s), batch "
      << batch_size << ", prefetch " << prefetch << ", step "
      << (user_step ? std::string("user function") : step_ms > 0 ? num(step_ms, 2) + " ms" : std::string("0 ms (pipeline alone)"))
      << ", cache pool " << pool << " samples\n";
  if (remote)
    out << "remote reads: " << fetch.requests << " requests (" << fetch.retries << " retries), "
        << num(static_cast<double>(fetch.bytes) / 1048576.0, 1) << " MiB, readers waited " << num(fetch.wait_ms, 1)
        << " ms"
        << (fetch.index_cached > 0 ? ", " + std::to_string(fetch.index_cached) + " shard indexes from the index cache"
                                   : std::string())
        << (fetch.window_shards > 0 ? ", " + std::to_string(fetch.shards) + " shards fetched whole (window " +
                                          std::to_string(fetch.window_shards) + "), " +
                                          std::to_string(fetch.streamed) + " samples range-read for want of room"
                                    : std::string(", one range request per sample"))
        << "\n";
  out << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-30s %6s %9s %10s %7s %6s\n", "mode", "what", "steps", "steps/s", "images/s", "wait", "CPU");
  out << line;
  double best = 0;
  for (const auto& m : modes)
    if (m.ran) best = std::max(best, m.images_per_s);
  for (const auto& m : modes) {
    if (m.ran)
      std::snprintf(line, sizeof line, "%-4s %-30s %6zu %9.2f %10.1f %6.1f%% %5.0f%%\n", m.id.c_str(),
                    m.name.substr(0, 30).c_str(), m.steps, m.steps_per_s, m.images_per_s, 100 * m.consumer_wait,
                    100 * m.cpu_utilization);
    else
      std::snprintf(line, sizeof line, "%-4s %-30s %6s   %s\n", m.id.c_str(), m.name.substr(0, 30).c_str(), "-", m.note.c_str());
    out << line;
  }
  // A log scale when the modes span more than 20x (a ceiling with no step is far above the rest).
  double worst = best;
  for (const auto& m : modes)
    if (m.ran && m.images_per_s > 0) worst = std::min(worst, m.images_per_s);
  const bool log_scale = worst > 0 && best / worst > 20;
  out << "\nthroughput (images/s" << (log_scale ? ", log scale" : "") << ")\n";
  for (const auto& m : modes)
    if (m.ran) {
      double f = best > 0 ? m.images_per_s / best : 0;
      if (log_scale) f = std::log(m.images_per_s / worst * 2) / std::log(best / worst * 2);
      std::snprintf(line, sizeof line, "  %-4s |%s| %.1f\n", m.id.c_str(), bar(f, 40).c_str(), m.images_per_s);
      out << line;
    }
  const auto print_costs = [&](const char* title, const std::vector<doctor_stage>& v) {
    out << "\n" << title << "\n";
    for (const auto& s : v) {
      if (!std::isfinite(s.ms_per_image)) {
        std::snprintf(line, sizeof line, "  %-34s %s -> %s   not measured\n", s.name.substr(0, 34).c_str(), s.from.c_str(), s.to.c_str());
      } else if (s.within_noise) {
        std::snprintf(line, sizeof line, "  %-34s %s -> %-3s within noise\n", s.name.substr(0, 34).c_str(), s.from.c_str(),
                      s.to.c_str());
      } else {
        std::snprintf(line, sizeof line, "  %-34s %s -> %-3s %9.4f ms %5.0f%% |%s|\n", s.name.substr(0, 34).c_str(),
                      s.from.c_str(), s.to.c_str(), s.ms_per_image, 100 * s.share, bar(s.share, 30).c_str());
      }
      out << line;
    }
  };
  print_costs("stage costs (time per image that caching past the stage saves)", stages);
  if (!transforms.empty()) print_costs("transform costs (per-transform ladder)", transforms);
  out << "\nverdict: " << verdict << "\n";
  if (!caveat.empty()) out << "caveat: " << caveat << "\n";
  if (bad_samples > 0)
    out << "bad samples: " << bad_samples << " skipped (" << replaced << " slot" << (replaced == 1 ? "" : "s")
        << " filled by a stand-in in the full pipeline's runs)\n";
  if (!suggestions.empty()) {
    out << "suggestions:\n";
    for (const auto& s : suggestions) out << "  - " << s.what << ": " << s.evidence << "\n";
  }
  return out.str();
}

std::string doctor_report::to_json() const {
  using nlohmann::json;
  const auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json j;
  j["schema"] = "pinfeed.doctor/2";
  j["pipeline"] = pipeline;
  j["device"] = device;
  j["workers"] = workers;
  j["hardware_threads"] = hardware_threads;
  j["batch_size"] = batch_size;
  j["prefetch"] = prefetch;
  j["pool"] = pool;
  j["step_ms"] = step_ms;
  j["user_step"] = user_step;
  j["modes"] = json::array();
  for (const auto& m : modes) {
    json x{{"id", m.id}, {"name", m.name}, {"skips", m.skips}, {"ran", m.ran}, {"note", m.note}};
    if (m.ran) {
      x["steps"] = m.steps;
      x["images"] = m.images;
      x["seconds"] = m.seconds;
      x["steps_per_s"] = m.steps_per_s;
      x["images_per_s"] = m.images_per_s;
      x["consumer_wait"] = m.consumer_wait;
      x["wait_top_share"] = m.wait_top_share;
      x["max_wait_ms"] = m.max_wait_ms;
      x["cpu_utilization"] = m.cpu_utilization;
      x["noise_ms_per_image"] = m.noise_ms_per_image;
    }
    j["modes"].push_back(x);
  }
  const auto stage_list = [&](const std::vector<doctor_stage>& v) {
    json a = json::array();
    for (const auto& s : v)
      a.push_back({{"name", s.name}, {"label", s.label}, {"from", s.from}, {"to", s.to},
                   {"ms_per_image", finite(s.ms_per_image)}, {"within_noise", s.within_noise}, {"share", s.share}});
    return a;
  };
  j["stages"] = stage_list(stages);
  j["transforms"] = stage_list(transforms);
  j["bottleneck"] = bottleneck;
  j["verdict"] = verdict;
  j["caveat"] = caveat.empty() ? json(nullptr) : json(caveat);
  j["bad_samples"] = bad_samples;
  j["replaced"] = replaced;
  j["fetch"] = remote ? json::parse(loaders::to_json(fetch)) : json(nullptr);
  j["suggestions"] = json::array();
  for (const auto& s : suggestions) j["suggestions"].push_back({{"what", s.what}, {"evidence", s.evidence}});
  return j.dump(2);
}

}  // namespace pinfeed
