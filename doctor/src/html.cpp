// The doctor's report as one self-contained page (doctor_report::to_html): inline CSS and SVG,
// no script, nothing fetched (its Content-Security-Policy forbids it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis.hpp"
#include "html_charts.hpp"
#include "pinfeed/doctor/doctor.hpp"

namespace pinfeed {

namespace {

using analysis::num;
using analysis::pct;
using html::escape;

constexpr const char* kStyle = R"(
:root{--ink:#1b1f24;--muted:#57606a;--line:#d0d7de;--bar:#2f6fb3;--alarm:#c2410c;--ok:#1a7f37;--bg:#fff;--soft:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:980px;margin:0 auto;padding:16px}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid var(--line)}
.pipeline{font-family:ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
.settings,.muted{color:var(--muted)}
.verdict{border-left:6px solid var(--alarm);background:var(--soft);padding:8px 14px}
.verdict.ok{border-color:var(--ok)}
.verdict p{margin:.3em 0}
.suggestions li{margin:.5em 0}
.measured{color:var(--ok)}.not-measured{color:var(--muted)}
.chart-figure{margin:12px 0 20px}
svg.chart{width:100%;max-width:760px;height:auto;display:block;font-size:12px}
svg.chart .grid{stroke:var(--line);stroke-width:1}
svg.chart .tick,svg.chart .axis{fill:var(--muted)}
svg.chart .label,svg.chart .value{fill:var(--ink)}svg.chart .value.inside{fill:#fff}
svg.chart .missing{fill:var(--muted);font-style:italic}
svg.chart rect.datum{fill:var(--bar)}
svg.chart rect.datum.bottleneck{fill:var(--alarm)}
svg.chart path.line{fill:none;stroke-width:2}
svg.chart .s1{stroke:var(--bar);fill:var(--bar)}svg.chart .s2{stroke:var(--alarm);fill:var(--alarm)}
svg.chart path.line.s1,svg.chart path.line.s2{fill:none}
figcaption{color:var(--muted);font-size:.9em}
table{border-collapse:collapse;font-size:.9em;margin:6px 0}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
td{font-variant-numeric:tabular-nums}
.numbers .scroll{overflow:auto;max-height:320px}
pre{background:var(--soft);padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.bottleneck-name{color:var(--alarm);font-weight:600}
@media (max-width:600px){body{font-size:14px}main{padding:10px}svg.chart{font-size:17px}}
@media print{main{max-width:none}.numbers summary{display:none}figure{break-inside:avoid}h2{break-after:avoid}
 body{font-size:10pt}.verdict{border-width:3px}}
)";

std::string bottleneck_names(const doctor_report& r) {
  std::string out;
  for (const auto& b : r.bottleneck)
    for (const auto& s : r.stages)
      if (s.name == b) out += std::string(out.empty() ? "" : ", ") + s.label;
  return out;
}

void header_html(const doctor_report& r, std::ostream& out) {
  out << "<header><h1>pinfeed doctor</h1><p class=\"pipeline\">" << escape(r.pipeline) << "</p>\n<p class=\"settings\">device "
      << escape(r.device) << ", " << r.workers << " worker(s) on " << r.hardware_threads << " hardware thread(s) (" << r.plan_cores
      << " for this process in the node plan), batch " << r.batch_size << ", prefetch " << r.prefetch << ", step "
      << escape(r.user_step ? std::string("your function") : r.step_ms > 0 ? num(r.step_ms, 2) + " ms" : std::string("0 ms (the pipeline alone)"))
      << ", cache pool " << r.pool << " samples</p></header>\n";
}

void verdict_html(const doctor_report& r, std::ostream& out) {
  out << "<section id=\"verdict\" class=\"verdict" << (r.bottleneck.empty() ? " ok" : "") << "\" data-bottleneck=\"";
  for (std::size_t i = 0; i < r.bottleneck.size(); ++i) out << (i ? " " : "") << escape(r.bottleneck[i]);
  out << "\"><h2>Verdict</h2><p id=\"verdict-text\">" << escape(r.verdict) << "</p>\n";
  if (!r.bottleneck.empty())
    out << "<p>Bottleneck: <span class=\"bottleneck-name\">" << escape(bottleneck_names(r)) << "</span></p>\n";
  if (!r.caveat.empty()) out << "<p class=\"muted\">Caveat: " << escape(r.caveat) << "</p>\n";
  if (r.bad_samples > 0)
    out << "<p>Bad samples: " << r.bad_samples << " skipped (" << r.replaced << " slots filled by a stand-in)</p>\n";
  if (!r.decode_path.empty()) {
    out << "<p id=\"decode\">Decoding: on the " << escape(r.decode_path) << "; " << escape(r.decoded.to_string())
        << ". Advice: <b>" << escape(r.decode_choice) << "</b> (" << escape(r.decode_why) << ")</p>\n";
  }
  if (!r.augment_steps.empty()) {
    out << "<p id=\"augment\">Augmentations after the decode (" << escape(r.augment_steps) << "): on the " << escape(r.augment_path);
    if (r.augment_host_ms >= 0) out << "; " << escape((analysis::num(r.augment_host_ms, 3) + " ms")) << " an image on a worker";
    if (r.augment_device_ms >= 0) out << ", " << escape((analysis::num(r.augment_device_ms, 3) + " ms")) << " on the GPU";
    if (!r.augment_why.empty()) out << " (not on the device: " << escape(r.augment_why) << ")";
    out << "</p>\n";
  }
  out << "</section>\n";
}

void suggestion_item(const doctor_suggestion& s, bool verified, std::ostream& out) {
  out << "<li><strong>" << escape(s.what) << "</strong><br><span class=\"muted\">" << escape(s.evidence) << "</span>";
  if (s.measured) out << "<br><span class=\"measured\">Measured: " << escape(s.result) << "</span>";
  else if (!s.result.empty()) out << "<br><span class=\"not-measured\">" << escape(s.result) << "</span>";
  else if (!s.setting.empty() && !verified) out << "<br><span class=\"not-measured\">Not measured (--no-verify)</span>";
  out << "</li>\n";
}

/// The suggestions, the ones tried without gain, and a chart of the runs against L0.
void suggestions_html(const doctor_report& r, std::ostream& out) {
  out << "<section id=\"suggestions\"><h2>Suggestions</h2>\n";
  if (r.suggestions.empty())
    out << "<p>None: " << (r.no_gain.empty() ? "no rule applies to these numbers." : "what the rules advised gained nothing when it was tried.")
        << "</p>\n";
  else out << "<ul class=\"suggestions\">\n";
  for (const auto& s : r.suggestions) suggestion_item(s, r.verified, out);
  if (!r.suggestions.empty()) out << "</ul>\n";
  if (!r.no_gain.empty()) {
    out << "<h3>Tried, no gain (not advice)</h3><ul class=\"suggestions\">\n";
    for (const auto& s : r.no_gain) suggestion_item(s, r.verified, out);
    out << "</ul>\n";
  }
  const doctor_mode* l0 = r.mode("L0");
  std::vector<html::bar> bars;
  for (const auto* list : {&r.suggestions, &r.no_gain})
    for (const auto& s : *list)
      if (s.measured)
        bars.push_back({s.trial.id + " " + s.trial.name, s.trial.images_per_s, 0, "",
                        num(s.trial.images_per_s, 1) + " (" + (s.gain >= 0 ? "+" : "") + pct(s.gain) + ")", false});
  if (!bars.empty() && l0 != nullptr && l0->ran) {
    bars.insert(bars.begin(), html::bar{"L0 as measured", l0->images_per_s, 0, "", num(l0->images_per_s, 1)});
    out << html::figure(html::bar_chart("chart-trials", "The suggestions' runs against the full pipeline",
                                        "Images per second of the full pipeline (L0) and of each run with a suggested change.",
                                        bars, "images/s"));
  }
  out << "</section>\n";
}

/// The ladder's throughput per mode.
void ladder_html(const doctor_report& r, std::ostream& out) {
  std::vector<html::bar> bars;
  std::string words = "Images per second of each mode of the ladder, the same step in each:";
  for (const auto& m : r.modes) {
    html::bar b{m.id + " " + m.name, m.ran ? m.images_per_s : NAN, 0, m.ran ? "" : m.note,
                m.ran ? num(m.images_per_s, 1) + " (wait " + pct(m.consumer_wait) + ")" : ""};
    bars.push_back(std::move(b));
    words += " " + m.id + " " + (m.ran ? num(m.images_per_s, 1) : std::string("not run")) + ";";
  }
  out << "<section id=\"ladder\"><h2>The ladder: throughput per mode</h2>\n<p>Each mode caches the data past one more stage; "
         "the gap between two modes is what the stage between them costs.</p>\n";
  out << html::figure(html::bar_chart("chart-ladder", "Throughput per mode", words, bars, "images/s"));
  out << "</section>\n";
}

/// A stage's (or a transform's) bar: its cost, or why it has none.
html::bar stage_bar(const doctor_stage& s, const std::string& label) {
  const bool measured = std::isfinite(s.ms_per_image);
  return {label, s.ms_per_image, 0, measured ? (s.within_noise ? "within noise" : "") : "not measured",
          measured ? num(s.ms_per_image, 3) + " ms, " + pct(s.share) : ""};
}

/// The stage costs as a waterfall: from the full pipeline's time per image down by each stage.
void stages_html(const doctor_report& r, std::ostream& out) {
  const doctor_mode* l0 = r.mode("L0");
  if (l0 == nullptr || !l0->ran || !(l0->images_per_s > 0)) return;
  std::vector<html::bar> bars;
  double level = 1e3 / l0->images_per_s;
  bars.push_back({"L0 full pipeline", level, 0, "", num(level, 3) + " ms"});
  std::string words = "Time per image of the full pipeline, " + num(level, 3) + " ms, and what each stage costs of it:";
  for (const auto& s : r.stages) {
    const bool hot = std::find(r.bottleneck.begin(), r.bottleneck.end(), s.name) != r.bottleneck.end();
    html::bar b = stage_bar(s, s.label);
    b.highlight = hot;
    b.data = "data-stage=\"" + escape(s.name) + "\"";
    if (std::isfinite(s.ms_per_image)) {
      level = std::max(0.0, level - s.ms_per_image);
      b.start = level;
    }
    words += " " + s.label + (std::isfinite(s.ms_per_image) ? " " + num(s.ms_per_image, 3) + " ms" : " not measured") +
             (hot ? " (bottleneck)" : "") + ";";
    bars.push_back(std::move(b));
  }
  out << "<section id=\"stages\"><h2>Stage costs</h2>\n<p>A waterfall: from the full pipeline's time per image, each "
         "stage's cost (what caching past it saves), costliest in the alarm colour when it is the bottleneck.</p>\n";
  out << html::figure(html::bar_chart("chart-stages", "Stage costs (ms per image)", words, bars, "ms per image"));
  if (!r.transforms.empty()) {
    std::vector<html::bar> t;
    std::string tw = "Time per image each host transform costs (the per-transform ladder):";
    for (const auto& s : r.transforms) {
      t.push_back(stage_bar(s, s.name));
      tw += " " + s.name + (std::isfinite(s.ms_per_image) ? " " + num(s.ms_per_image, 3) + " ms;" : " not measured;");
    }
    out << html::figure(html::bar_chart("chart-transforms", "Transform costs (ms per image)", tw, t, "ms per image"));
  }
  out << "</section>\n";
}

/// The consumer's wait per step over a mode's time.
std::string wait_chart(const doctor_mode& m, const std::string& id) {
  html::series s{m.id + " " + m.name, m.step_end_s, m.step_wait_ms, "s1", true};
  const std::string words = "The consumer's wait for each batch over the " + num(m.seconds, 1) + " s of mode " + m.id + " (" +
                            m.name + "): it waited " + pct(m.consumer_wait) + " of the time, the longest wait " +
                            num(m.max_wait_ms, 1) + " ms, " + pct(m.wait_top_share) + " of the wait in the slowest tenth of steps.";
  return html::figure(html::line_chart(id, "Consumer wait per step, " + m.id + " (" + m.name + ")", words, {s}, "seconds into the mode",
                                       "wait (ms)"));
}

void waits_html(const doctor_report& r, std::ostream& out) {
  const doctor_mode* l0 = r.mode("L0");
  // The fastest mode the loader runs (L1-L3, T*): L4 and L5 replay batches and never wait.
  const doctor_mode* best = nullptr;
  for (const auto& m : r.modes)
    if (m.ran && m.id != "L0" && m.id != "L4" && m.id != "L5" && (best == nullptr || m.images_per_s > best->images_per_s)) best = &m;
  if ((l0 == nullptr || !l0->ran || l0->step_end_s.empty()) && best == nullptr) return;
  out << "<section id=\"waits\"><h2>Where the consumer waits</h2>\n<p>The full pipeline (L0) and the fastest cached mode the "
         "loader runs: columns are the waits for a batch, so stalls show where they happen.</p>\n";
  if (l0 != nullptr && l0->ran && !l0->step_end_s.empty()) out << wait_chart(*l0, "chart-wait-l0");
  if (best != nullptr && !best->step_end_s.empty()) out << wait_chart(*best, "chart-wait-best");
  out << "</section>\n";
}

/// The tuner's path: workers and prefetch over its windows, each change with its reason.
void tuner_html(const doctor_report& r, std::ostream& out) {
  out << "<section id=\"tuner\"><h2>The tuner</h2>\n";
  if (!r.tuned || r.tuning.path.empty()) {
    out << "<p>" << (r.tuned ? "The tuning pass judged no window." : "Not tuned: workers and prefetch were given (" +
                                                                         std::to_string(r.workers) + " and " + std::to_string(r.prefetch) + ").")
        << "</p>\n</section>\n";
    return;
  }
  const auto& path = r.tuning.path;
  html::series w{"workers", {}, {}, "s1"}, p{"prefetch", {}, {}, "s2"};
  std::string words = "Workers and prefetch over the tuner's " + std::to_string(path.size()) + " judged windows; it " +
                      (r.tuning.settled ? "settled" : "had not settled") + " on workers " + std::to_string(r.tuning.workers) +
                      " and prefetch " + std::to_string(r.tuning.prefetch) + ". Changes:";
  for (std::size_t i = 0; i < path.size(); ++i) {
    for (auto* s : {&w, &p}) s->x.push_back(static_cast<double>(path[i].index));
    w.y.push_back(static_cast<double>(path[i].workers));
    p.y.push_back(static_cast<double>(path[i].prefetch));
    if (!path[i].changed) continue;
    const std::size_t was_workers = i > 0 ? path[i - 1].workers : 0, was_prefetch = i > 0 ? path[i - 1].prefetch : 0;
    for (auto* s : {&w, &p}) {
      const bool moved = s == &w ? path[i].workers != was_workers : path[i].prefetch != was_prefetch;
      if (!moved) continue;
      s->marked.push_back(i);
      s->marks.push_back("window " + std::to_string(path[i].index) + ": " + path[i].reason);
    }
    words += " window " + std::to_string(path[i].index) + ": " + path[i].reason + ";";
  }
  out << "<p>" << escape(r.tuning.to_string()) << " (" << num(r.tuning_seconds, 1) << " s; every mode ran with the result)</p>\n";
  html::chart c = html::line_chart("chart-tuner", "The tuner's path", words, {w, p}, "window", "count");
  c.numbers.head = {"window", "workers", "prefetch", "images/s", "wait", "judgement"};
  c.numbers.rows.clear();
  for (const auto& x : path)
    c.numbers.rows.push_back({std::to_string(x.index), std::to_string(x.workers), std::to_string(x.prefetch), num(x.images_per_s, 1),
                              pct(x.consumer_wait), (x.changed ? "changed: " : "") + x.reason});
  out << html::figure(c) << "</section>\n";
}

void machine_html(const doctor_report& r, std::ostream& out) {
  out << "<section id=\"machine\"><h2>Machine and command</h2>\n<table><tbody>";
  for (const auto& f : r.machine) out << "<tr><th scope=\"row\">" << escape(f.name) << "</th><td>" << escape(f.value) << "</td></tr>";
  out << "<tr><th scope=\"row\">node plan cores</th><td>" << r.plan_cores << " (" << escape(r.plan_cores_source) << ")</td></tr>";
  out << "</tbody></table>\n<p>Command:</p><pre><code>" << escape(r.command) << "</code></pre>\n</section>\n";
}

}  // namespace

std::string doctor_report::to_html() const {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
         "<meta name=\"generator\" content=\"pinfeed doctor\">\n<title>pinfeed doctor: "
      << escape(pipeline) << "</title>\n<style>" << kStyle << "</style></head>\n<body><main>\n";
  header_html(*this, out);
  verdict_html(*this, out);
  suggestions_html(*this, out);
  ladder_html(*this, out);
  stages_html(*this, out);
  waits_html(*this, out);
  tuner_html(*this, out);
  machine_html(*this, out);
  out << "</main></body></html>\n";
  return out.str();
}

}  // namespace pinfeed
