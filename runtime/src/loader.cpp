#include "pinfeed/runtime/loader.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "detail/loader_core.hpp"
#include "pinfeed/runtime/detail/auto_tuner.hpp"
#include "pinfeed/runtime/detail/json_release.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

using detail::slot_state;

namespace {

constexpr std::size_t kFieldAlign = 256;  // every field starts on a 256-byte boundary (coalesced loads)

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  char text[64];
  if (bytes >= (std::uint64_t{1} << 30)) std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (std::uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

std::uint64_t parse_bytes(std::string_view text) {
  const auto bad = [&] {
    return pinfeed::invalid_argument("'" + std::string(text) +
                                 "' is not a size: give bytes, or a number with B, KB, MB, GB, TB or KiB, MiB, GiB, TiB");
  };
  std::size_t at = 0;
  while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '.')) ++at;
  if (at == 0) throw bad();
  double number = 0;
  try {
    std::size_t used = 0;
    number = std::stod(std::string(text.substr(0, at)), &used);
    if (used != at) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  std::string unit(text.substr(at));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},       {"b", 1},         {"kb", 1e3},         {"mb", 1e6},         {"gb", 1e9},         {"tb", 1e12},
      {"kib", 1024}, {"mib", 1048576}, {"gib", 1073741824}, {"tib", 1099511627776}, {"k", 1024}, {"m", 1048576},
      {"g", 1073741824}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name) {
      const double bytes = number * scale;
      if (!(bytes < 1.8e19)) throw bad();
      return static_cast<std::uint64_t>(bytes);
    }
  throw bad();
}

namespace {
std::uint64_t memory_total(const std::vector<memory_use>& parts) {
  std::uint64_t total = 0;
  for (const auto& p : parts) total = p.bytes > ~std::uint64_t{0} - total ? ~std::uint64_t{0} : total + p.bytes;
  return total;
}

void check_memory_budget(const std::vector<memory_use>& parts, std::uint64_t budget, const std::string& options_used) {
  const std::uint64_t total = memory_total(parts);
  std::string list;
  for (const auto& p : parts) list += (list.empty() ? "" : ", ") + p.consumer + " " + format_bytes(p.bytes);
  if (total > budget)
    throw pinfeed::invalid_argument("loader: the memory budget of " + format_bytes(budget) + " is too small for " + list +
                                " (" + format_bytes(total) + " in all; " + options_used + ")");
}
}  // namespace

void validate(const loader_options& o) {
  if (o.batch_size == 0) throw pinfeed::invalid_argument("loader option batch_size must be positive, got 0");
  if (o.prefetch == 0) throw pinfeed::invalid_argument("loader option prefetch must be at least 1 (or auto_tune), got 0");
  if (o.max_batches_in_use == 0)
    throw pinfeed::invalid_argument("loader option max_batches_in_use must be at least 1, got 0");
  if (o.workers > 1024 && o.workers != auto_tune)
    throw pinfeed::invalid_argument("loader option workers must be at most 1024 (or auto_tune), got " + std::to_string(o.workers));
  if (o.memory_budget && *o.memory_budget == 0)
    throw pinfeed::invalid_argument("loader option memory_budget must be positive bytes, got 0");
  if (const node_plan& plan = this_node_plan_without_gpu(); o.memory_budget && plan.memory > 0 && *o.memory_budget > plan.memory)
    throw pinfeed::invalid_argument("loader option memory_budget " + format_bytes(*o.memory_budget) +
                                " is more than the memory this process may use (" + format_bytes(plan.memory) + ", " +
                                plan.memory_source + ")");
  if (o.max_batches_in_use > 4096 || (o.prefetch != auto_tune && o.prefetch + o.max_batches_in_use > 4096))
    throw pinfeed::invalid_argument("loader options prefetch + max_batches_in_use must be at most 4096, got " +
                                (o.prefetch == auto_tune ? "auto + " + std::to_string(o.max_batches_in_use)
                                                         : std::to_string(o.prefetch + o.max_batches_in_use)));
}

