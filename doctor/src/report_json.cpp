// The doctor's report as JSON (doctor/schema/doctor-report.schema.json).
#include <cmath>

#include <nlohmann/json.hpp>

#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/remote.hpp"

namespace pinfeed {

namespace {

using nlohmann::json;

json finite(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json mode_json(const doctor_mode& m) {
  json x{{"id", m.id}, {"name", m.name}, {"skips", m.skips}, {"ran", m.ran}, {"note", m.note}};
  if (!m.ran) return x;
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
  x["timeline"] = {{"end_s", m.step_end_s}, {"wait_ms", m.step_wait_ms}};
  return x;
}

json stage_list(const std::vector<doctor_stage>& v) {
  json a = json::array();
  for (const auto& s : v)
    a.push_back({{"name", s.name}, {"label", s.label}, {"from", s.from}, {"to", s.to},
                 {"ms_per_image", finite(s.ms_per_image)}, {"within_noise", s.within_noise}, {"share", s.share}});
  return a;
}

json decode_json(const doctor_report& r) {
  if (r.decode_path.empty()) return nullptr;
  json j{{"path", r.decode_path}, {"device", r.decoded.device}, {"host", r.decoded.host},
         {"choice", r.decode_choice}, {"why", r.decode_why}};
  j["host_by_reason"] = json::object();
  for (const auto& [reason, n] : r.decoded.host_by_reason) j["host_by_reason"][reason] = n;
  if (r.decode_probe) {
    const auto& p = *r.decode_probe;
    j["probe"] = {{"samples", p.samples}, {"device", p.device}, {"host_decode_ms", finite(p.host_decode_ms)},
                  {"host_half_ms", finite(p.host_half_ms)}, {"ratio", finite(p.ratio())}};
  } else {
    j["probe"] = nullptr;
  }
  return j;
}

json suggestion_list(const std::vector<doctor_suggestion>& v) {
  json a = json::array();
  for (const auto& s : v) {
    const bool named = !s.setting.empty();
    a.push_back({{"what", s.what},
                 {"evidence", s.evidence},
                 {"setting", named ? json(s.setting) : json(nullptr)},
                 {"value", named ? json(s.value) : json(nullptr)},
                 {"measured", s.measured},
                 {"result", s.result.empty() ? json(nullptr) : json(s.result)},
                 {"gain", s.measured ? finite(s.gain) : json(nullptr)},
                 {"significant", s.significant},
                 {"trial", s.measured ? mode_json(s.trial) : json(nullptr)}});
  }
  return a;
}

}  // namespace

std::string doctor_report::to_json() const {
  json j;
  j["schema"] = "pinfeed.doctor/3";
  j["pipeline"] = pipeline;
  j["device"] = device;
  j["command"] = command;
  j["machine"] = json::array();
  for (const auto& f : machine) j["machine"].push_back({{"name", f.name}, {"value", f.value}});
  j["workers"] = workers;
  j.update({{"hardware_threads", hardware_threads}, {"plan_cores", plan_cores}, {"plan_cores_source", plan_cores_source}});
  j["batch_size"] = batch_size;
  j["prefetch"] = prefetch;
  j["pool"] = pool;
  j["step_ms"] = step_ms;
  j["user_step"] = user_step;
  if (tuned) {
    j["tuning"] = json::parse(tuning.to_json());
    j["tuning"]["seconds"] = tuning_seconds;
  }
  if (compared)
    j["comparison"] = {{"tuned_images_per_s", tuned_images_per_s},
                       {"baseline_images_per_s", baseline_images_per_s},
                       {"baseline_workers", baseline_workers},
                       {"baseline_prefetch", baseline_prefetch},
                       {"expected_speedup", expected_speedup}};
  j["modes"] = json::array();
  for (const auto& m : modes) j["modes"].push_back(mode_json(m));
  j["stages"] = stage_list(stages);
  j["transforms"] = stage_list(transforms);
  j["bottleneck"] = bottleneck;
  j["verdict"] = verdict;
  j["caveat"] = caveat.empty() ? json(nullptr) : json(caveat);
  j["bad_samples"] = bad_samples;
  j["replaced"] = replaced;
  j["fetch"] = remote ? json::parse(loaders::to_json(fetch)) : json(nullptr);
  j["decode"] = decode_json(*this);
  j["augment"] = augment_steps.empty() ? nullptr
                                       : json{{"path", augment_path}, {"steps", augment_steps}, {"not_on_device", augment_why},
                                              {"host_ms_per_image", augment_host_ms >= 0 ? json(augment_host_ms) : json(nullptr)},
                                              {"device_ms_per_image", augment_device_ms >= 0 ? json(augment_device_ms) : json(nullptr)}};
  j["verified"] = verified;
  j["suggestions"] = suggestion_list(suggestions);
  j["no_gain"] = suggestion_list(no_gain);
  return j.dump(2);
}

}  // namespace pinfeed
