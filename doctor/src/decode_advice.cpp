// Where to decode JPEGs: the full pipeline's counts, the device path's host half timed against the
// host path's decode on files spread over the dataset, and which the doctor advises.
#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "ladder.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"

namespace pinfeed::doctor_run {

namespace {
/// Files the probe decodes both ways: enough to tell the ratio, few enough to take well under a
/// second of one core on photos.
constexpr std::uint64_t kProbeFiles = 32;
/// The host half must save at least this share of the decode's CPU time to be advised.
constexpr double kWorthIt = 0.9;
}  // namespace

void ladder::judge_decode() {
  if (!piped_ || !p_.reader || !p_.reader->stores_encoded()) return;
  r_.decode_path = loaders::to_string(piped_->decode_path());
  r_.decoded = piped_->decoded();
  r_.decode_choice = "host";
  if (const std::string& refusal = piped_->device_refusal(); !refusal.empty()) {
    r_.decode_why = "the device path cannot take this pipeline: " + refusal;
    return;
  }
  const std::uint64_t size = p_.reader->size(), n = std::min(kProbeFiles, size);
  std::vector<std::uint64_t> indices;
  for (std::uint64_t k = 0; k < n; ++k) indices.push_back(k * size / n);
  try {
    r_.decode_probe = loaders::probe_decode_paths(p_.reader, piped_->host_steps(), indices,
                                                   piped_->options().device_bytes_per_sample);
  } catch (const std::exception& e) {
    r_.decode_why = std::string("the probe failed: ") + e.what();
    return;
  }
  const loaders::decode_probe& p = *r_.decode_probe;
  const std::string figures = p.to_string();
  if (!gpu_) {
    r_.decode_why = "no GPU takes the batches here; on one: " + figures;
  } else if (p.device == 0 || p.device * 2 < p.samples) {
    r_.decode_why = "the device path would take too few of the files: " + figures;
  } else if (p.ratio() > kWorthIt) {
    r_.decode_why = "the device path's host half saves little: " + figures;
  } else {
    r_.decode_choice = "device";
    r_.decode_why = figures + "; the steps after the decode move to the GPU as well";
  }
}

}  // namespace pinfeed::doctor_run
