#pragma once
/// @file doctor.hpp
/// Finds what starves the consumer by caching at each stage of a pipeline (the caching method
/// that README describes, automated). The same pipeline runs in a ladder of modes, each for a fixed
/// number of steps after a warm-up, with the same consumer step:
///
///   L0 full pipeline                  L3 processed samples cached (transforms skipped)
///   L1 stored bytes cached (no reads) L4 host batches cached (workers skipped: copy + step)
///   L2 decoded images cached          L5 device batches cached (step only: the ceiling)
///
/// plus a per-transform ladder (cached after transform 1, 1..2, ...) that prices each transform.
/// Caches hold a pool of distinct samples (64 by default), so variable-size inputs are represented.
/// The time per image a stage costs is what skipping it saves; the verdict names the stages that
/// cost the most, and suggestions quote the numbers behind them.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed {

/// What the consumer's step sees: every field of one batch as a [size, ...] tensor, in host memory
/// (CPU path) or device memory; on a GPU, work queued on `stream` sees the data.
struct step_batch {
  std::vector<tensor_view> fields;
  std::vector<std::string> names;  ///< fields[i]'s name (the source's field order)
  std::size_t size = 0;
  cudaStream_t stream = nullptr;

  /// The field called `name`. Throws std::out_of_range naming it and the fields there are.
  [[nodiscard]] const tensor_view& field(std::string_view name) const;
  /// The field called `name` as elements of T (see batch::field<T>).
  template <class T>
  [[nodiscard]] typed_view<T> field(std::string_view name) const {
    return field(name).typed<T>("step field '" + std::string(name) + "'");
  }
};
/// A training step: called once per batch on the consumer thread. On a GPU it should queue its work
/// on the batch's stream and return (the doctor synchronizes at the end of each mode).
using step_function = std::function<void(const step_batch&)>;

/// Batch b as the step sees it.
[[nodiscard]] step_batch step_view(const batch& b);

/// The consumer that the doctor's modes and `pinfeed run` share: a pointwise tail (uint8 HWC ->
/// float CHW, where the batch is: the pipeline's device tail, or run's --normalize), then the step:
/// `step`, or else `step_ms` of busy time (a kernel on the batch's stream; the calling thread for
/// host batches or with step_on "host").
class batch_consumer {
 public:
  struct options {
    std::optional<ops::normalize_params> tail;
    step_function step;
    double step_ms = 0;
    std::string step_on = "auto";  ///< auto, host or device
  };
  /// `image`: the batches' image field (uint8 [H, W, 3] when there is a tail; std::invalid_argument
  /// naming its dtype otherwise); `gpu`: the batches are on the current device.
  batch_consumer(options o, const field_spec& image, std::size_t batch_size, bool gpu);
  void operator()(const step_batch& b);

 private:
  options o_;
  ops::image_batch_shape shape_{};
  device_buffer device_out_;
  std::vector<float> host_out_;
};

/// The pipeline under examination: a reader (behind make_slow_storage() to emulate slow storage),
/// its transforms and the source options (error policy, device tail); the doctor puts its caches
/// around the reader (pinfeed/doctor/stages.hpp).
/// Or, instead of a reader, any source of the trainer's own (`own`): it has no read, decode or
/// transform stages the doctor can see, so its ladder is L0, L3 (a pool of its produced samples),
/// L4 and L5, and the stage it prices is "produce".
struct doctor_pipeline {
  std::shared_ptr<loaders::image_reader> reader{};
  loaders::pipeline steps{};
  loaders::pipeline_source_options source{};
  std::shared_ptr<pinfeed::source> own{};
};

struct doctor_mode;