namespace detail {

node_place place_of(const loader_options& o, const device_choice& dev) {
  node_place place;
  place.cores = this_node_plan_without_gpu().rank_cores;
  if (o.bind != cpu_binding::plan || !dev.is_cuda()) return place;  // a CPU loader never asks CUDA
  const node_plan& plan = this_node_plan();
  if (!plan.gpu || *plan.gpu != dev.index || plan.rank_cpus.empty()) return place;
  place.cpus = plan.rank_cpus;
  place.cores = plan.placed_cores;
  if (plan.numa_nodes >= 2) place.numa_node = plan.numa_node;  // one node: nothing to choose
  return place;
}

slot_plan plan_slots(const loader_options& o, const std::vector<field_spec>& fields, bool cuda, source& src) {
  // Sizes driven by the options, checked before anything is allocated: an overflow or a request
  // beyond the machine's memory is an error naming the options, not a std::bad_alloc.
  const bool prefetch_auto = o.prefetch == auto_tune;
  slot_plan p;
  p.options_used = "batch_size " + std::to_string(o.batch_size) + ", prefetch " +
                   (prefetch_auto ? std::string("auto") : std::to_string(o.prefetch)) + " + max_batches_in_use " +
                   std::to_string(o.max_batches_in_use) + " slots";
  auto too_big = [&](const std::string& what) { throw pinfeed::invalid_argument("loader: " + what + " (" + p.options_used + ")"); };
  // Rounds x up to a multiple of a, with an overflow check (the sizes come from options and field shapes).
  auto checked_round_up = [&](std::size_t x, std::size_t a) {
    std::size_t r = 0;
    if (__builtin_add_overflow(x, a - 1, &r)) too_big("the slots' size overflows");
    return r / a * a;
  };
  std::size_t offset = 0;
  for (const auto& field : fields) {
    offset = checked_round_up(offset, kFieldAlign);
    p.field_offset.push_back(offset);
    std::size_t field_bytes = 0;
    if (__builtin_mul_overflow(field.bytes(), o.batch_size, &field_bytes) ||
        __builtin_add_overflow(offset, field_bytes, &offset))
      too_big("field '" + field.name + "' of " + std::to_string(field.bytes()) + " bytes per sample overflows a slot");
  }
  p.slot_bytes = checked_round_up(std::max<std::size_t>(offset, 1), page_size());
  // Without a budget, this rank's share of the node's memory (the node plan: physical memory or a
  // cgroup limit, divided among the local ranks) is the budget of the host's parts.
  const node_plan& plan = this_node_plan_without_gpu();
  const std::uint64_t rank_memory = plan.rank_memory;
  const std::string rank_memory_text =
      "this process's share of memory, " + format_bytes(rank_memory) + " (" + plan.memory_source +
      (plan.local_ranks > 1 ? ", divided among " + std::to_string(plan.local_ranks) + " local ranks" : std::string()) +
      "; set memory_budget to choose another)";
  // The memory `slots` slots take: their data (on the host, and as much on the device with a GPU)
  // and their batches' dataset indices (8 bytes a sample, host). Nullopt when it overflows.
  struct need { std::size_t data, host; };
  auto need_for = [&](std::size_t slots) -> std::optional<need> {
    need n{};
    std::size_t index_bytes = 0;
    if (__builtin_mul_overflow(slots, p.slot_bytes, &n.data) ||
        __builtin_mul_overflow(slots * sizeof(std::uint64_t), o.batch_size, &index_bytes) ||
        __builtin_add_overflow(n.data, index_bytes, &n.host))
      return std::nullopt;
    return n;
  };
  // The source's adapting parts (a remote read-ahead) get what the first slots leave; the rest of
  // its parts and the slots prefetch auto may add are then checked against the whole budget.
  std::vector<memory_use> source_memory;
  const std::size_t first = (prefetch_auto ? 2 : o.prefetch) + o.max_batches_in_use;
  if (o.memory_budget) {
    const auto n = need_for(first);
    const std::uint64_t slots = n ? n->host + (cuda ? n->data : 0) : ~std::uint64_t{0};
    src.limit_memory(*o.memory_budget - std::min<std::uint64_t>(*o.memory_budget, slots));
    source_memory = src.memory();
  } else if (rank_memory > 0) {
    const auto n = need_for(first);
    const std::uint64_t slots = n ? n->host : ~std::uint64_t{0};
    src.limit_memory(rank_memory - std::min<std::uint64_t>(rank_memory, slots));
    source_memory = src.memory();
  }
  // The host's parts alone: what the rank's share of memory holds (device slots are on the GPU).
  auto host_total = [&](const need& n) {
    std::vector<memory_use> parts{{cuda ? "pinned host slots" : "host slots", n.host}};
    parts.insert(parts.end(), source_memory.begin(), source_memory.end());
    return parts;
  };
  auto parts_for = [&](const need& n) {
    std::vector<memory_use> parts{{cuda ? "pinned host slots" : "host slots", n.host}};
    if (cuda) parts.push_back({"device slots", n.data});
    parts.insert(parts.end(), source_memory.begin(), source_memory.end());
    return parts;
  };
  // Prefetch auto: the most that fits the budget (or the machine), kAutoPrefetchMost at most, 1
  // at least (which the checks below then judge).
  p.prefetch_most = o.prefetch;
  if (prefetch_auto) {
    p.prefetch_most = 1;
    for (std::size_t k = kAutoPrefetchMost; k > 1; --k) {
      const auto n = need_for(k + o.max_batches_in_use);
      if (!n || (rank_memory > 0 && memory_total(host_total(*n)) > rank_memory / 2)) continue;
      if (o.memory_budget && memory_total(parts_for(*n)) > *o.memory_budget) continue;
      p.prefetch_most = k;
      break;
    }
  }
  p.prefetch = prefetch_auto ? std::min<std::size_t>(2, p.prefetch_most) : o.prefetch;
  const std::size_t slots = p.prefetch_most + o.max_batches_in_use;
  const auto n = need_for(slots);
  if (!n) too_big("the slots' size overflows");
  if (o.memory_budget) {
    check_memory_budget(parts_for(*n), *o.memory_budget, p.options_used);
  } else if (rank_memory > 0 && memory_total(host_total(*n)) > rank_memory) {
    std::string list;
    for (const auto& part : host_total(*n)) list += (list.empty() ? "" : ", ") + part.consumer + " " + format_bytes(part.bytes);
    too_big("the host memory needed, " + list + " (" + format_bytes(memory_total(host_total(*n))) + " in all; " +
            std::to_string(slots) + " slots of " + format_bytes(p.slot_bytes) + "), is more than " + rank_memory_text);
  }
  return p;
}

loader_core::loader_core(const loader_options& o, std::vector<field_spec> f, device_choice d, slot_plan plan,
                         std::optional<unsigned> numa)
    : options(o),
      fields(std::move(f)),
      field_offset(std::move(plan.field_offset)),
      slot_bytes(plan.slot_bytes),
      options_used(std::move(plan.options_used)),
      dev(d),
      numa_node(numa),
      ring(plan.prefetch_most + o.max_batches_in_use),
      host(ring.size()),
      device(ring.size()) {
  const std::size_t slots = ring.size();
  meta.reset(new slot_meta[slots]);
  for (std::size_t s = 0; s < slots; ++s) meta[s].indices.resize(o.batch_size);
  if (o.trace) trace = std::make_unique<trace_recorder>(o.trace_max_events);
  if (!dev.is_cuda()) {
    allocate_slots(plan.prefetch + o.max_batches_in_use);
    return;
  }
  device_guard guard(dev.index);
  try {
    allocate_slots(plan.prefetch + o.max_batches_in_use);
    copy_stream = cuda_stream::create();
    if (o.stream) {
      consumer_stream = *o.stream;
    } else {
      own_consumer_stream = cuda_stream::create();
      consumer_stream = own_consumer_stream.get();
    }
    // The feeder and the destructor wait on these: blocking sync (the default), so a waiting
    // thread sleeps.
    drain_event = cuda_event::create();
    for (std::size_t s = 0; s < slots; ++s) {
      meta[s].copy_event = cuda_event::create();
      meta[s].release_event = cuda_event::create(cudaEventDisableTiming);
      meta[s].after_event = cuda_event::create();
    }
  } catch (...) {
    release_cuda();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void loader_core::allocate_slots(std::size_t n) {
  n = std::min(n, ring.size());
  std::size_t s = allocated();
  if (s >= n) return;
  auto allocation_failed = [&](const char* where, const std::exception& e) {
    throw pinfeed::runtime_error("loader: allocating " + std::to_string(slot_bytes) + " bytes of " + where + " for slot " +
                             std::to_string(s) + " of " + std::to_string(ring.size()) + " failed (" + options_used +
                             "): " + e.what());
  };
  std::optional<device_guard> guard;
  if (dev.is_cuda()) guard.emplace(dev.index);
  for (; s < n; ++s) {
    try {
      host[s] = host_buffer(slot_bytes, /*pinned=*/dev.is_cuda(), numa_node);
    } catch (const std::exception& e) {
      allocation_failed(dev.is_cuda() ? "pinned host memory" : "host memory", e);
    }
    if (dev.is_cuda()) {
      try {
        device[s] = device_buffer(slot_bytes);
      } catch (const std::exception& e) {
        allocation_failed(("memory on " + dev.to_string()).c_str(), e);
      }
    }
    allocated_.store(s + 1, std::memory_order_release);
  }
}

void loader_core::release_cuda() noexcept {
  if (!dev.is_cuda()) return;
  std::optional<device_guard> on_device;  // the caller's device back afterwards (if it had one)
  try {
    on_device.emplace(dev.index);
  } catch (const std::exception& e) {
    log(log_level::error, std::string("loader teardown: ") + e.what());
  }
  // Copies and consumer work may still read or write the slots: finish them before freeing.
  for (cudaStream_t s : {copy_stream.get(), consumer_stream})
    if (s != nullptr) wait_for_stream_nothrow(s, drain_event.get());
  for (std::size_t s = 0; s < ring.size(); ++s) {
    if (meta[s].after_recorded) PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(meta[s].after_event.get()));
    {  // work of DLPack views on their own streams may still read the slot
      std::lock_guard lock(meta[s].fence_mutex);
      for (const auto& f : meta[s].fences) PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(f.get()));
      meta[s].fences.clear();
      meta[s].spare_fences.clear();
    }
    meta[s].copy_event.reset();
    meta[s].release_event.reset();
    meta[s].after_event.reset();
  }
  drain_event.reset();
  copy_stream.reset();
  own_consumer_stream.reset();
  consumer_stream = nullptr;
  for (auto& h : host) h = host_buffer();
  for (auto& d : device) d = device_buffer();
}

void loader_core::drain(cudaStream_t stream) { wait_for_stream(stream, drain_event.get()); }

void loader_core::release_after(std::size_t slot, cudaStream_t stream) {
  if (!dev.is_cuda()) return;
  device_guard guard(dev.index);
  PINFEED_CUDA_TRY(cudaEventRecord(meta[slot].after_event.get(), stream));
  meta[slot].after_recorded = true;
}

void loader_core::fence_after(std::size_t slot, cudaStream_t stream) {
  if (!dev.is_cuda()) return;
  device_guard guard(dev.index);
  auto& m = meta[slot];
  std::lock_guard lock(m.fence_mutex);
  cuda_event fence;
  if (!m.spare_fences.empty()) {
    fence = std::move(m.spare_fences.back());
    m.spare_fences.pop_back();
  } else {
    fence = cuda_event::create(cudaEventDisableTiming);
  }
  const cudaError_t recorded = cudaEventRecord(fence.get(), stream);
  if (recorded != cudaSuccess) {
    (void)cudaGetLastError();
    m.spare_fences.push_back(std::move(fence));
    detail::throw_cuda_error(recorded, "cudaEventRecord(fence, consumer stream)", __FILE__, __LINE__);
  }
  m.fences.push_back(std::move(fence));
}

void loader_core::wait_fences(std::size_t slot, cudaStream_t stream) {
  auto& m = meta[slot];
  std::lock_guard lock(m.fence_mutex);
  while (!m.fences.empty()) {
    PINFEED_CUDA_TRY(cudaStreamWaitEvent(stream, m.fences.back().get(), 0));
    m.spare_fences.push_back(std::move(m.fences.back()));
    m.fences.pop_back();
  }
}

std::size_t loader_core::used_bytes(std::size_t n) const {
  std::size_t end = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) end = std::max(end, field_offset[i] + fields[i].bytes() * n);
  return end;
}

