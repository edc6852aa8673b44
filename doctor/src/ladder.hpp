#pragma once
// The doctor's run inside: a ladder describes the pipeline and plans its modes (doctor.cpp),
// measures each (doctor.cpp; the cached-batch modes L4 and L5 in ladder_batches.cpp), and tunes
// the settings first and measures the suggestions last (ladder_settings.cpp).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "modes.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed::doctor_run {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// What one step of a mode did.
struct step_result {
  std::size_t images = 0;
  double wait_s = 0;
};

/// Copies of whole batches laid out field after field, in host memory (pinned with a GPU) or on the
/// device, with views for the step.
struct batch_store {
  std::vector<field_spec> fields;
  std::size_t capacity = 0;  // samples per stored batch
  std::vector<std::size_t> offsets;
  std::size_t bytes = 0;

  void layout(const std::vector<field_spec>& f, std::size_t batch_size) {
    fields = f;
    capacity = batch_size;
    offsets.clear();
    bytes = 0;
    for (const auto& x : fields) {
      bytes = (bytes + 255) / 256 * 256;
      offsets.push_back(bytes);
      bytes += x.bytes() * batch_size;
    }
  }
  step_batch view(std::byte* base, std::size_t size, memory_location where, cudaStream_t stream) const {
    step_batch v;
    v.size = size;
    v.stream = stream;
    for (std::size_t f = 0; f < fields.size(); ++f) {
      tensor_view t;
      t.data = base + offsets[f];
      t.type = fields[f].type;
      t.shape.push_back(static_cast<std::int64_t>(size));
      for (auto e : fields[f].shape) t.shape.push_back(e);
      t.location = where;
      v.fields.push_back(std::move(t));
      v.names.push_back(fields[f].name);
    }
    return v;
  }
};

/// The loader's next batch, starting the next epoch when one ends (modes run across epochs).
[[nodiscard]] batch next_cycling(loader& l, const std::string& what);

/// Everything doctor() checks before anything runs; returns the cache pool and the device.
[[nodiscard]] std::pair<std::size_t, device_choice> check_request(const doctor_pipeline& p, const doctor_options& o);

/// One run of the ladder: describe the pipeline, plan the modes, measure each, report.
class ladder {
 public:
  ladder(const doctor_pipeline& p, const doctor_options& o);

  ladder(const ladder&) = delete;
  ladder& operator=(const ladder&) = delete;
  /// On every path (a failed mode's too): the consumer's queued work finishes before its buffers
  /// go, and the members holding device memory (declared after the guard) before it gives the device back.
  ~ladder();

  doctor_report run();

 private:
  /// The source a mode runs: the pipeline (or the own source) with a cache at a stage.
  std::shared_ptr<source> source_for(const sample_cache& cache) const;

  /// Runs each suggestion that names a setting: the full pipeline with the change, as a mode of
  /// its own (S1, ...), judged against L0; the ones that gain nothing move to no_gain.
  void verify();

  /// The report's facts of the pipeline, which the analysis reads.
  void describe();
  /// The report's decode facts: where L0 decoded, the device path's probe, and the advice.
  void judge_decode();
  /// Where the steps after the decode ran, and their cost an image on a worker and on the GPU.
  void judge_augment();

  std::size_t pool_batches() const { return (pool_ + o_.loader.batch_size - 1) / o_.loader.batch_size; }

  /// Sleeps (no spinning: the workers need the cores) until the consumer stream's work is done.
  void drain_consumer();

  /// Runs `one` for the warm-up (the caches fill inside it), then timed; fills the mode's numbers.
  void measure(doctor_mode& m, const std::function<step_result()>& one, const std::function<void()>& reset);

  /// The full pipeline under a loader that tunes: runs until the tuner has settled and held three
  /// windows (or max_tuning_seconds), then fixes the ladder's workers and prefetch to its choice.
  /// With recommend, then times the full pipeline with them and with the settings it started from.
  void tune();

  /// One step on the loader's next batch, which `current` holds until the next step (the last
  /// one's slot goes back before the wait).
  step_result loader_step(loader& l, std::optional<batch>& current, const std::string& what);

  /// Measures `m`: a loader over `src` under `lo`, the step on each batch; `after` sees the loader
  /// when done. Returns the workers it ran.
  std::size_t run_measured(doctor_mode& m, std::shared_ptr<source> src, const loader_options& lo,
                           const std::function<void(const loader&)>& after = {});
  std::size_t measure_loader(doctor_mode& m, loader& l, const std::function<void(const loader&)>& after = {});

  /// A suggestion's run (verify()): where it ran, the loader made for it, or why none could be.
  struct trial_setup {
    std::optional<loader> l;
    std::string failed;  ///< why the change could not be made (then l is empty)
    bool remote = false;
  };
  trial_setup set_up_trial(const doctor_suggestion& s);
  /// What a trial is judged against: L0, or where L0 is not comparable (a remote reader made anew
  /// starts cold; a traced L0 ran slower), a run of the unchanged pipeline measured the same way.
  const doctor_mode* control_for(bool remote);
  doctor_mode fresh_control_{}, untraced_control_{};

  /// L0-L3 and T1..: the loader over the mode's source, the step on each batch.
  void run_loader(plan_entry& e);

  /// Modes L4 and L5 replay whole batches made once from a pool of finished samples.
  void make_batches();

  /// L4 on the CPU path: the step on cached host batches.
  void run_host_batches(doctor_mode& m);

  /// With a GPU: L4 copies each cached host batch and steps on it, L5 steps on batches already there.
  void run_device_batches(doctor_mode& m, bool copy_each);

  const doctor_pipeline& p_;
  const doctor_options& o_;
  std::pair<std::size_t, device_choice> checked_;
  std::size_t pool_;
  device_choice dev_;
  bool gpu_;
  std::shared_ptr<loaders::pipeline_source> piped_;
  std::shared_ptr<source> full_;
  std::vector<std::shared_ptr<loaders::transform>> host_steps_;
  doctor_report r_;
  std::vector<plan_entry> plan_;
  // While running; destroyed in reverse: device memory first, the device guard last.
  std::optional<device_guard> on_device_;
  cuda_stream own_stream_;
  loader_options loader_options_;
  cudaStream_t consumer_stream_ = nullptr;
  cuda_event drained_;
  std::optional<batch_consumer> consume_;
  batch_store store_;
  host_buffer host_batches_;
  std::vector<std::size_t> batch_sizes_;
};

}  // namespace pinfeed::doctor_run