struct doctor_options {
  loader_options  loader{};       ///< batch size, workers, prefetch, device, seed, order, consumer stream
  /// Timed steps per mode: at least `steps`, and more until `min_mode_seconds` have passed (short
  /// modes would measure noise), but a mode stops after `max_mode_seconds` once `min_steps` are done.
  std::size_t steps = 20;
  double min_mode_seconds = 1.0;
  double max_mode_seconds = 10;
  std::size_t min_steps = 3;
  std::size_t warmup = 3;        ///< untimed steps first (more when the cache pool spans more batches)
  /// The stand-in step: `step_ms` busy milliseconds per batch, as a calibrated kernel on the consumer
  /// stream with a GPU, on the consumer thread without one. 0 measures the pipeline alone.
  double step_ms = 0.0;
  /// Where the stand-in step runs: "auto" (the GPU when batches go there, else the consumer
  /// thread), "host" (the consumer thread, even with a GPU: a host-bound training step) or
  /// "device" (a kernel; an error without a GPU).
  std::string step_on = "auto";
  /// A user step instead of step_ms (then the report's caveat says its time may depend on data).
  step_function step{};
  /// Distinct samples each cache holds; 0: 64, or the dataset when it is smaller. A pool larger
  /// than the dataset is an error.
  std::size_t pool = 0;
  bool per_transform = true;     ///< run the per-transform ladder
  /// Modes to run ("L0".."L5", "T1".."Tn"); empty: the whole ladder.
  std::vector<std::string> modes{};
  std::string trace_mode{};        ///< write a Chrome trace of this mode ("L0", ...) to trace_path
  std::string trace_path{};
  /// Called after each mode (progress output).
  std::function<void(const doctor_mode&)> on_mode{};
  /// Recommend settings: tune workers and prefetch (as auto_tune does) even where `loader` fixes
  /// them, then time the full pipeline with the tuned settings and with the ones it started from
  /// (those of `loader`, the library's defaults for auto: as many workers as TBB allows, prefetch
  /// 2), side by side: doctor_report::expected_speedup.
  bool recommend = false;
  /// The tuning pass (before the ladder, when workers or prefetch is auto or `recommend`): it ends
  /// once the tuner has settled and held for three windows, or after this long.
  double max_tuning_seconds = 30;
  /// Measure each suggestion that names a setting (workers, prefetch, requests in flight, the
  /// remote shard cache) before it is given: the full pipeline runs once more with the change, as
  /// a mode of its own (S1, S2, ...), and a change that gains nothing beyond the noise is listed
  /// as "no gain" instead (doctor_report::no_gain). False (`--no-verify`): the rules' advice as
  /// is, marked unmeasured.
  bool verify = true;
  /// How the doctor was started, as the report shows it (`pinfeed doctor` puts its command line
  /// here); empty: "the C++ API (pinfeed::doctor)".
  std::string command{};
};

/// One rung of the ladder.
struct doctor_mode {
  std::string id;     ///< "L0".."L5", "T1".. (cached after host transform k)
  std::string name;   ///< "full pipeline", "processed samples cached", "after mask(0.25)", ...
  std::string skips;  ///< what the mode leaves out
  bool ran = false;
  std::string note;   ///< why it did not run, or what it stands for ("same as L2: ...")
  std::size_t steps = 0;
  std::size_t images = 0;
  double seconds = 0;
  double steps_per_s = 0, images_per_s = 0;
  double consumer_wait = 0;    ///< fraction of the timed wall time the consumer waited for a batch
  double wait_top_share = 0;   ///< share of that wait spent in the 10% slowest waits (burstiness)
  double max_wait_ms = 0;      ///< the longest single wait for a batch
  double cpu_utilization = 0;  ///< process CPU time / (wall time x the node plan's cores), in [0, 1]
  /// Standard error of the mean time per image over the mode's steps (ms): how far a repeated run
  /// of the mode could plausibly land from this one.
  double noise_ms_per_image = 0;
  /// The consumer's wait over the mode's time: for each timed step (or, past kTimelinePoints
  /// steps, each run of consecutive steps, with its longest wait), when it ended (s from the
  /// mode's start) and how long the consumer waited for its batch (ms).
  std::vector<double> step_end_s, step_wait_ms;
  static constexpr std::size_t kTimelinePoints = 600;
};