void loader_core::release_slot(std::size_t slot) noexcept {
  if (dev.is_cuda()) {
    try {
      device_guard guard(dev.index);
      PINFEED_CUDA_TRY(cudaEventRecord(meta[slot].release_event.get(), consumer_stream));
      meta[slot].release_recorded = true;
    } catch (const std::exception& e) {
      log(log_level::error, std::string("releasing a batch slot: ") + e.what());
    }
  }
  ring.release(slot);
}

}  // namespace detail

namespace detail {
/// Places a sample in its epoch: it sits at `position` of `order`, read in pass `pass`.
struct sample_access {
  static void place(sample& s, const epoch_order* order, std::uint64_t position, std::uint64_t pass) noexcept {
    s.order_ = order;
    s.position_ = position;
    s.pass_ = pass;
  }
};
/// The last pass number an epoch's start took (sample::pass()), over every loader of the process.
std::atomic<std::uint64_t> last_pass{0};
}  // namespace detail

struct loader::impl {
  impl(std::shared_ptr<source> s, loader_options o);
  ~impl() { cancel(); }

  void start(std::uint32_t epoch, std::uint64_t first_batch);
  void cancel() noexcept;
  /// The feeder thread: fills slots in order. Every failure reaches the consumer (feed_batches).
  void feed(std::uint32_t epoch, std::uint64_t first_batch, std::uint64_t seq_base) noexcept;
  void feed_batches(std::uint32_t epoch, std::uint64_t first_batch, std::uint64_t seq_base);
  /// Runs one chunk of a slot's samples; the last chunk of the slot finishes it.
  void run_chunk(std::size_t slot, std::size_t begin, std::size_t end) noexcept;
  void produce_chunk(std::size_t slot, std::size_t begin, std::size_t end);
  /// Keeps the first failure (by sample index) of a slot's batch.
  static void record_error(detail::slot_meta& m, std::exception_ptr err, std::uint64_t index) noexcept;
  void finish_slot(std::size_t slot) noexcept;
  std::optional<batch> next();
  /// Throws batches_held_error when the consumer holds more than max_batches_in_use slots.
  void check_held() const;

  // The worker pool: chunks wait in a queue, and up to `active` runner tasks in the arena take
  // them one by one, so the workers that run can change at any time (auto_tune).
  struct chunk {
    std::size_t slot, begin, end;
    std::uint64_t queued_ns = 0;  // when submit() queued it
  };
  /// Called by next() while it waits: runs the oldest queued chunk in the consumer's thread when
  /// no worker has taken one for 2 s (a pool that could not start its threads).
  void help_if_stalled() noexcept;
  void submit(chunk c);
  void spawn_runners();   // with pool_mutex held
  void enqueue_runner();  // one more runner task; with pool_mutex held
  /// (pool_mutex) Set once TBB refused a task, or its count could not be made: the pool is not
  /// asked again (spawn_runners). A fixed text: set where memory may have run out.
  const char* pool_failure = nullptr;
  // The warnings given once a loader: the feeder running chunks itself, the consumer helping.
  std::atomic<bool> warned_feeder_runs{false}, warned_consumer_helps{false};
  std::uint64_t last_pop_ns = 0;  // (pool_mutex) when a runner last took a chunk
  void runner() noexcept;
  void set_workers(std::size_t n);

  // auto_tune: the window being measured, judged from next().
  void start_window();
  void judge_window();

  std::shared_ptr<source> src;
  std::uint64_t dataset_size;
  std::optional<epoch_order> order;
  std::uint64_t batches;
  device_choice device;
  detail::node_place place;  // where the node plan puts workers, the feeder and host slots
  std::size_t worker_most;   // the arena's concurrency
  std::shared_ptr<detail::loader_core> core;
  tbb::task_arena arena;

  mutable std::mutex pool_mutex;
  std::deque<chunk> queue;
  std::size_t active = 1, runners = 0, starting = 0;

  std::optional<detail::auto_tuner> tuner;
  bool tuning_logged = false;
  bool epoch_fresh = true;  // the next batch is the first of an epoch: its wait (the pipeline filling) is not measured
  std::uint64_t window_excluded_ns = 0;  // of the window, time not measured
  std::uint64_t last_take_ns = 0;        // when next() last had its batch
  std::uint64_t window_start_ns = 0, window_wait_ns = 0, window_samples = 0, window_batches = 0;
  double window_cpu_s = 0;

  std::thread feeder;
  std::mutex feeder_mutex;
  std::exception_ptr feeder_error;  // the feeder stopped with it (and closed the ring); next() throws it
  std::atomic<bool> stopping{false};
  /// Counts queued and running tasks. Shared with every task, so a worker that finishes the
  /// last task can still notify after cancel() has seen the count reach zero and returned.
  struct task_count {
    std::atomic<std::int64_t> value{0};
    std::mutex mutex;
    std::condition_variable idle;
    std::int64_t running = 0;  // (mutex) tasks inside runner()
    bool abandoned = false;    // (mutex) set by cancel(): tasks not begun yet never touch the loader
    /// A task may run the loader's chunks: false once its loader gave up on the pool.
    bool begin() noexcept {
      std::lock_guard lock(mutex);
      if (abandoned) return false;
      ++running;
      return true;
    }
    void end() noexcept {
      std::lock_guard lock(mutex);
      --running;
      idle.notify_all();
    }
    void done() noexcept {
      if (value.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex);
        idle.notify_all();
      }
    }
  };
  std::shared_ptr<task_count> tasks = std::make_shared<task_count>();

  bool started = false;
  /// The position (epoch, next_batch) was set by construction, resume() or start_epoch() and no
  /// batch has been taken since: start_epoch(epoch) keeps it (see loader::start_epoch).
  bool positioned = true;
  std::uint32_t epoch = 0;
  std::uint64_t next_batch = 0;
  std::uint64_t seq_base = 0;  // ring sequence number of batch 0 of the current epoch
  std::uint64_t pass = 0;      // this start's pass number (sample::pass())
  std::uint64_t next_seq = 0;  // never reused, so a held batch of an old epoch never matches
};

