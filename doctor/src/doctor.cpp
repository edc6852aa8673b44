#include "pinfeed/doctor/doctor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <sys/resource.h>

#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// CPU time of the whole process (every thread), in seconds.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct stream_handle {
  cudaStream_t s = nullptr;
  stream_handle() { PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_handle() { cudaStreamDestroy(s); }
  stream_handle(const stream_handle&) = delete;
  stream_handle& operator=(const stream_handle&) = delete;
};
struct event_handle {
  cudaEvent_t e = nullptr;
  event_handle() { PINFEED_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync)); }
  ~event_handle() { cudaEventDestroy(e); }
  event_handle(const event_handle&) = delete;
  event_handle& operator=(const event_handle&) = delete;
};

/// What one step of a mode did.
struct step_result {
  std::size_t images = 0;
  double wait_s = 0;
};

/// The consumer every mode shares: the pipeline's device tail (when the slot keeps uint8 for the
/// GPU) and then the step (the user's, or step_ms busy time on the batch's device).
class consumer {
 public:
  consumer(const doctor_options& o, std::optional<ops::normalize_params> tail, const field_spec& image,
           std::size_t batch_size, bool gpu)
      : options_(o), tail_(std::move(tail)) {
    if (tail_ && gpu) {
      shape_ = {batch_size, static_cast<std::size_t>(image.shape[0]), static_cast<std::size_t>(image.shape[1])};
      out_ = device_buffer(shape_.pixels() * 3 * sizeof(float));
    }
  }
  void operator()(const step_batch& b) {
    if (tail_ && b.fields[0].location.is_cuda()) {
      ops::image_batch_shape s = shape_;
      s.batch = b.size;
      ops::normalize_hwc_to_chw_device(static_cast<const std::uint8_t*>(b.fields[0].data), out_.data(), s, *tail_,
                                       b.stream);
    }
    if (options_.step) {
      options_.step(b);
    } else if (options_.step_ms > 0) {
      if (b.stream != nullptr && options_.step_on != "host") busy_kernel_ms(options_.step_ms, b.stream);
      else busy_wait_ms(options_.step_ms);
    }
  }

 private:
  const doctor_options& options_;
  std::optional<ops::normalize_params> tail_;
  ops::image_batch_shape shape_{};
  device_buffer out_;
};

/// The loader's next batch, starting the next epoch when one ends (modes run across epochs).
batch next_cycling(loader& l, const std::string& what) {
  auto b = l.next();
  if (!b) {
    l.start_epoch(l.epoch() + 1);
    b = l.next();
  }
  if (!b) throw std::runtime_error("doctor: " + what + ": the loader yielded no batch");
  return std::move(*b);
}

step_batch view_of(const batch& b) {
  step_batch v;
  v.size = b.size();
  v.stream = b.stream();
  for (std::size_t f = 0; f < b.field_count(); ++f) v.fields.push_back(b.field(f));
  return v;
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
    }
    return v;
  }
};

struct plan_entry {
  doctor_mode mode;
  enum class kind { loader, host_batches, device_batches } how = kind::loader;
  sample_cache cache;
};

}  // namespace

const doctor_mode* doctor_report::mode(const std::string& id) const {
  for (const auto& m : modes)
    if (m.id == id) return &m;
  return nullptr;
}

