#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/remote.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>


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

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// What one step of a mode did.
struct step_result {
  std::size_t images = 0;
  double wait_s = 0;
};

/// The loader's next batch, starting the next epoch when one ends (modes run across epochs).
batch next_cycling(loader& l, const std::string& what) {
  auto b = l.next();
  if (!b) {
    l.start_epoch(l.epoch() + 1);
    b = l.next();
  }
  if (!b) throw pinfeed::runtime_error("doctor: " + what + ": the loader yielded no batch");
  return std::move(*b);
}

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

}  // namespace

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

namespace {

/// Everything doctor() checks before anything runs; returns the cache pool and the device.
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
class ladder {
 public:
  ladder(const doctor_pipeline& p, const doctor_options& o)
      : p_(p), o_(o), checked_(check_request(p, o)), pool_(checked_.first), dev_(checked_.second),
        gpu_(dev_.is_cuda()) {
    // The full pipeline's source tells the shapes, the host steps and the tail.
    if (!p.own) piped_ = std::make_shared<loaders::pipeline_source>(p.reader, p.steps, p.source);
    full_ = p.own ? p.own : std::shared_ptr<source>(piped_);
    if (piped_) host_steps_ = piped_->host_steps().steps();
    describe();
    plan_ = plan_modes(p_, o_, r_, pool_, piped_ && piped_->tail_params());
  }

  ladder(const ladder&) = delete;
  ladder& operator=(const ladder&) = delete;
  /// On every path (a failed mode's too): the consumer's queued work finishes before its buffers
  /// go, and the members holding device memory (declared after the guard) before it gives the device back.
  ~ladder() {
    if (consumer_stream_ != nullptr) wait_for_stream_nothrow(consumer_stream_, drained_.get());
  }

  doctor_report run() {
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
    }
    if (r_.remote) r_.fetch = loaders::remote_stats(*p_.reader);
    analyze(r_);
    return std::move(r_);
  }

 private:
  /// The source a mode runs: the pipeline (or the own source) with a cache at a stage.
  std::shared_ptr<source> source_for(const sample_cache& cache) const {
    if (p_.own) return cache.stage == cache_stage::finished ? make_pooled_source(p_.own, pool_) : p_.own;
    return make_cached_pipeline(piped_, cache).source;  // L0 runs `piped_` itself: its counts go into the report
  }

  /// The report's facts of the pipeline, which the analysis reads.
  void describe() {
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
    for (const auto& f : full_->fields()) r_.batch_bytes += f.bytes() * o_.loader.batch_size;
    // The host transforms in order, a fused host tail counting as one more.
    for (const auto& t : host_steps_) r_.transform_names.push_back(t->name());
    const bool host_tail = piped_ && host_steps_.size() < p_.steps.steps().size() && !piped_->tail_params();
    if (host_tail) r_.transform_names.push_back(p_.steps.device_tail().to_string() + " (fused)");
  }

  std::size_t pool_batches() const { return (pool_ + o_.loader.batch_size - 1) / o_.loader.batch_size; }

  /// Sleeps (no spinning: the workers need the cores) until the consumer stream's work is done.
  void drain_consumer() {
    if (gpu_) wait_for_stream(consumer_stream_, drained_.get());
  }