namespace {
/// Worker threads TBB lets one arena have in this process: max_allowed_parallelism less the
/// thread that calls in (by default the hardware threads less one). Only the application changes
/// the limit (a tbb::global_control it owns); the loader never does.
std::size_t tbb_worker_limit() {
  const std::size_t allowed = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return allowed > 1 ? allowed - 1 : 1;
}

/// Batches of an epoch in which this rank takes `positions` samples.
std::uint64_t batches_in(std::uint64_t positions, const loader_options& o) noexcept {
  return o.drop_last ? positions / o.batch_size : (positions + o.batch_size - 1) / o.batch_size;
}

/// The workers of auto_tune's ceiling and of workers = 0: the node plan's cores for this loader
/// (detail::node_place::cores), within TBB's cap.
std::size_t planned_workers(const detail::node_place& place) {
  return std::max<std::size_t>(1, std::min(tbb_worker_limit(), place.cores));
}

std::size_t effective_workers(std::size_t requested, const detail::node_place& place) {
  const std::size_t limit = tbb_worker_limit();
  if (requested == 0) return planned_workers(place);
  if (requested > limit)
    log(log_level::warn, "loader: " + std::to_string(requested) + " workers asked for, but TBB allows " +
                             std::to_string(limit) + (limit == 1 ? " worker thread" : " worker threads") + " in this process (tbb::global_control::"
                             "max_allowed_parallelism is " + std::to_string(limit + 1) + "); running " +
                             std::to_string(limit) + ". To run more, hold a tbb::global_control raising it "
                             "while the loader lives");
  return std::min(requested, limit);
}
}  // namespace

loader::impl::impl(std::shared_ptr<source> s, loader_options o)
    : src(std::move(s)),
      dataset_size(0),
      batches(0),
      device((validate(o), resolve_device(o.device))),
      place(detail::place_of(o, device)),
      worker_most(o.workers == auto_tune ? planned_workers(place) : effective_workers(o.workers, place)),
      arena(static_cast<int>(worker_most), 0) {
  if (!src) throw pinfeed::invalid_argument("loader needs a source, got a null pointer");
  dataset_size = src->size();
  if (dataset_size == 0) throw pinfeed::invalid_argument("source '" + src->name() + "' has no samples");
  auto fields = src->fields();
  validate_fields(fields);
  if (o.order.shuffle && !o.order.groups) o.order.groups = src->groups();
  order.emplace(dataset_size, o.seed, o.order);
  const std::uint64_t per_epoch = order->size();
  batches = batches_in(per_epoch, o);
  if (batches == 0)
    throw pinfeed::invalid_argument("source '" + src->name() + "' gives this rank " + std::to_string(per_epoch) +
                                " samples per epoch, fewer than batch_size " + std::to_string(o.batch_size) +
                                " with drop_last set: an epoch would be empty");
  if (o.after_copy && !device.is_cuda())
    throw pinfeed::invalid_argument("loader option after_copy hooks the host-to-device copy, but batches stay on the " +
                                device.to_string() + ": nothing is copied");
  detail::slot_plan plan = detail::plan_slots(o, fields, device.is_cuda(), *src);
  const std::size_t first_prefetch = plan.prefetch;
  core = std::make_shared<detail::loader_core>(o, std::move(fields), device, std::move(plan), place.numa_node);
  core->ring.set_usable(first_prefetch + o.max_batches_in_use);
  const bool workers_auto = o.workers == auto_tune, prefetch_auto = o.prefetch == auto_tune;
  active = worker_most;  // auto starts where a fixed 0 stays: as many as TBB allows

  if (workers_auto || prefetch_auto)
    tuner.emplace(detail::auto_tuner::bounds{workers_auto, prefetch_auto, worker_most, core->prefetch_most()}, active,
                  first_prefetch);
  arena.initialize();
  epoch = o.epoch;
}

void loader::impl::submit(chunk c) {
  std::string why;
  {
    std::lock_guard lock(pool_mutex);
    c.queued_ns = now_ns();
    queue.push_back(c);  // throws with nothing queued
    try {
      spawn_runners();
      return;
    } catch (const std::exception& e) {  // TBB could not take a task (memory)
      if (runners > 0) return;           // a runner takes the chunk
      queue.pop_back();
      why = e.what();
    } catch (...) {
      if (runners > 0) return;
      queue.pop_back();
    }
  }
  log_once(warned_feeder_runs, log_level::warn, [&] {
    return "loader: no worker task could start (" + why + "); the feeder runs chunks itself from now on";
  });
  run_chunk(c.slot, c.begin, c.end);  // noexcept: a failure is the batch's
}

void loader::impl::spawn_runners() {
  // Once TBB failed to take a task (it could not start a thread), its next enqueue can wait
  // forever inside TBB: the pool is not asked again, and queued chunks run on the feeder and the
  // consumer (submit(), help_if_stalled()).
  if (pool_failure != nullptr) throw pinfeed::runtime_error(pool_failure);
  while (runners < active && starting < queue.size()) enqueue_runner();
}

void loader::impl::enqueue_runner() {
  ++runners;
  ++starting;
  tasks->value.fetch_add(1, std::memory_order_acq_rel);  // release: publishes the queued chunks' slots
  // Until TBB holds the task, a throw (TBB could not take it: memory, or a thread it could not
  // start) gives the counts back, and the pool is not asked again.
  struct undo {
    impl& self;
    bool armed = true;
    ~undo() {
      if (!armed) return;
      --self.runners;
      --self.starting;
      self.tasks->done();
      self.pool_failure = "the thread pool refused a task (it could not start a thread): chunks run on the feeder";
    }
  } guard{*this};
  arena.enqueue([this, count = tasks] {
    // Pairs with the fetch_add above: TBB orders the hand-off too, but in code ThreadSanitizer
    // cannot see.
    (void)count->value.load(std::memory_order_acquire);
    if (count->begin()) {
      runner();  // noexcept: whatever fails in a chunk is that batch's error
      count->end();
    }
    count->done();  // the last use of the loader by this task
  });
  guard.armed = false;
}

void loader::impl::runner() noexcept {
  // A TBB thread, given back its affinity after. Placement is best effort: without it (no memory
  // for the CPU set) the chunks still run, wherever the thread is.
  std::optional<scoped_cpu_binding> placed;
  try {
    placed.emplace(place.cpus);
  } catch (...) {
  }
  std::unique_lock lock(pool_mutex);
  --starting;
  // Runs queued chunks until there are none, or more runners than the workers asked for.
  while (!queue.empty() && runners <= active) {
    const chunk c = queue.front();
    queue.pop_front();
    last_pop_ns = now_ns();
    lock.unlock();
    run_chunk(c.slot, c.begin, c.end);
    lock.lock();
  }
  --runners;
}

