// pinfeed doctor: the pipeline the options describe, run with caches at each stage.
#include <cstdio>
#include "pinfeed/runtime/detail/read_file.hpp"
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "commands.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pipeline_options.hpp"

namespace pinfeed::tool {
namespace {

struct doctor_args {
  double step_ms = 0, min_mode_seconds = 1, max_mode_seconds = 10;
  std::size_t steps = 20, warmup = 3, pool = 0;
  std::string modes, json, html, trace, trace_mode = "L0", step_on = "auto", write_config;
  bool no_per_transform = false, no_verify = false;
};

/// A report file, opened before the diagnosis runs (a path that cannot be written is an error at
/// once, not after the ladder), written after it.
class report_file {
 public:
  report_file(std::string path, const char* what) : path_(std::move(path)), what_(what) {
    if (path_.empty()) return;
    errno = 0;
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) fail();
  }
  [[nodiscard]] bool wanted() const { return !path_.empty(); }
  void write(const std::string& text) {
    errno = 0;
    if (!(out_ << text) || !out_.flush()) fail();
  }

 private:
  [[noreturn]] void fail() const {
    pinfeed::detail::throw_write_failure("doctor: cannot write the " + what_ + " to '" + path_ + "'");
  }
  std::string path_, what_;
  std::ofstream out_;
};

/// The settings the doctor tuned, with the speed-up it measured, for `pinfeed run --config`.
void write_config(const doctor_report& r, const loader_options& given, const std::string& path) {
  loader_config c;
  c.workers = r.tuning.workers;
  c.prefetch = r.tuning.prefetch;
  c.memory_budget = given.memory_budget;
  if (r.remote && r.fetch.requests_in_flight > 0) c.requests_in_flight = r.fetch.requests_in_flight;
  if (!r.decode_choice.empty()) c.decode = r.decode_choice;
  c.expected_speedup = r.expected_speedup;
  char measured[512];
  std::snprintf(measured, sizeof measured,
                "pinfeed doctor on %s (%zu hardware threads): the full pipeline ran %.1f images/s with these settings, "
                "%.1f with %zu workers, prefetch %zu",
                cpu_model().c_str(), r.hardware_threads, r.tuned_images_per_s, r.baseline_images_per_s, r.baseline_workers,
                r.baseline_prefetch);
  c.measured = measured;
  c.write(path);
  std::fprintf(stderr, "doctor: settings written to %s (pinfeed run --config %s)\n", path.c_str(), path.c_str());
}

int cmd_doctor(const run_args& a, const doctor_args& d, const std::string& command) {
  const device_choice dev = resolve_device(a.device);
  doctor_options o;
  o.loader = make_loader_options(a, dev);
  o.loader.trace = false;
  o.steps = d.steps;
  o.warmup = d.warmup;
  o.min_steps = std::min<std::size_t>(3, d.steps);
  o.min_mode_seconds = d.min_mode_seconds;
  o.max_mode_seconds = d.max_mode_seconds;
  o.step_ms = d.step_ms;
  o.step_on = d.step_on;
  o.pool = d.pool;
  o.per_transform = !d.no_per_transform;
  o.recommend = !d.write_config.empty();
  o.verify = !d.no_verify;
  o.command = command;
  for (std::size_t at = 0; at < d.modes.size();) {
    const std::size_t comma = std::min(d.modes.find(',', at), d.modes.size());
    if (comma > at) o.modes.push_back(d.modes.substr(at, comma - at));
    at = comma + 1;
  }
  if (!d.trace.empty()) {
    o.trace_mode = d.trace_mode;
    o.trace_path = d.trace;
  }
  o.on_mode = [](const doctor_mode& m) {
    if (m.ran)
      std::fprintf(stderr, "doctor: %-3s %-28s %9.1f images/s, consumer wait %5.1f%%\n", m.id.c_str(), m.name.c_str(),
                   m.images_per_s, 100 * m.consumer_wait);
    else
      std::fprintf(stderr, "doctor: %-3s %-28s %s\n", m.id.c_str(), m.name.c_str(), m.note.c_str());
  };
  report_file json(d.json, "JSON report"), page(d.html, "page");
  pipeline_parts parts = make_pipeline(a, dev);
  const doctor_report r =
      doctor({std::move(parts.reader), std::move(parts.steps), std::move(parts.source), nullptr}, o);
  std::printf("%s", r.to_text().c_str());
  if (json.wanted()) json.write(r.to_json() + "\n");
  if (page.wanted()) {
    page.write(r.to_html());
    std::fprintf(stderr, "doctor: the report as a page written to %s\n", d.html.c_str());
  }
  if (!d.write_config.empty()) write_config(r, o.loader, d.write_config);
  if (!d.trace.empty()) std::fprintf(stderr, "doctor: Chrome trace of mode %s written to %s\n", d.trace_mode.c_str(), d.trace.c_str());
  return 0;
}

}  // namespace

void add_doctor(CLI::App& app, command_list& out) {
  static run_args da;  // CLI11 binds the options to them: they outlive the parse
  static doctor_args dd;
  auto* doc = app.add_subcommand("doctor", "find what starves the consumer: the pipeline run with caches at each stage");
  add_pipeline_options(doc, da);
  doc->add_option("--step-ms", dd.step_ms,
                  "the stand-in training step: busy ms per batch (a kernel on the GPU, the consumer thread without one)");
  doc->add_option("--step-on", dd.step_on, "where the step runs: auto, host (the consumer thread) or device (a kernel)");
  doc->add_option("--steps", dd.steps, "timed steps per mode")->check(CLI::PositiveNumber);
  doc->add_option("--warmup", dd.warmup, "untimed steps before each mode");
  doc->add_option("--min-mode-seconds", dd.min_mode_seconds, "time each mode at least this long (default 1)");
  doc->add_option("--max-mode-seconds", dd.max_mode_seconds, "stop a mode after this long (at least 3 steps; default 10)");
  doc->add_option("--pool", dd.pool, "distinct samples per cache (default: 64, or the dataset when smaller)");
  doc->add_option("--modes", dd.modes, "run only these modes, e.g. L0,L3 (default: the whole ladder)");
  doc->add_flag("--no-per-transform", dd.no_per_transform, "skip the per-transform ladder");
  doc->add_option("--json", dd.json, "write the report as JSON to this file");
  doc->add_option("--html", dd.html,
                  "write the report as one self-contained HTML page (inline SVG charts, nothing fetched) to this file");
  doc->add_flag("--no-verify", dd.no_verify,
                "give the suggestions without running them (by default each that names a setting is measured first)");
  doc->add_option("--write-config", dd.write_config,
                  "tune workers and prefetch, time the pipeline with them and with the settings given (or the "
                  "defaults), and write them to this file for pinfeed run --config (JSON, docs/config.md)");
  doc->add_option("--trace", dd.trace, "write a Chrome trace of one mode to this file");
  doc->add_option("--trace-mode", dd.trace_mode, "the mode traced (default L0)");
  out.push_back({doc, [] { return cmd_doctor(da, dd, command_line()); }, [] { return workers_asked(da); }});
}

}  // namespace pinfeed::tool