  /// Runs `one` for the warm-up (the caches fill inside it), then timed; fills the mode's numbers.
  void measure(doctor_mode& m, const std::function<step_result()>& one, const std::function<void()>& reset) {
    const std::size_t warmup = std::max(o_.warmup, pool_batches() + 1);
    for (std::size_t i = 0; i < warmup; ++i) (void)one();
    drain_consumer();
    if (reset) reset();
    std::vector<double> waits, per_image;  // per step: the wait, and the seconds per image
    waits.reserve(o_.steps);
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
      if (waits.size() >= o_.steps && elapsed >= o_.min_mode_seconds) break;
      if (waits.size() >= o_.min_steps && elapsed > o_.max_mode_seconds) break;
    }
    drain_consumer();
    summarize(m, std::move(waits), per_image, images, std::max(seconds_since(t0), 1e-9), process_cpu_seconds() - cpu0,
              static_cast<unsigned>(std::max<std::size_t>(1, r_.plan_cores)));
  }

  /// The full pipeline under a loader that tunes: runs until the tuner has settled and held three
  /// windows (or max_tuning_seconds), then fixes the ladder's workers and prefetch to its choice.
  /// With recommend, then times the full pipeline with them and with the settings it started from.
  void tune() {
    loader_options start = loader_options_;
    start.trace = false;
    loader_options tuning = start;
    if (o_.recommend) tuning.workers = tuning.prefetch = auto_tune;
    const auto t0 = clock_type::now();
    {
      loader l(full_, tuning);
      std::optional<batch> current;
      std::uint64_t settled_at = 0;
      for (;;) {
        (void)loader_step(l, current, "the tuning pass");
        const auto t = l.tuning();
        if (t.settled && settled_at == 0) settled_at = t.windows;
        if ((settled_at != 0 && t.windows >= settled_at + 3) || seconds_since(t0) > o_.max_tuning_seconds) break;
      }
      current.reset();
      drain_consumer();
      r_.tuning = l.tuning();
    }
    r_.tuned = true;
    r_.tuning_seconds = seconds_since(t0);
    loader_options_.workers = r_.tuning.workers;
    loader_options_.prefetch = r_.tuning.prefetch;
    if (!o_.recommend) return;
    // The settings it started from: the caller's, or for auto the library's defaults.
    loader_options baseline = start;
    if (baseline.workers == auto_tune) baseline.workers = 0;
    if (baseline.prefetch == auto_tune) baseline.prefetch = loader_options{}.prefetch;
    doctor_mode tuned_pass{"tuned", "full pipeline, tuned settings"}, baseline_pass{"start", "full pipeline, settings given"};
    (void)run_measured(tuned_pass, full_, loader_options_);
    r_.baseline_workers = run_measured(baseline_pass, full_, baseline);
    r_.baseline_prefetch = baseline.prefetch;
    r_.compared = true;
    r_.tuned_images_per_s = tuned_pass.images_per_s;
    r_.baseline_images_per_s = baseline_pass.images_per_s;
    r_.expected_speedup = baseline_pass.images_per_s > 0 ? tuned_pass.images_per_s / baseline_pass.images_per_s : 0;
  }

  /// One step on the loader's next batch, which `current` holds until the next step (the last
  /// one's slot goes back before the wait).
  step_result loader_step(loader& l, std::optional<batch>& current, const std::string& what) {
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
  std::size_t run_measured(doctor_mode& m, std::shared_ptr<source> src, const loader_options& lo,
                           const std::function<void(const loader&)>& after = {}) {
    loader l(std::move(src), lo);
    std::optional<batch> current;
    const std::string what = "mode " + m.id;
    measure(m, [&] { return loader_step(l, current, what); }, [&] { l.reset_stats(); });
    current.reset();
    if (after) after(l);
    return l.workers();
  }

  /// L0-L3 and T1..: the loader over the mode's source, the step on each batch.
  void run_loader(plan_entry& e) {
    doctor_mode& m = e.mode;
    loader_options mlo = loader_options_;
    mlo.trace = m.id == o_.trace_mode;
    r_.workers = run_measured(m, source_for(e.cache), mlo, [&](const loader& l) {
      if (mlo.trace) l.write_trace(o_.trace_path);
    });
  }

  /// Modes L4 and L5 replay whole batches made once from a pool of finished samples.
  void make_batches() {
    if (!batch_sizes_.empty()) return;
    loader_options cpu_lo = loader_options_;
    cpu_lo.device = "cpu";
    cpu_lo.stream.reset();
    cpu_lo.trace = false;
    cpu_lo.after_copy = nullptr;
    loader l(source_for({cache_stage::finished, 0, pool_}), cpu_lo);
    r_.workers = l.workers();
    store_.layout(l.fields(), o_.loader.batch_size);
    host_batches_ = host_buffer(store_.bytes * pool_batches(), gpu_);
    for (std::size_t i = 0; i < pool_batches(); ++i) {
      const batch b = next_cycling(l, "the cached host batches");
      for (std::size_t f = 0; f < b.field_count(); ++f) {
        const auto v = b.field(f);
        std::memcpy(host_batches_.data() + i * store_.bytes + store_.offsets[f], v.data, v.bytes());
      }
      batch_sizes_.push_back(b.size());
    }
  }

  /// L4 on the CPU path: the step on cached host batches.
  void run_host_batches(doctor_mode& m) {
    make_batches();
    std::size_t j = 0;
    measure(m, [&] {
      const std::size_t i = j++ % batch_sizes_.size();
      (*consume_)(store_.view(host_batches_.data() + i * store_.bytes, batch_sizes_[i], {}, nullptr));
      return step_result{batch_sizes_[i], 0.0};
    }, {});
  }

  /// With a GPU: L4 copies each cached host batch and steps on it, L5 steps on batches already there.
  void run_device_batches(doctor_mode& m, bool copy_each) {
    make_batches();
    const memory_location where{memory_location::kind::cuda, dev_.index};
    if (copy_each) {
      // Copy + step, two device buffers in turn, as the loader's copy engine does.
      const cuda_stream copy = cuda_stream::create();
      device_buffer device(store_.bytes * 2);
      const cuda_event copied[2] = {cuda_event::create(), cuda_event::create()};
      const cuda_event released[2] = {cuda_event::create(), cuda_event::create()};
      bool used[2] = {false, false};
      std::size_t j = 0;
      measure(m, [&] {
        const std::size_t i = j % batch_sizes_.size(), d = j % 2;
        ++j;
        std::byte* dst = device.data() + d * store_.bytes;
        if (used[d]) PINFEED_CUDA_TRY(cudaEventSynchronize(released[d].get()));  // at most two in flight
        const std::size_t bytes = store_.bytes;
        PINFEED_CUDA_TRY(cudaMemcpyAsync(dst, host_batches_.data() + i * store_.bytes, bytes, cudaMemcpyHostToDevice,
                                         copy.get()));
        if (o_.loader.after_copy) o_.loader.after_copy(bytes, copy.get());  // the same hook as the loader's copy
        PINFEED_CUDA_TRY(cudaEventRecord(copied[d].get(), copy.get()));
        PINFEED_CUDA_TRY(cudaStreamWaitEvent(consumer_stream_, copied[d].get(), 0));
        (*consume_)(store_.view(dst, batch_sizes_[i], where, consumer_stream_));
        PINFEED_CUDA_TRY(cudaEventRecord(released[d].get(), consumer_stream_));
        used[d] = true;
        return step_result{batch_sizes_[i], 0.0};
      }, {});
      wait_for_stream(copy.get(), drained_.get());
    } else {
      device_buffer device(store_.bytes * batch_sizes_.size());
      PINFEED_CUDA_TRY(cudaMemcpy(device.data(), host_batches_.data(), device.size(), cudaMemcpyHostToDevice));
      std::size_t j = 0;
      measure(m, [&] {
        const std::size_t i = j++ % batch_sizes_.size();
        (*consume_)(store_.view(device.data() + i * store_.bytes, batch_sizes_[i], where, consumer_stream_));
        return step_result{batch_sizes_[i], 0.0};
      }, {});
    }
  }

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

}  // namespace

/// The ladder in four steps: check the request, describe the pipeline and plan the modes (the
/// constructor), measure each mode, then analyze (and advise) in analyze().
doctor_report doctor(const doctor_pipeline& p, const doctor_options& o) { return ladder(p, o).run(); }

}  // namespace pinfeed