void loader::impl::help_if_stalled() noexcept {
  // Stalled: chunks wait, and no runner has taken one for 2 s (merely slow workers keep taking
  // them). Then every chunk that has waited that long runs here, in the consumer's thread.
  constexpr std::uint64_t kStallNs = 2'000'000'000;
  for (;;) {
    chunk c{};
    try {
      std::lock_guard lock(pool_mutex);
      const std::uint64_t now = now_ns();
      if (queue.empty() || now - queue.front().queued_ns < kStallNs || now - last_pop_ns < kStallNs) return;
      c = queue.front();
      queue.pop_front();
    } catch (...) {  // the pool's mutex: try again at the next poll
      return;
    }
    log_once(warned_consumer_helps, log_level::warn, [] {
      return std::string("loader: no worker took a queued chunk for 2 s (the thread pool could not start its "
                         "threads?); the consumer runs such chunks itself while it waits");
    });
    run_chunk(c.slot, c.begin, c.end);
  }
}

void loader::impl::set_workers(std::size_t n) {
  std::lock_guard lock(pool_mutex);
  active = std::clamp<std::size_t>(n, 1, worker_most);
  if (pool_failure == nullptr) spawn_runners();  // runners beyond it stop after their chunk
}

void loader::impl::start_window() {
  window_start_ns = now_ns();
  window_wait_ns = window_samples = window_batches = window_excluded_ns = 0;
  window_cpu_s = process_cpu_seconds();
}

void loader::impl::judge_window() {
  const double seconds = 1e-9 * static_cast<double>(now_ns() - window_start_ns - window_excluded_ns);
  if (seconds < 0.25 || window_batches < 4) return;
  const detail::tuner_window w{seconds, 1e-9 * static_cast<double>(window_wait_ns),
                               (process_cpu_seconds() - window_cpu_s) / seconds, static_cast<double>(place.cores),
                               window_samples};
  const std::size_t prefetch_before = tuner->prefetch();
  if (tuner->judge(w)) {
    set_workers(tuner->workers());
    if (tuner->prefetch() != prefetch_before) {
      const std::size_t slots = tuner->prefetch() + core->options.max_batches_in_use;
      try {
        core->allocate_slots(slots);
        core->ring.set_usable(slots);
      } catch (const std::exception& e) {  // within the budget, but the system refused: go on as it was
        tuner->refuse_prefetch(prefetch_before);
        log(log_level::warn, std::string("loader: auto_tune keeps prefetch ") + std::to_string(prefetch_before) + ": " + e.what());
      }
    }
    log(log_level::debug, "loader: auto_tune: " + tuner->reason());
  }
  if (tuner->settled() && !tuning_logged) {
    tuning_logged = true;
    log(log_level::info, "loader: auto_tune settled on " + std::to_string(tuner->workers()) + " workers (of " +
                             std::to_string(worker_most) + "), prefetch " + std::to_string(tuner->prefetch()) + " (of " +
                             std::to_string(core->prefetch_most()) + ") after " + std::to_string(tuner->windows()) +
                             " windows: " + tuner->reason());
  }
  start_window();
}

void loader::impl::cancel() noexcept {
  if (!started) return;
  stopping.store(true, std::memory_order_release);
  core->ring.close();
  if (feeder.joinable()) feeder.join();
  bool abandoned = false;
  {
    // A healthy pool runs every task within milliseconds (the chunks do nothing while stopping).
    // Tasks still not begun after a second are given up: TBB may never run them (a worker thread
    // it could not start fails inside TBB, where pinfeed never hears of it), and one that begins
    // later returns at once without touching the loader. The ones inside runner() are waited for.
    std::unique_lock lock(tasks->mutex);
    const auto all_done = [&] { return tasks->value.load(std::memory_order_acquire) == 0; };
    if (!tasks->idle.wait_for(lock, std::chrono::seconds(1), all_done)) {
      tasks->abandoned = abandoned = true;
      tasks->idle.wait(lock, [&] { return tasks->running == 0 || all_done(); });
    }
  }
  if (abandoned) {
    std::lock_guard pool(pool_mutex);
    queue.clear();  // (their slots are reset below, as a runner would have skipped them)
    runners = starting = 0;
    try {
      tasks = std::make_shared<task_count>();
    } catch (...) {  // no memory for a new count: the pool is not asked again, chunks run on the feeder
      pool_failure = "no memory to count the thread pool's tasks: chunks run on the feeder";
    }
  }
  if (core->dev.is_cuda()) {
    try {
      device_guard guard(core->dev.index);
      core->drain(core->copy_stream.get());
    } catch (const std::exception& e) {
      log(log_level::error, std::string("cancelling copies: ") + e.what());
    }
  }
  core->ring.reopen();
  stopping.store(false, std::memory_order_release);
  started = false;
}

void loader::impl::start(std::uint32_t e, std::uint64_t first_batch) {
  const std::uint64_t in_epoch = batches_in(order->size(e), core->options);
  if (first_batch > in_epoch)
    throw pinfeed::out_of_range("start batch " + std::to_string(first_batch) + " is past the epoch's " +
                            std::to_string(in_epoch) + " batches");
  cancel();
  batches = in_epoch;
  epoch = e;
  next_batch = first_batch;
  seq_base = next_seq;
  next_seq += batches;
  pass = detail::last_pass.fetch_add(1, std::memory_order_relaxed) + 1;  // (the tasks of the last start are done)
  epoch_fresh = true;
  feeder_error = nullptr;
  try {
    feeder = std::thread([this, e, first_batch, base = seq_base] { feed(e, first_batch, base); });
  } catch (const std::system_error& x) {  // (no thread to be had: a limit of the system, not a bug)
    throw pinfeed::runtime_error(std::string("loader: could not start the feeder thread (the system has no memory or "
                                             "threads left for one): ") + x.what());
  }
  started = true;  // (not before: without a feeder, next() would wait for batches nobody fills)
}

void loader::impl::feed(std::uint32_t e, std::uint64_t first_batch, std::uint64_t base) noexcept {
  try {
    feed_batches(e, first_batch, base);
  } catch (...) {
    // Outside any one batch (the thread's placement, waiting for a slot): the consumer's next()
    // throws it and stops the loader; the following next() starts again at the batch it lacks.
    {
      std::lock_guard lock(feeder_mutex);
      feeder_error = std::current_exception();
    }
    core->ring.close();
  }
}