/// The time per image a stage costs: what caching past it saves.
struct doctor_stage {
  std::string name;               ///< "read", "decode", "transforms", "loader", "copy", or a transform
  std::string label;              ///< the same in words, e.g. "reading the raw images (generating them)"
  std::string from, to;           ///< the modes compared
  double ms_per_image = 0;        ///< >= 0; NaN when a mode it needs was not measured
  /// The difference is negative or not above twice the two modes' combined noise: printed as
  /// "within noise", and counted as 0 in the shares and the verdict.
  bool within_noise = false;
  double share = 0;               ///< of the sum over the stages of its list, in [0, 1]
};

struct doctor_suggestion {
  std::string what;      ///< the change, e.g. "raise workers from 2 to 4"
  std::string evidence;  ///< the number behind it
  /// The setting it names, which the doctor can try: "workers", "prefetch", "requests_in_flight"
  /// or "remote_cache_bytes", with the value it proposes; empty when it names none.
  std::string setting;
  std::uint64_t value = 0;
  /// Its run (doctor_options::verify): the full pipeline with the change, as a mode ("S1", ...),
  /// against L0; gain: images/s over L0's, less 1; significant: the time per image moved by more
  /// than twice the two runs' combined noise. result, e.g. "prefetch 5: +12% images/s, wait 24%
  /// -> 6%", or why it was not measured.
  bool measured = false;
  doctor_mode trial{};
  double gain = 0;
  bool significant = false;
  std::string result;
};

/// One fact of the machine the report came from, as `pinfeed info` prints it ("CPU", "CUDA
/// driver", "TBB", ...).
struct machine_fact {
  std::string name, value;
};
/// The machine's facts: pinfeed's version and build, the CPU, hardware threads, the GPU (or none,
/// and why), CUDA runtime and driver, TBB, the SIMD level, the JPEG Huffman decoder, DLPack and
/// nlohmann_json.
[[nodiscard]] std::vector<machine_fact> describe_machine();

struct doctor_report {
  std::string pipeline, device;
  std::size_t workers = 0, batch_size = 0, prefetch = 0, hardware_threads = 0, pool = 0;
  /// The cores the node plan gives this process (pinfeed::this_node_plan().rank_cores), and why.
  std::size_t plan_cores = 0;
  std::string plan_cores_source;
  double step_ms = 0;
  bool user_step = false;
  // What the analysis needs to know of the pipeline.
  bool gpu = false;              ///< batches went to a GPU
  bool encoded = false;          ///< the reader decodes stored files (else L1 is the same as L2)
  bool sharded = false;          ///< ... read from tar shards
  bool remote = false;           ///< ... over HTTP(S) or S3 (make_remote_shard_reader)
  /// What the remote reader fetched during the whole diagnosis (all zeros unless remote):
  /// requests, retries, bytes, the readers' wait, whole-shard fetches, samples range-read for want
  /// of cache room, the window (0: range reads) and the cache's cap.
  loaders::remote_counters fetch;
  bool varying_sizes = false;    ///< the source's images differ in size
  bool float_images = false;     ///< the image field crosses to the device as float (4x uint8)
  bool planned_decode = false;   ///< the first transform lets JPEGs decode a window or at a DCT scale
  bool own_source = false;       ///< a source of the trainer's own: one "produce" stage
  std::size_t batch_bytes = 0;   ///< bytes per full batch
  /// The host transforms in order (a fused colour/scale tail counts as one); mode Tk caches after
  /// the first k of them.
  std::vector<std::string> transform_names;
  std::vector<doctor_mode> modes;
  std::vector<doctor_stage> stages;      ///< read, decode, transforms, loader, copy (the ladder's deltas)
  std::vector<doctor_stage> transforms;  ///< each host transform (the per-transform ladder)
  std::vector<std::string> bottleneck;   ///< the stages named, costliest first; empty: none
  std::string verdict;                   ///< one sentence
  std::string caveat;                    ///< empty unless the step time may depend on the data
  /// Under --on-error skip: distinct bad samples the full pipeline (L0) met, and the slots they cost
  /// (filled by a stand-in), over all of L0's epochs. 0 for a source of the trainer's own.
  std::uint64_t bad_samples = 0, replaced = 0;
  /// JPEG decoding, for readers of encoded files (decode_path empty otherwise): where the full
  /// pipeline (L0) decoded ("host" or "device") and its counts; the device path's host half
  /// against the host path's decode on some of the files (when the device path can take the
  /// pipeline); and which the doctor advises, with why (--write-config records it).
  std::string decode_path;
  loaders::decode_counts decoded{};
  std::optional<loaders::decode_probe> decode_probe{};
  std::string decode_choice, decode_why;
  /// The steps after the decode's window and flips (pipeline_source's augment_on; augment_steps
  /// empty where there are none): where the full pipeline ran them ("host" or "device"), why they
  /// cannot run on the device (empty: they can), and what they cost an image: on a worker (one
  /// thread, the images of the pipeline's first samples), and on the GPU (batches of 64; -1 where
  /// no GPU takes the batches, or the steps cannot move).
  std::string augment_path, augment_steps, augment_why;
  double augment_host_ms = -1, augment_device_ms = -1;
  /// What to change, each with the numbers behind it; with doctor_options::verify, each that names
  /// a setting measured with a gain beyond the noise (the others move to no_gain).
  std::vector<doctor_suggestion> suggestions;
  /// Suggestions that were tried and measured no gain beyond the noise (not advice).
  std::vector<doctor_suggestion> no_gain;
  bool verified = false;  ///< the suggestions that name a setting were measured
  /// Where the report came from: describe_machine(), and the command (doctor_options::command).
  std::vector<machine_fact> machine;
  std::string command;
  /// The settings the ladder ran with, as the tuning pass chose them (tuned: it ran; then every
  /// mode ran with the workers and prefetch it chose, fixed).
  bool tuned = false;
  loader::tuning_report tuning;
  double tuning_seconds = 0;
  /// With doctor_options::recommend: the full pipeline timed with the tuned settings and with the
  /// ones it started from (baseline_workers, baseline_prefetch), and their ratio.
  bool compared = false;
  std::size_t baseline_workers = 0, baseline_prefetch = 0;
  double tuned_images_per_s = 0, baseline_images_per_s = 0, expected_speedup = 0;