doctor_report doctor(const doctor_pipeline& p, const doctor_options& o) {
  // Everything is checked before anything runs.
  if (!p.reader && !p.own) throw std::invalid_argument("doctor: the pipeline has no reader and no source of its own");
  if (p.reader && p.own) throw std::invalid_argument("doctor: give a reader (with transforms) or a source of your own, not both");
  if (p.own && !p.steps.empty())
    throw std::invalid_argument("doctor: transforms go with a reader; a source of your own runs its own steps");
  if (!(o.step_ms >= 0.0) || !std::isfinite(o.step_ms))
    throw std::invalid_argument("doctor: the step time must be a finite number >= 0 ms, got " + std::to_string(o.step_ms));
  if (o.steps == 0) throw std::invalid_argument("doctor: steps per mode must be at least 1");
  if (o.min_steps == 0 || o.min_steps > o.steps)
    throw std::invalid_argument("doctor: min_steps must be in [1, steps=" + std::to_string(o.steps) + "], got " +
                                std::to_string(o.min_steps));
  if (!(o.max_mode_seconds > 0) || !(o.min_mode_seconds >= 0) || o.min_mode_seconds > o.max_mode_seconds)
    throw std::invalid_argument("doctor: mode seconds must satisfy 0 <= min (" + std::to_string(o.min_mode_seconds) +
                                ") <= max (" + std::to_string(o.max_mode_seconds) + "), max > 0");
  validate(o.loader);
  const std::uint64_t dataset = p.own ? p.own->size() : p.reader->size();
  if (o.pool > dataset)
    throw std::invalid_argument("doctor: a cache pool of " + std::to_string(o.pool) + " samples is larger than the dataset (" +
                                std::to_string(dataset) + " samples); give a pool of at most " + std::to_string(dataset));
  const std::size_t pool = o.pool != 0 ? o.pool : static_cast<std::size_t>(std::min<std::uint64_t>(64, dataset));
  const device_choice dev = resolve_device(o.loader.device);
  const bool gpu = dev.is_cuda();
  if (o.step_on != "auto" && o.step_on != "host" && o.step_on != "device")
    throw std::invalid_argument("doctor: step_on must be auto, host or device, got '" + o.step_on + "'");
  if (o.step_on == "device" && !gpu)
    throw std::invalid_argument("doctor: a device step needs a GPU, but the batches go to " + dev.to_string());

  // The full pipeline's source tells the shapes, the host steps and the tail.
  std::shared_ptr<loaders::pipeline_source> piped;
  if (!p.own) piped = std::make_shared<loaders::pipeline_source>(p.reader, p.steps, p.source);
  const std::shared_ptr<source> full = p.own ? p.own : std::shared_ptr<source>(piped);
  static const std::vector<std::shared_ptr<loaders::transform>> no_steps;
  const auto& host_steps = piped ? piped->host_steps().steps() : no_steps;
  const bool host_tail = piped && host_steps.size() < p.steps.steps().size() && !piped->tail_params();
  const std::optional<ops::normalize_params> consumer_tail = piped ? piped->tail_params() : std::nullopt;
  // The source a mode runs: the pipeline (or the own source) with a cache at a stage.
  const auto source_for = [&](const sample_cache& cache) -> std::shared_ptr<source> {
    if (p.own) return cache.stage == cache_stage::finished ? make_pooled_source(p.own, pool) : p.own;
    return make_cached_pipeline(piped, cache).source;  // L0 runs `piped` itself: its counts go into the report
  };

  doctor_report r;
  r.pipeline = full->name();
  r.device = dev.to_string();
  r.batch_size = o.loader.batch_size;
  r.prefetch = o.loader.prefetch;
  r.hardware_threads = std::max(1u, std::thread::hardware_concurrency());
  r.pool = pool;
  r.step_ms = o.step_ms;
  r.user_step = static_cast<bool>(o.step);
  r.gpu = gpu;
  r.own_source = static_cast<bool>(p.own);
  r.encoded = p.reader && p.reader->stores_encoded();
  r.sharded = p.reader && p.reader->name().find("tar shard") != std::string::npos;
  r.varying_sizes = p.reader && !p.reader->image_shape().fixed();
  r.float_images = full->fields()[0].type != dtype::u8;
  if (!host_steps.empty()) {  // does the first step shrink or window a large image before decoding?
    const philox_stream probe(0, 0, 0, 100);
    r.planned_decode = host_steps.front()->window(4096, 4096, probe).has_value() ||
                       host_steps.front()->min_short_side(4096, 4096, probe) > 0;
  }
  for (const auto& f : full->fields()) r.batch_bytes += f.bytes() * o.loader.batch_size;

  // The ladder (reserved: add() hands out pointers into it).
  std::vector<plan_entry> plan;
  plan.reserve(8 + host_steps.size());
  const auto add = [&](std::string id, std::string name, std::string skips, plan_entry::kind how,
                       sample_cache cache = {}) {
    plan_entry e;
    e.mode.id = std::move(id);
    e.mode.name = std::move(name);
    e.mode.skips = std::move(skips);
    e.how = how;
    e.cache = cache;
    e.cache.pool = pool;
    plan.push_back(std::move(e));
    return &plan.back();
  };
  add("L0", "full pipeline", "nothing", plan_entry::kind::loader);
  auto* l1 = add("L1", "stored bytes cached", "storage reads", plan_entry::kind::loader, {cache_stage::raw, 0, pool});
  if (p.own) l1->mode.note = "not applicable: a source of your own has no read stage the doctor can see";
  else if (!r.encoded) l1->mode.note = "same as L2: '" + p.reader->name() + "' yields images, not encoded bytes";
  auto* l2 = add("L2", "decoded images cached", "reads, decoding", plan_entry::kind::loader, {cache_stage::decoded, 0, pool});
  if (p.own) l2->mode.note = "not applicable: a source of your own has no decode stage the doctor can see";
  add("L3", p.own ? "produced samples cached" : "processed samples cached",
      p.own ? "producing samples" : "reads, decoding, transforms", plan_entry::kind::loader,
      {cache_stage::finished, 0, pool});
  auto* l4 = add("L4", "host batches cached", "the workers: only the copy and the step run", plan_entry::kind::host_batches);
  auto* l5 = add("L5", "device batches cached", "everything but the step (the ceiling)", plan_entry::kind::device_batches);
  if (!gpu) l5->mode.note = "same as L4: on the CPU path batches stay in host memory, there is no copy";
  // Without a step these modes would time an empty loop, a figure of no use: say so instead.
  const bool no_step = !o.step && o.step_ms == 0;
  if (no_step && !gpu) l4->mode.note = "not measured: on the CPU path nothing is copied, and there is no step";
  if (no_step && gpu && !consumer_tail) l5->mode.note = "not measured: no step and no device work to run";
  // Per-transform checkpoints: after host step k, for k = 1 .. (transforms - 1), the fused host tail
  // counting as one more transform.
  std::vector<std::string> transform_names;
  for (const auto& t : host_steps) transform_names.push_back(t->name());
  if (host_tail) transform_names.push_back(p.steps.device_tail().to_string() + " (fused)");
  r.transform_names = transform_names;
  if (o.per_transform)
    for (std::size_t k = 1; k < transform_names.size(); ++k) {
      std::string skips = "reads, decoding";
      for (std::size_t j = 0; j < k; ++j) skips += ", " + transform_names[j];
      add("T" + std::to_string(k), "cached after " + transform_names[k - 1], skips, plan_entry::kind::loader,
          {cache_stage::steps, k, pool});
    }
  if (!o.modes.empty()) {
    for (const auto& want : o.modes) {
      const bool known = std::any_of(plan.begin(), plan.end(), [&](const plan_entry& e) { return e.mode.id == want; });
      if (!known) {
        std::string ids;
        for (const auto& e : plan) ids += (ids.empty() ? "" : ", ") + e.mode.id;
        throw std::invalid_argument("doctor: unknown mode '" + want + "' (this pipeline has " + ids + ")");
      }
    }
    for (auto& e : plan)
      if (std::find(o.modes.begin(), o.modes.end(), e.mode.id) == o.modes.end() && e.mode.note.empty())
        e.mode.note = "not selected";
  }
  if (!o.trace_mode.empty()) {
    const auto it = std::find_if(plan.begin(), plan.end(), [&](const plan_entry& e) { return e.mode.id == o.trace_mode; });
    if (it == plan.end() || it->how != plan_entry::kind::loader || !it->mode.note.empty())
      throw std::invalid_argument("doctor: --trace-mode must be a mode that runs the loader (L0-L3 or T1..) and is "
                                  "run, got '" + o.trace_mode + "'");
    if (o.trace_path.empty()) throw std::invalid_argument("doctor: trace_mode given without a trace path");
  }

  loader_options lo = o.loader;
  const std::size_t pool_batches = (pool + lo.batch_size - 1) / lo.batch_size;
  const std::size_t warmup = std::max(o.warmup, pool_batches + 1);  // the cache fills inside the warm-up
  std::optional<stream_handle> own_stream;
  cudaStream_t consumer_stream = nullptr;
  if (gpu) {
    PINFEED_CUDA_TRY(cudaSetDevice(dev.index));
    if (!o.loader.stream) own_stream.emplace();
    consumer_stream = o.loader.stream ? *o.loader.stream : own_stream->s;
    lo.stream = consumer_stream;
  }
  consumer consume(o, consumer_tail, full->fields()[0], lo.batch_size, gpu);

  // Runs `one` for warm-up, then timed; fills the mode's numbers.
  const auto timed = [&](doctor_mode& m, const std::function<step_result()>& one, const std::function<void()>& reset) {
    for (std::size_t i = 0; i < warmup; ++i) (void)one();
    if (gpu) PINFEED_CUDA_TRY(cudaStreamSynchronize(consumer_stream));
    if (reset) reset();
    std::vector<double> waits, per_image;  // per step: the wait, and the seconds per image
    waits.reserve(o.steps);
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
      if (waits.size() >= o.steps && elapsed >= o.min_mode_seconds) break;
      if (waits.size() >= o.min_steps && elapsed > o.max_mode_seconds) break;
    }
    if (gpu) PINFEED_CUDA_TRY(cudaStreamSynchronize(consumer_stream));
    const double wall = std::max(seconds_since(t0), 1e-9);
    const double cpu = process_cpu_seconds() - cpu0;
    m.ran = true;
    m.steps = waits.size();
    m.images = images;
    m.seconds = wall;
    m.steps_per_s = m.steps / wall;
    m.images_per_s = images / wall;
    double total_wait = 0;
    for (double w : waits) total_wait += w;
    m.consumer_wait = std::clamp(total_wait / wall, 0.0, 1.0);
    std::sort(waits.begin(), waits.end(), std::greater<>());
    m.max_wait_ms = waits.front() * 1e3;
    const std::size_t top = std::max<std::size_t>(1, waits.size() / 10);
    double top_wait = 0;
    for (std::size_t i = 0; i < top; ++i) top_wait += waits[i];
    m.wait_top_share = total_wait > 0 ? std::clamp(top_wait / total_wait, 0.0, 1.0) : 0.0;
    m.cpu_utilisation = std::clamp(cpu / (wall * r.hardware_threads), 0.0, 1.0);
    if (per_image.size() >= 2) {  // standard error of the mean time per image
      double mean = 0, var = 0;
      for (double x : per_image) mean += x;
      mean /= static_cast<double>(per_image.size());
      for (double x : per_image) var += (x - mean) * (x - mean);
      var /= static_cast<double>(per_image.size() - 1);
      m.noise_ms_per_image = 1e3 * std::sqrt(var / static_cast<double>(per_image.size()));
    }
  };

  // Modes L4 and L5 replay whole batches made once from a pool of finished samples.
  batch_store store;
  host_buffer host_batches;
  std::vector<std::size_t> batch_sizes;
  const auto make_batches = [&] {
    if (!batch_sizes.empty()) return;
    loader_options cpu_lo = o.loader;
    cpu_lo.device = "cpu";
    cpu_lo.stream.reset();
    cpu_lo.trace = false;
    cpu_lo.after_copy = nullptr;
    loader l(source_for({cache_stage::finished, 0, pool}), cpu_lo);
    r.workers = l.workers();
    store.layout(l.fields(), lo.batch_size);
    host_batches = host_buffer(store.bytes * pool_batches, gpu);
    for (std::size_t i = 0; i < pool_batches; ++i) {
      const batch b = next_cycling(l, "the cached host batches");
      for (std::size_t f = 0; f < b.field_count(); ++f) {
        const auto v = b.field(f);
        std::memcpy(host_batches.data() + i * store.bytes + store.offsets[f], v.data, v.bytes());
      }
      batch_sizes.push_back(b.size());
    }
  };

  for (auto& e : plan) {
    doctor_mode& m = e.mode;
    if (!m.note.empty()) {
      r.modes.push_back(m);
      if (o.on_mode) o.on_mode(m);
      continue;
    }
    if (e.how == plan_entry::kind::loader) {
      loader_options mlo = lo;
      mlo.trace = m.id == o.trace_mode;
      loader l(source_for(e.cache), mlo);
      r.workers = l.workers();
      std::optional<batch> current;
      timed(
          m,
          [&] {
            current.reset();  // return the slot before waiting for the next one
            const auto t = clock_type::now();
            batch b = next_cycling(l, "mode " + m.id);
            const double wait = seconds_since(t);
            consume(view_of(b));
            current = std::move(b);
            return step_result{current->size(), wait};
          },
          [&] { l.reset_stats(); });
      current.reset();
      if (mlo.trace) l.write_trace(o.trace_path);
    } else if (!gpu) {  // L4 on the CPU path: the step on cached host batches
      make_batches();
      std::size_t j = 0;
      timed(m, [&] {
        const std::size_t i = j++ % batch_sizes.size();
        consume(store.view(host_batches.data() + i * store.bytes, batch_sizes[i], {}, nullptr));
        return step_result{batch_sizes[i], 0.0};
      }, {});
    } else {
      make_batches();
      const memory_location where{memory_location::kind::cuda, dev.index};
      if (e.how == plan_entry::kind::host_batches) {
        // Copy + step, two device buffers in turn, as the loader's copy engine does.
        stream_handle copy;
        device_buffer device(store.bytes * 2);
        event_handle copied[2], released[2];
        bool used[2] = {false, false};
        std::size_t j = 0;
        timed(m, [&] {
          const std::size_t i = j % batch_sizes.size(), d = j % 2;
          ++j;
          std::byte* dst = device.data() + d * store.bytes;
          if (used[d]) PINFEED_CUDA_TRY(cudaEventSynchronize(released[d].e));  // at most two in flight
          const std::size_t bytes = store.bytes;
          PINFEED_CUDA_TRY(cudaMemcpyAsync(dst, host_batches.data() + i * store.bytes, bytes, cudaMemcpyHostToDevice, copy.s));
          if (o.loader.after_copy) o.loader.after_copy(bytes, copy.s);  // the same hook as the loader's copy
          PINFEED_CUDA_TRY(cudaEventRecord(copied[d].e, copy.s));
          PINFEED_CUDA_TRY(cudaStreamWaitEvent(consumer_stream, copied[d].e, 0));
          consume(store.view(dst, batch_sizes[i], where, consumer_stream));
          PINFEED_CUDA_TRY(cudaEventRecord(released[d].e, consumer_stream));
          used[d] = true;
          return step_result{batch_sizes[i], 0.0};
        }, {});
        PINFEED_CUDA_TRY(cudaStreamSynchronize(copy.s));
      } else {
        device_buffer device(store.bytes * batch_sizes.size());
        PINFEED_CUDA_TRY(cudaMemcpy(device.data(), host_batches.data(), device.size(), cudaMemcpyHostToDevice));
        std::size_t j = 0;
        timed(m, [&] {
          const std::size_t i = j++ % batch_sizes.size();
          consume(store.view(device.data() + i * store.bytes, batch_sizes[i], where, consumer_stream));
          return step_result{batch_sizes[i], 0.0};
        }, {});
      }
    }
    r.modes.push_back(m);
    if (o.on_mode) o.on_mode(m);
  }
  if (piped) {  // the full pipeline's source (L0)
    r.bad_samples = piped->failures();
    r.replaced = piped->replaced();
  }
  analyse(r);
  return r;
}

}  // namespace pinfeed