void loader::impl::feed_batches(std::uint32_t e, std::uint64_t first_batch, std::uint64_t base) {
  const scoped_cpu_binding placed(place.cpus);
  auto& c = *core;
  const std::size_t B = c.options.batch_size;
  // This thread waits on the loader's events: it works on the loader's device, so that a CUDA call
  // here never creates a context on device 0 (a rank on GPU 3 of a multi-GPU job). If the device
  // cannot be made current, every batch carries that failure to the consumer.
  std::optional<device_guard> on_device;
  std::exception_ptr device_failure;
  if (c.dev.is_cuda()) {
    try {
      on_device.emplace(c.dev.index);
    } catch (...) {
      device_failure = std::current_exception();
    }
  }
  for (std::uint64_t b = first_batch; b < batches; ++b) {
    if (stopping.load(std::memory_order_acquire)) return;
    std::optional<std::size_t> slot;
    std::exception_ptr failure = device_failure;
    {
      stage_timer t(stage::wait_slot, &c.stats, c.trace.get(), b);
      slot = c.ring.acquire(base + b);
      if (!slot) return;
      auto& m = c.meta[*slot];
      // The host slot is rewritten only once its previous copy has completed.
      if (c.dev.is_cuda() && m.copy_recorded && !failure) {
        try {
          PINFEED_CUDA_TRY(cudaEventSynchronize(m.copy_event.get()));
        } catch (...) {
          failure = std::current_exception();
        }
      }
    }
    auto& m = c.meta[*slot];
    m.epoch = e;
    m.batch = b;
    m.count = static_cast<std::size_t>(std::min<std::uint64_t>(B, order->size(e) - b * B));
    m.error_count = 0;
    try {
      for (std::size_t j = 0; j < m.count; ++j) m.indices[j] = order->index_at(e, b * B + j);
    } catch (...) {  // the batch fails with it, and no sample of it runs
      m.error = std::current_exception();
      m.error_index = 0;
      m.remaining.store(0, std::memory_order_release);
      finish_slot(*slot);
      continue;
    }
    m.error = failure;
    m.error_index = failure ? m.indices[0] : 0;
    const std::size_t chunks = std::min(m.count, worker_most * 4);
    m.remaining.store(chunks, std::memory_order_release);
    for (std::size_t k = 0; k < chunks; ++k) {
      const chunk piece{*slot, m.count * k / chunks, m.count * (k + 1) / chunks};
      try {
        submit(piece);
      } catch (...) {  // not queued (memory): the batch fails with it; its chunks not sent never run
        record_error(m, std::current_exception(), m.indices[piece.begin]);
        const std::size_t unsent = chunks - k;
        if (m.remaining.fetch_sub(unsent, std::memory_order_acq_rel) == unsent) finish_slot(*slot);
        break;
      }
    }
  }
}

void loader::impl::run_chunk(std::size_t slot, std::size_t begin, std::size_t end) noexcept {
  auto& c = *core;
  auto& m = c.meta[slot];
  try {
    produce_chunk(slot, begin, end);
  } catch (...) {  // outside a sample (its buffers' list, say): the batch fails with it
    record_error(m, std::current_exception(), m.indices[begin]);
  }
  if (m.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_slot(slot);
}

void loader::impl::record_error(detail::slot_meta& m, std::exception_ptr err, std::uint64_t index) noexcept {
  std::lock_guard lock(m.error_mutex);
  ++m.error_count;
  if (!m.error || index < m.error_index) {
    m.error = std::move(err);
    m.error_index = index;
  }
}

void loader::impl::produce_chunk(std::size_t slot, std::size_t begin, std::size_t end) {
  auto& c = *core;
  auto& m = c.meta[slot];
  if (!stopping.load(std::memory_order_acquire)) {
    // Per chunk, not thread_local: a user source may wait inside TBB without isolation, and the
    // thread can then run another chunk while this one's sample still points into its buffers.
    std::vector<std::byte*> buffers(c.fields.size());
    std::byte* base = c.host_slot(slot);
    for (std::size_t j = begin; j < end; ++j) {
      for (std::size_t f = 0; f < c.fields.size(); ++f)
        buffers[f] = base + c.field_offset[f] + j * c.fields[f].bytes();
      sample s(m.indices[j], m.epoch, c.options.seed, c.fields, buffers, &c.stats, c.trace.get());
      detail::sample_access::place(s, &*order, m.batch * c.options.batch_size + j, pass);
      std::exception_ptr err;
      try {
        stage_timer t(stage::produce, &c.stats, c.trace.get(), s.index());
        src->produce(s);
      } catch (const sample_error&) {
        err = std::current_exception();
      } catch (const fatal_error&) {  // not the sample's fault: reaches the consumer as it is
        err = std::current_exception();
      } catch (const std::bad_alloc&) {
        err = std::current_exception();
      } catch (const std::exception& ex) {
        err = std::make_exception_ptr(sample_error(s.index(), "produce", s.origin(), ex.what()));
      } catch (...) {
        err = std::make_exception_ptr(sample_error(s.index(), "produce", s.origin(), "unknown exception"));
      }
      if (err) {
        c.stats.add_error();
        record_error(m, std::move(err), s.index());
      }
    }
  }
}

void loader::impl::finish_slot(std::size_t slot) noexcept {
  auto& c = *core;
  if (stopping.load(std::memory_order_acquire)) return;  // cancel() resets the slot
  auto& m = c.meta[slot];
  c.ring.advance(slot, slot_state::filling, slot_state::filled);
  if (!c.dev.is_cuda() || m.error) {
    c.ring.publish(slot, slot_state::filled);
    return;
  }
  c.ring.advance(slot, slot_state::filled, slot_state::copying);
  try {
    stage_timer t(stage::copy, &c.stats, c.trace.get(), m.batch);
    device_guard guard(c.dev.index);
    // The device slot may still be read by consumer work queued before its last release.
    if (m.release_recorded) PINFEED_CUDA_TRY(cudaStreamWaitEvent(c.copy_stream.get(), m.release_event.get(), 0));
    if (m.after_recorded) {  // work the consumer queued on its own stream before release_after()
      PINFEED_CUDA_TRY(cudaStreamWaitEvent(c.copy_stream.get(), m.after_event.get(), 0));
      m.after_recorded = false;
    }
    c.wait_fences(slot, c.copy_stream.get());  // work on DLPack views' own streams up to their deleters
    PINFEED_CUDA_TRY(cudaMemcpyAsync(c.device_slot(slot), c.host_slot(slot), c.used_bytes(m.count),
                                     cudaMemcpyHostToDevice, c.copy_stream.get()));
    // The copy event is recorded even when the hook throws: the queued copy still reads the host
    // slot, which must not be refilled before it has (the feeder waits for this event).
    std::exception_ptr hook_failure;
    if (c.options.after_copy) {
      try {
        c.options.after_copy(c.used_bytes(m.count), c.copy_stream.get());
      } catch (const std::exception&) {  // (a std::bad_alloc included) reaches next() as thrown
        hook_failure = std::current_exception();
      } catch (...) {
        hook_failure = std::make_exception_ptr(pinfeed::runtime_error(
            "loader: the after_copy hook threw an exception that is not a std::exception (batch " +
            std::to_string(m.batch) + ")"));
      }
    }
    PINFEED_CUDA_TRY(cudaEventRecord(m.copy_event.get(), c.copy_stream.get()));
    m.copy_recorded = true;
    if (hook_failure) std::rethrow_exception(hook_failure);
  } catch (...) {
    std::lock_guard lock(m.error_mutex);
    m.error = std::current_exception();
    m.error_index = m.indices[0];
  }
  c.ring.publish(slot, slot_state::copying);
}

std::optional<batch> loader::impl::next() {
  if (!started) start(epoch, next_batch);
  if (next_batch >= batches) return std::nullopt;
  auto& c = *core;
  check_held();
  positioned = false;
  std::uint64_t expected = 0;
  c.first_take_ns.compare_exchange_strong(expected, now_ns());
  std::optional<std::size_t> slot;
  // Allocated before a slot is taken: once taken, nothing may fail before the lease holds it.
  auto lease = std::make_shared<detail::slot_lease>(core, detail::slot_lease::kNone);
  const std::uint64_t wait_from = now_ns();
  {
    stage_timer t(stage::consumer_wait, &c.stats, c.trace.get(), next_batch);
    slot = c.ring.take(seq_base + next_batch, std::chrono::milliseconds(100), [this] { help_if_stalled(); });
  }
  if (!slot) {
    std::exception_ptr failed;
    {
      std::lock_guard lock(feeder_mutex);
      failed = feeder_error;
    }
    if (failed) {
      cancel();  // the next call starts again at this batch
      std::rethrow_exception(failed);
    }
    throw loader_closed("loader was closed while waiting for batch " + std::to_string(next_batch));
  }
  lease->slot = *slot;
  ++next_batch;
  if (tuner) {
    try {
      if (window_start_ns == 0) {
        start_window();
      } else if (epoch_fresh) {
        // Between epochs the trainer may evaluate or checkpoint, and the first batch waits for the
        // pipeline to fill: neither is the loader's pace.
        window_excluded_ns += now_ns() - last_take_ns;
      } else {
        window_wait_ns += now_ns() - wait_from;
        window_samples += c.meta[*slot].count;
        ++window_batches;
        judge_window();
      }
    } catch (const std::exception& e) {  // tuning is best effort: the batch is delivered all the same
      log(log_level::warn, std::string("loader: auto_tune: ") + e.what());
    }
    epoch_fresh = false;
    last_take_ns = now_ns();
  }
  auto& m = c.meta[*slot];
  if (m.error) {
    const std::exception_ptr err = m.error;
    lease.reset();  // the failed batch is dropped; its slot goes back to the ring
    std::rethrow_exception(err);
  }
  if (c.dev.is_cuda()) {
    device_guard guard(c.dev.index);
    PINFEED_CUDA_TRY(cudaStreamWaitEvent(c.consumer_stream, m.copy_event.get(), 0));
  }
  c.stats.add_batch(m.count, c.used_bytes(m.count));
  return batch(std::move(lease));
}

void loader::impl::check_held() const {
  // The ring has prefetch + max_batches_in_use usable slots. While the consumer holds at most
  // max_batches_in_use of them, at least prefetch (>= 1) are left to fill, so the batch asked for
  // comes; holding every slot would make next() wait forever. Past the limit it is refused at once.
  const std::size_t held = core->ring.count(detail::slot_state::in_use);
  const std::size_t most = core->options.max_batches_in_use;
  if (held <= most) return;
  const std::size_t pf = core->ring.usable() - most;
  throw batches_held_error(
      held, most,
      "loader::next(): the consumer holds " + std::to_string(held) + " batches (batch objects, or DLPack views of " +
          "released ones) and loader_options::max_batches_in_use is " + std::to_string(most) + " (prefetch " +
          std::to_string(pf) + ", " + std::to_string(core->ring.usable()) + " slots): with more held, the loader " +
          "could run out of slots to fill and next() would wait forever. Release a batch before asking for the " +
          "next (batch::release(), or let it go out of scope), or set max_batches_in_use to the most batches you " +
          "keep at a call of next() (each adds a slot of " + format_bytes(core->slot_bytes) + ")");
}

loader::loader(std::shared_ptr<source> src, loader_options options)
    : impl_(std::make_unique<impl>(std::move(src), std::move(options))) {}
loader::loader(loader&&) noexcept = default;
loader& loader::operator=(loader&&) noexcept = default;
loader::~loader() = default;

std::optional<batch> loader::next() { return impl_->next(); }
void loader::start_epoch(std::uint32_t epoch) {
  if (impl_->positioned && impl_->epoch == epoch) return;  // resumed (or just started) there: keep it
  start_epoch(epoch, 0);
}
void loader::start_epoch(std::uint32_t epoch, std::uint64_t first_batch) {
  const std::uint64_t whole = batches_in(impl_->order->size(), impl_->core->options);
  if (first_batch > whole)  // before anything changes: a refused start leaves the loader as it was
    throw pinfeed::out_of_range("start batch " + std::to_string(first_batch) + " is past the epoch's " +
                            std::to_string(whole) + " batches");
  impl_->cancel();  // no worker reads the order while it changes
  impl_->order->unrestrict();
  impl_->start(epoch, first_batch);
  impl_->positioned = true;
}
std::uint32_t loader::epoch() const noexcept { return impl_->epoch; }
std::uint64_t loader::next_batch() const noexcept { return impl_->next_batch; }
std::uint64_t loader::batches_per_epoch() const noexcept { return impl_->batches; }
const epoch_order& loader::order() const noexcept { return *impl_->order; }

namespace {
constexpr int kStateVersion = 2;

std::string dataset_digest(const source& src, std::uint64_t size) {
  const std::string id = src.identity() + "#" + std::to_string(size);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash_bytes(id.data(), id.size())));
  return hex;
}
}  // namespace