  /// The mode with this id, or null.
  [[nodiscard]] const doctor_mode* mode(const std::string& id) const;
  /// The table, stage deltas, bar charts, verdict, caveat and suggestions.
  [[nodiscard]] std::string to_text() const;
  /// The same as JSON (schema: see README, "Reading a doctor report").
  [[nodiscard]] std::string to_json() const;
  /// The same as one self-contained HTML page (inline CSS and SVG charts, no script, nothing
  /// fetched): the ladder's throughput, the stage costs as a waterfall, the consumer's wait over
  /// time (L0 and the fastest mode), the tuner's path, the transforms' costs, the verdict and the
  /// suggestions with their measurements, the machine and the command. Every chart has a text
  /// description and a table of its numbers for screen readers; it prints and fits a phone.
  [[nodiscard]] std::string to_html() const;
};

/// Runs the ladder. Throws std::invalid_argument for bad options (negative step time, a pool
/// larger than the dataset, an unknown mode) before running anything, and the pipeline's own errors
/// (sample_error naming the path, index and stage) when a mode cannot produce its batches.
[[nodiscard]] doctor_report doctor(const doctor_pipeline& pipeline, const doctor_options& options);
/// The pipeline of a source a loader takes: a pipeline_source (make_image_folder_source,
/// make_shard_source, ...) in its parts (its reader, transforms and options: the doctor caches at
/// each of them), any other source as a source of your own (`own`). Throws std::invalid_argument
/// for a null source.
[[nodiscard]] doctor_pipeline doctor_pipeline_of(std::shared_ptr<source> src);
/// doctor(doctor_pipeline_of(src), options): the doctor on the source the trainer's loader reads.
[[nodiscard]] doctor_report doctor(std::shared_ptr<source> src, const doctor_options& options);

/// Derives stages, verdict, caveat and suggestions from the measured modes (doctor() calls it; a
/// separate step so the rules can be checked on given numbers).
void analyze(doctor_report& report);

}  // namespace pinfeed
