// The doctor's modes (modes.hpp).
#include "modes.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {
namespace {

struct planner {
  const doctor_pipeline& p;
  const doctor_options& o;
  const doctor_report& facts;
  std::size_t pool;
  std::vector<plan_entry> plan;

  plan_entry& add(std::string id, std::string name, std::string skips, plan_entry::kind how, sample_cache cache = {}) {
    plan_entry e;
    e.mode.id = std::move(id);
    e.mode.name = std::move(name);
    e.mode.skips = std::move(skips);
    e.how = how;
    e.cache = cache;
    e.cache.pool = pool;
    plan.push_back(std::move(e));
    return plan.back();
  }

  /// L0 to L5, each with the note that says why it does not run, where it does not.
  void ladder(bool device_tail) {
    const bool own = static_cast<bool>(p.own), gpu = facts.gpu;
    add("L0", "full pipeline", "nothing", plan_entry::kind::loader);
    auto& l1 = add("L1", "stored bytes cached", "storage reads", plan_entry::kind::loader, {cache_stage::raw, 0, pool});
    if (own) l1.mode.note = "not applicable: a source of your own has no read stage the doctor can see";
    else if (!facts.encoded) l1.mode.note = "same as L2: '" + p.reader->name() + "' yields images, not encoded bytes";
    auto& l2 = add("L2", "decoded images cached", "reads, decoding", plan_entry::kind::loader, {cache_stage::decoded, 0, pool});
    if (own) l2.mode.note = "not applicable: a source of your own has no decode stage the doctor can see";
    add("L3", own ? "produced samples cached" : "processed samples cached",
        own ? "producing samples" : "reads, decoding, transforms", plan_entry::kind::loader, {cache_stage::finished, 0, pool});
    auto& l4 = add("L4", "host batches cached", "the workers: only the copy and the step run", plan_entry::kind::host_batches);
    auto& l5 = add("L5", "device batches cached", "everything but the step (the ceiling)", plan_entry::kind::device_batches);
    if (!gpu) l5.mode.note = "same as L4: on the CPU path batches stay in host memory, there is no copy";
    // Without a step these modes would time an empty loop, a figure of no use: say so instead.
    const bool no_step = !o.step && o.step_ms == 0;
    if (no_step && !gpu) l4.mode.note = "not measured: on the CPU path nothing is copied, and there is no step";
    if (no_step && gpu && !device_tail) l5.mode.note = "not measured: no step and no device work to run";
  }

  /// Per-transform checkpoints: after host transform k, for k = 1 .. (transforms - 1).
  void per_transform() {
    const auto& names = facts.transform_names;
    for (std::size_t k = 1; k < names.size(); ++k) {
      std::string skips = "reads, decoding";
      for (std::size_t j = 0; j < k; ++j) skips += ", " + names[j];
      std::string id = "T";
      id += std::to_string(k);
      add(id, "cached after " + names[k - 1], skips, plan_entry::kind::loader, {cache_stage::steps, k, pool});
    }
  }

  /// Only the modes asked for run; an unknown one is named with the pipeline's.
  void select() {
    for (const auto& want : o.modes) {
      if (std::any_of(plan.begin(), plan.end(), [&](const plan_entry& e) { return e.mode.id == want; })) continue;
      std::string ids;
      for (const auto& e : plan) ids += (ids.empty() ? "" : ", ") + e.mode.id;
      throw pinfeed::invalid_argument("doctor: unknown mode '" + want + "' (this pipeline has " + ids + ")");
    }
    for (auto& e : plan)
      if (std::find(o.modes.begin(), o.modes.end(), e.mode.id) == o.modes.end() && e.mode.note.empty())
        e.mode.note = "not selected";
  }

  void check_trace_mode() const {
    const auto it = std::find_if(plan.begin(), plan.end(), [&](const plan_entry& e) { return e.mode.id == o.trace_mode; });
    if (it == plan.end() || it->how != plan_entry::kind::loader || !it->mode.note.empty())
      throw pinfeed::invalid_argument("doctor: --trace-mode must be a mode that runs the loader (L0-L3 or T1..) and is "
                                  "run, got '" + o.trace_mode + "'");
    if (o.trace_path.empty()) throw pinfeed::invalid_argument("doctor: trace_mode given without a trace path");
  }
};

}  // namespace

std::vector<plan_entry> plan_modes(const doctor_pipeline& p, const doctor_options& o, const doctor_report& facts,
                                   std::size_t pool, bool device_tail) {
  planner pl{p, o, facts, pool, {}};
  pl.plan.reserve(8 + facts.transform_names.size());  // add() hands out references into it
  pl.ladder(device_tail);
  if (o.per_transform) pl.per_transform();
  if (!o.modes.empty()) pl.select();
  if (!o.trace_mode.empty()) pl.check_trace_mode();
  return std::move(pl.plan);
}

namespace {

/// The mode's timeline: every step, or past kTimelinePoints steps, runs of consecutive steps, each
/// with its longest wait (a stall stays visible) and the end of its last step.
void timeline(doctor_mode& m, const std::vector<double>& waits, const std::vector<double>& ends) {
  const std::size_t n = std::min(waits.size(), ends.size());
  const std::size_t points = std::min(n, doctor_mode::kTimelinePoints);
  m.step_end_s.assign(points, 0.0);
  m.step_wait_ms.assign(points, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t p = i * points / n;
    m.step_wait_ms[p] = std::max(m.step_wait_ms[p], waits[i] * 1e3);
    m.step_end_s[p] = ends[i];
  }
}

}  // namespace

void summarize(doctor_mode& m, std::vector<double> waits, const std::vector<double>& ends, const std::vector<double>& per_image,
               std::size_t images, double wall, double cpu, unsigned threads) {
  m.ran = true;
  timeline(m, waits, ends);
  m.steps = waits.size();
  m.images = images;
  m.seconds = wall;
  m.steps_per_s = static_cast<double>(m.steps) / wall;
  m.images_per_s = static_cast<double>(images) / wall;
  double total_wait = 0;
  for (double w : waits) total_wait += w;
  m.consumer_wait = std::clamp(total_wait / wall, 0.0, 1.0);
  std::sort(waits.begin(), waits.end(), std::greater<>());
  m.max_wait_ms = waits.empty() ? 0.0 : waits.front() * 1e3;
  const std::size_t top = std::min(waits.size(), std::max<std::size_t>(1, waits.size() / 10));
  double top_wait = 0;
  for (std::size_t i = 0; i < top; ++i) top_wait += waits[i];
  m.wait_top_share = total_wait > 0 ? std::clamp(top_wait / total_wait, 0.0, 1.0) : 0.0;
  m.cpu_utilization = std::clamp(cpu / (wall * threads), 0.0, 1.0);
  if (per_image.size() >= 2) {  // standard error of the mean time per image
    double mean = 0, var = 0;
    for (double x : per_image) mean += x;
    mean /= static_cast<double>(per_image.size());
    for (double x : per_image) var += (x - mean) * (x - mean);
    var /= static_cast<double>(per_image.size() - 1);
    m.noise_ms_per_image = 1e3 * std::sqrt(var / static_cast<double>(per_image.size()));
  }
}

}  // namespace pinfeed
