#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/remote.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>


#include "analysis.hpp"
#include "ladder.hpp"
#include "modes.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed {

doctor_pipeline doctor_pipeline_of(std::shared_ptr<source> src) {
  if (!src) throw pinfeed::invalid_argument("doctor: the source is a null pointer");
  doctor_pipeline p;
  if (const auto* ps = dynamic_cast<const loaders::pipeline_source*>(src.get())) {
    p.reader = ps->reader();
    p.steps = ps->steps();
    p.source = ps->options();
  } else {
    p.own = std::move(src);
  }
  return p;
}

doctor_report doctor(std::shared_ptr<source> src, const doctor_options& options) {
  return doctor(doctor_pipeline_of(std::move(src)), options);
}

const doctor_mode* doctor_report::mode(const std::string& id) const {
  for (const auto& m : modes)
    if (m.id == id) return &m;
  return nullptr;
}

namespace doctor_run {

batch next_cycling(loader& l, const std::string& what) {
  auto b = l.next();
  if (!b) {
    l.start_epoch(l.epoch() + 1);
    b = l.next();
  }
  if (!b) throw pinfeed::runtime_error("doctor: " + what + ": the loader yielded no batch");
  return std::move(*b);
}


std::pair<std::size_t, device_choice> check_request(const doctor_pipeline& p, const doctor_options& o) {
  if (!p.reader && !p.own) throw pinfeed::invalid_argument("doctor: the pipeline has no reader and no source of its own");
  if (p.reader && p.own) throw pinfeed::invalid_argument("doctor: give a reader (with transforms) or a source of your own, not both");
  if (p.own && !p.steps.empty())
    throw pinfeed::invalid_argument("doctor: transforms go with a reader; a source of your own runs its own steps");
  if (!(o.step_ms >= 0.0) || !std::isfinite(o.step_ms))
    throw pinfeed::invalid_argument("doctor: the step time must be a finite number >= 0 ms, got " + std::to_string(o.step_ms));
  if (o.steps == 0) throw pinfeed::invalid_argument("doctor: steps per mode must be at least 1");
  if (o.min_steps == 0 || o.min_steps > o.steps)
    throw pinfeed::invalid_argument("doctor: min_steps must be in [1, steps=" + std::to_string(o.steps) + "], got " +
                                std::to_string(o.min_steps));
  if (!(o.max_mode_seconds > 0) || !(o.min_mode_seconds >= 0) || o.min_mode_seconds > o.max_mode_seconds)
    throw pinfeed::invalid_argument("doctor: mode seconds must satisfy 0 <= min (" + std::to_string(o.min_mode_seconds) +
                                ") <= max (" + std::to_string(o.max_mode_seconds) + "), max > 0");
  validate(o.loader);
  const std::uint64_t dataset = p.own ? p.own->size() : p.reader->size();
  if (o.pool > dataset)
    throw pinfeed::invalid_argument("doctor: a cache pool of " + std::to_string(o.pool) + " samples is larger than the dataset (" +
                                std::to_string(dataset) + " samples); give a pool of at most " + std::to_string(dataset));
  const std::size_t pool = o.pool != 0 ? o.pool : static_cast<std::size_t>(std::min<std::uint64_t>(64, dataset));
  const device_choice dev = resolve_device(o.loader.device);
  if (o.step_on != "auto" && o.step_on != "host" && o.step_on != "device")
    throw pinfeed::invalid_argument("doctor: step_on must be auto, host or device, got '" + o.step_on + "'");
  if (o.step_on == "device" && !dev.is_cuda())
    throw pinfeed::invalid_argument("doctor: a device step needs a GPU, but the batches go to " + dev.to_string());
  return {pool, dev};
}

/// One run of the ladder: describe the pipeline, plan the modes, measure each, report.
ladder::ladder(const doctor_pipeline& p, const doctor_options& o)
    : p_(p), o_(o), checked_(check_request(p, o)), pool_(checked_.first), dev_(checked_.second),
      gpu_(dev_.is_cuda()) {
  // The full pipeline's source tells the shapes, the host steps and the tail.
  if (!p.own) piped_ = std::make_shared<loaders::pipeline_source>(p.reader, p.steps, p.source);
  full_ = p.own ? p.own : std::shared_ptr<source>(piped_);
  if (piped_) host_steps_ = piped_->host_steps().steps();
  describe();
  plan_ = plan_modes(p_, o_, r_, pool_, piped_ && piped_->tail_params());
}

/// On every path (a failed mode's too): the consumer's queued work finishes before its buffers
/// go, and the members holding device memory (declared after the guard) before it gives the device back.
ladder::~ladder() {
  if (consumer_stream_ != nullptr) wait_for_stream_nothrow(consumer_stream_, drained_.get());
}

doctor_report ladder::run() {
  // The device stays current for the run only (the guard is a member: it outlives device memory).
  loader_options lo = o_.loader;
  if (gpu_) {
    on_device_.emplace(dev_.index);
    if (!o_.loader.stream) own_stream_ = cuda_stream::create();
    consumer_stream_ = o_.loader.stream ? *o_.loader.stream : own_stream_.get();
    lo.stream = consumer_stream_;
    drained_ = cuda_event::create();
  }
  loader_options_ = lo;
  consume_.emplace(batch_consumer::options{piped_ ? piped_->tail_params() : std::nullopt, o_.step, o_.step_ms, o_.step_on},
                   full_->fields()[0], lo.batch_size, gpu_);
  if (lo.workers == auto_tune || lo.prefetch == auto_tune || o_.recommend) tune();
  r_.prefetch = loader_options_.prefetch;
  for (auto& e : plan_) {
    doctor_mode& m = e.mode;
    if (m.note.empty()) {
      if (e.how == plan_entry::kind::loader) run_loader(e);
      else if (!gpu_) run_host_batches(m);
      else run_device_batches(m, e.how == plan_entry::kind::host_batches);
    }
    r_.modes.push_back(m);
    if (o_.on_mode) o_.on_mode(m);
  }
  if (piped_) {  // the full pipeline's source (L0)
    r_.bad_samples = piped_->failures();
    r_.replaced = piped_->replaced();
    judge_decode();
    judge_augment();
  }
  if (r_.remote) r_.fetch = loaders::remote_stats(*p_.reader);
  analyze(r_);
  if (o_.verify) verify();
  return std::move(r_);
}

/// The source a mode runs: the pipeline (or the own source) with a cache at a stage.
std::shared_ptr<source> ladder::source_for(const sample_cache& cache) const {
  if (p_.own) return cache.stage == cache_stage::finished ? make_pooled_source(p_.own, pool_) : p_.own;
  return make_cached_pipeline(piped_, cache).source;  // L0 runs `piped_` itself: its counts go into the report
}

/// The report's facts of the pipeline, which the analysis reads.
void ladder::describe() {
  r_.machine = describe_machine();
  r_.command = o_.command.empty() ? "the C++ API (pinfeed::doctor)" : o_.command;
  r_.pipeline = full_->name();
  r_.device = dev_.to_string();
  r_.batch_size = o_.loader.batch_size;
  const node_plan& plan = this_node_plan_without_gpu();  // this process's share of the cores
  r_.hardware_threads = plan.hardware_threads;
  r_.plan_cores = plan.rank_cores;
  r_.plan_cores_source = plan.rank_cores_source;
  r_.pool = pool_;
  r_.step_ms = o_.step_ms;
  r_.user_step = static_cast<bool>(o_.step);
  r_.gpu = gpu_;
  r_.own_source = static_cast<bool>(p_.own);
  r_.encoded = p_.reader && p_.reader->stores_encoded();
  const auto kind = p_.reader ? p_.reader->storage() : loaders::storage_kind::other;
  r_.sharded = kind == loaders::storage_kind::tar_shards || kind == loaders::storage_kind::remote_tar_shards;
  r_.remote = kind == loaders::storage_kind::remote_tar_shards;
  r_.varying_sizes = p_.reader && !p_.reader->image_shape().fixed();
  r_.float_images = full_->fields()[0].type != dtype::u8;
  if (!host_steps_.empty()) {  // does the first step shrink or window a large image before decoding?
    const philox_stream probe(0, 0, 0, 100);
    r_.planned_decode = host_steps_.front()->window(4096, 4096, probe).has_value() ||
                        host_steps_.front()->min_short_side(4096, 4096, probe) > 0;
  }
  for (const auto& f : full_->fields())  // what a copy moves: not the fields made on the device
    if (!f.device_only) r_.batch_bytes += f.bytes() * o_.loader.batch_size;
  // The host transforms in order, a fused host tail counting as one more.
  for (const auto& t : host_steps_) r_.transform_names.push_back(t->name());
  if (piped_ && piped_->tail_on_host()) {
    auto before = p_.steps.steps();  // the tail: before a batch op and the steps on its floats
    if (piped_->batch_op()) before.pop_back();
    const loaders::pipeline on_floats = piped_->float_steps();  // held: the loop below reads into it
    before.resize(before.size() - on_floats.steps().size());
    r_.transform_names.push_back(loaders::pipeline(before).device_tail().to_string() + " (fused)");
    for (const auto& t : on_floats.steps()) r_.transform_names.push_back(t->name());
  }
}

/// Sleeps (no spinning: the workers need the cores) until the consumer stream's work is done.
void ladder::drain_consumer() {
  if (gpu_) wait_for_stream(consumer_stream_, drained_.get());
}

/// Runs `one` for the warm-up (the caches fill inside it), then timed; fills the mode's numbers.
void ladder::measure(doctor_mode& m, const std::function<step_result()>& one, const std::function<void()>& reset) {
  const std::size_t warmup = std::max(o_.warmup, pool_batches() + 1);
  for (std::size_t i = 0; i < warmup; ++i) (void)one();
  drain_consumer();
  if (reset) reset();
  std::vector<double> waits, ends, per_image;  // per step: the wait, its end, and the seconds per image
  waits.reserve(o_.steps);
  ends.reserve(o_.steps);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  std::size_t images = 0;
  for (;;) {
    const auto step_start = clock_type::now();
    const step_result s = one();
    if (s.images > 0) per_image.push_back(seconds_since(step_start) / static_cast<double>(s.images));
    images += s.images;
    waits.push_back(s.wait_s);
    const double elapsed = seconds_since(t0);
    ends.push_back(elapsed);
    if (waits.size() >= o_.steps && elapsed >= o_.min_mode_seconds) break;
    if (waits.size() >= o_.min_steps && elapsed > o_.max_mode_seconds) break;
  }
  drain_consumer();
  summarize(m, std::move(waits), ends, per_image, images, std::max(seconds_since(t0), 1e-9), process_cpu_seconds() - cpu0,
            static_cast<unsigned>(std::max<std::size_t>(1, r_.plan_cores)));
}

/// One step on the loader's next batch, which `current` holds until the next step (the last
/// one's slot goes back before the wait).
step_result ladder::loader_step(loader& l, std::optional<batch>& current, const std::string& what) {
  current.reset();
  const auto t = clock_type::now();
  batch b = next_cycling(l, what);
  const double wait = seconds_since(t);
  (*consume_)(step_view(b));
  current = std::move(b);
  return {current->size(), wait};
}

/// Measures `m`: a loader over `src` under `lo`, the step on each batch; `after` sees the loader
/// when done. Returns the workers it ran.
std::size_t ladder::run_measured(doctor_mode& m, std::shared_ptr<source> src, const loader_options& lo,
                         const std::function<void(const loader&)>& after) {
  loader l(std::move(src), lo);
  return measure_loader(m, l, after);
}

/// Measures `m` on loader `l` (see run_measured).
std::size_t ladder::measure_loader(doctor_mode& m, loader& l, const std::function<void(const loader&)>& after) {
  std::optional<batch> current;
  const std::string what = "mode " + m.id;
  measure(m, [&] { return loader_step(l, current, what); }, [&] { l.reset_stats(); });
  current.reset();
  if (after) after(l);
  return l.workers();
}

/// L0-L3 and T1..: the loader over the mode's source, the step on each batch.
void ladder::run_loader(plan_entry& e) {
  doctor_mode& m = e.mode;
  loader_options mlo = loader_options_;
  mlo.trace = m.id == o_.trace_mode;
  r_.workers = run_measured(m, source_for(e.cache), mlo, [&](const loader& l) {
    if (mlo.trace) l.write_trace(o_.trace_path);
  });
}


}  // namespace doctor_run

/// The ladder in four steps: check the request, describe the pipeline and plan the modes (the
/// constructor), measure each mode, then analyze (and advise) in analyze().
doctor_report doctor(const doctor_pipeline& p, const doctor_options& o) { return doctor_run::ladder(p, o).run(); }

}  // namespace pinfeed