std::string loader::state() const {
  const auto& o = *impl_->order;
  const auto& opt = impl_->core->options;
  // Built member by member: an initializer list leaves temporary arrays whose destructor allocates
  // (detail/json_release.hpp).
  nlohmann::json j = nlohmann::json::object();
  const detail::json_releaser release(j);
  j["version"] = kStateVersion;
  j["dataset"] = dataset_digest(*impl_->src, impl_->dataset_size);
  j["seed"] = opt.seed;
  j["dataset_size"] = impl_->dataset_size;
  j["batch_size"] = opt.batch_size;
  j["drop_last"] = opt.drop_last;
  j["order"] = o.kind();
  j["drop_remainder"] = o.drops_remainder();
  j["epoch"] = impl_->epoch;
  j["world"] = o.world();
  j["rank"] = o.rank();
  j["next_batch"] = impl_->next_batch;
  auto& plan = j["plan"] = nlohmann::json::array();
  for (const auto& r : o.plan(impl_->epoch)) {
    // In place: a range built aside would be destroyed whole if the push failed.
    plan.push_back(nlohmann::json::array());
    auto& range = plan.back();
    range.push_back(r.begin);
    range.push_back(r.end);
  }
  return j.dump();
}

void loader::resume(const std::string& state) {
  nlohmann::json j;
  const detail::json_releaser release(j);
  try {
    detail::parse_json_into(j, state);
  } catch (const nlohmann::json::exception& e) {
    throw pinfeed::invalid_argument(std::string("loader state is not JSON: ") + e.what());
  }
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(name)) throw pinfeed::invalid_argument(std::string("loader state lacks '") + name + "'");
    return j.at(name);
  };
  auto& im = *impl_;
  const auto& o = *im.order;
  const auto& opt = im.core->options;
  auto expect = [&](const char* name, const nlohmann::json& mine, const char* what) {
    if (field(name) != mine)
      throw pinfeed::invalid_argument(std::string("loader state does not match this loader: ") + name + " is " +
                                  field(name).dump() + " there, " + mine.dump() + " here (" + what + ")");
  };
  const auto& version = field("version");
  if (version != kStateVersion)
    throw pinfeed::invalid_argument("loader state version " + version.dump() + " is not supported: this pinfeed reads version " +
                                std::to_string(kStateVersion) + " (start the epoch anew with start_epoch())");
  expect("dataset_size", im.dataset_size, "another dataset");
  expect("dataset", dataset_digest(*im.src, im.dataset_size), "another dataset: its files or shards differ");
  expect("seed", opt.seed, "another seed gives another order");
  expect("order", o.kind(), "another kind of order");
  expect("batch_size", opt.batch_size, "positions are counted in batches");
  expect("drop_last", opt.drop_last, "positions are counted in batches");
  expect("drop_remainder", o.drops_remainder(), "the split over ranks differs");
  const auto& epoch_j = field("epoch");
  const auto& world_j = field("world");
  const auto& next_j = field("next_batch");
  const auto& plan_j = field("plan");
  if (!epoch_j.is_number_unsigned() || epoch_j.get<std::uint64_t>() > 0xFFFFFFFFull)
    throw pinfeed::invalid_argument("loader state: epoch " + epoch_j.dump() + " is not a 32-bit unsigned number");
  if (!world_j.is_number_unsigned() || world_j.get<std::uint64_t>() < 1 || world_j.get<std::uint64_t>() > 1u << 24)
    throw pinfeed::invalid_argument("loader state: world " + world_j.dump() + " is not a world size (1 to 16777216)");
  if (!next_j.is_number_unsigned())
    throw pinfeed::invalid_argument("loader state: next_batch " + next_j.dump() + " is not an unsigned number");
  const auto e = epoch_j.get<std::uint32_t>();
  std::vector<position_range> plan;
  if (!plan_j.is_array())
    throw pinfeed::invalid_argument("loader state: plan " + plan_j.dump() + " is not a list of [begin, end] ranges");
  for (const auto& r : plan_j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned())
      throw pinfeed::invalid_argument("loader state: plan range " + r.dump() + " is not [begin, end]");
    plan.push_back({r[0].get<std::uint64_t>(), r[1].get<std::uint64_t>()});
  }
  const bool whole = plan.size() == 1 && plan[0] == position_range{0, im.dataset_size};
  // The order the state was saved under (rank 0 of its world: every rank is at the same batch).
  epoch_order_options saved_opt;
  saved_opt.shuffle = o.shuffled();
  saved_opt.rank = 0;
  saved_opt.world = static_cast<int>(world_j.get<std::uint64_t>());
  saved_opt.drop_remainder = o.drops_remainder();
  saved_opt.groups = o.groups();
  std::optional<epoch_order> saved;
  try {
    saved.emplace(im.dataset_size, opt.seed, saved_opt);
    if (!whole) saved->restrict(e, plan);
  } catch (const std::invalid_argument& ex) {
    throw pinfeed::invalid_argument(std::string("loader state: ") + ex.what());
  }
  const std::uint64_t saved_batches = batches_in(saved->size(e), opt);
  const std::uint64_t next = next_j.get<std::uint64_t>();
  if (next > saved_batches)
    throw pinfeed::invalid_argument("loader state: next_batch " + next_j.dump() + " is not in [0, " +
                                std::to_string(saved_batches) + "]");
  // Everything that may fail (memory) is worked out on a copy of the order first: a resume that
  // fails leaves the loader as it was.
  epoch_order resumed = *im.order;
  std::uint64_t first = next;
  std::string warning, note;
  if (saved->world() == o.world()) {
    // The same split: every rank goes on with its own share.
    if (whole) resumed.unrestrict();
    else resumed.restrict(e, plan);
  } else {
    // Another world size: what the saved ranks had not delivered yet is split over this one's.
    const std::uint64_t taken = next == saved_batches ? saved->size(e) : next * opt.batch_size;
    auto remaining = saved->remaining_after(e, taken);
    std::uint64_t left = 0;
    for (const auto& r : remaining) left += r.end - r.begin;
    resumed.restrict(e, std::move(remaining));
    first = 0;
    const std::uint64_t mine = resumed.size(e), world = static_cast<std::uint64_t>(o.world());
    if (o.drops_remainder() && mine * world < left)
      warning = "loader: resuming epoch " + std::to_string(e) + " with drop_remainder drops the " +
                std::to_string(left - mine * world) + " of its " + std::to_string(left) +
                " remaining samples that do not divide over " + std::to_string(world) + " ranks";
    note = "loader: resuming epoch " + std::to_string(e) + " saved by " + std::to_string(saved->world()) +
           " ranks after " + std::to_string(next) + " batches each on " + std::to_string(world) + " ranks: " +
           std::to_string(left) + " samples left, " + std::to_string(mine) + " for this rank";
  }
  im.cancel();  // no worker reads the order while it changes
  *im.order = std::move(resumed);
  im.positioned = true;
  im.start(e, first);  // a thread that cannot start leaves the loader stopped there: next() starts it
  if (!warning.empty()) log(log_level::warn, warning);
  if (!note.empty()) log(log_level::info, note);
}
const std::vector<field_spec>& loader::fields() const noexcept { return impl_->core->fields; }
const loader_options& loader::options() const noexcept { return impl_->core->options; }
device_choice loader::device() const noexcept { return impl_->core->dev; }
cudaStream_t loader::stream() const noexcept { return impl_->core->consumer_stream; }
std::size_t loader::slots() const noexcept { return impl_->core->ring.size(); }
std::size_t loader::slot_bytes() const noexcept { return impl_->core->slot_bytes; }
std::size_t loader::host_bytes() const noexcept { return impl_->core->allocated_bytes(); }
std::size_t loader::device_bytes() const noexcept { return impl_->core->dev.is_cuda() ? host_bytes() : 0; }
std::size_t loader::workers() const noexcept {
  std::lock_guard lock(impl_->pool_mutex);
  return impl_->active;
}
std::size_t loader::prefetch() const noexcept {
  return impl_->core->ring.usable() - impl_->core->options.max_batches_in_use;
}

loader::tuning_report loader::tuning() const {
  const auto& im = *impl_;
  tuning_report r;
  r.workers = workers();
  r.prefetch = prefetch();
  r.workers_most = im.worker_most;
  r.prefetch_most = im.core->prefetch_most();
  if (!im.tuner) {
    r.settled = true;
    r.reason = "fixed by the options";
    return r;
  }
  r.workers_auto = im.tuner->limits().workers;
  r.prefetch_auto = im.tuner->limits().prefetch;
  r.windows = im.tuner->windows();
  r.changes = im.tuner->changes();
  r.settled = im.tuner->settled();
  r.reason = im.tuner->reason();
  return r;
}

stats_snapshot loader::stats() const {
  const auto& c = *impl_->core;
  stats_snapshot s = c.stats.snapshot();
  const std::uint64_t first = c.first_take_ns.load();
  s.wall_ns = first ? now_ns() - first : 0;
  s.host_bytes = host_bytes();
  s.device_bytes = device_bytes();
  return s;
}

void loader::reset_stats() {
  impl_->core->stats.reset();
  impl_->core->first_take_ns.store(0);
}

const trace_recorder* loader::trace() const noexcept { return impl_->core->trace.get(); }

void loader::write_trace(const std::string& path) const {
  if (!impl_->core->trace) throw pinfeed::logic_error("tracing is off: set loader_options::trace to record one");
  impl_->core->trace->write(path);
}

}  // namespace pinfeed
