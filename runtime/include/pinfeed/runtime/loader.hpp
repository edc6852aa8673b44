#pragma once
/// @file loader.hpp
/// The Loader: runs a Source on a TBB worker pool into pinned batch slots, copies finished slots
/// to the GPU on a dedicated stream, and hands batches to the consumer in order.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/batch.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/source.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed {

/// The value of loader_options::workers and ::prefetch that lets the loader choose them as it runs
/// (see loader_options).
inline constexpr std::size_t auto_tune = ~std::size_t{0};

/// Where the loader puts its threads and pinned slots (loader_options::bind).
enum class cpu_binding {
  /// The node plan's place for this rank (pinfeed::this_node_plan()): workers and the feeder run on
  /// its share of the CPUs close to its GPU (always within the affinity the process was given), and
  /// pinned host slots are allocated on the GPU's NUMA node where the machine has more than one.
  /// Nothing is placed where the plan knows no GPU locality, or when the loader's device is not the
  /// plan's GPU (device auto is: CUDA device LOCAL_RANK).
  plan,
  none,  ///< as the operating system places them
};

struct loader_options {
  std::size_t batch_size = 32;
  /// Worker threads; 0 = this rank's cores in the node plan (pinfeed::this_node_plan(): the cores
  /// its affinity mask and cgroup CPU quota leave, divided among the ranks on this node), within
  /// TBB's cap. TBB caps the threads of a process (tbb::global_control::max_allowed_parallelism, by
  /// default the hardware threads, one of them the caller's), and the loader runs
  /// min(workers, that cap - 1) and logs a warning when that is fewer than asked. The loader never changes the cap: an application that wants more workers
  /// than that holds its own tbb::global_control while the loader lives (the pinfeed tools do).
  ///
  /// auto_tune: the loader chooses, as it runs, between 1 and what 0 would run, starting there. It
  /// measures windows of delivered batches (a quarter of a second at least): while the consumer
  /// waits for batches and a core idles it adds workers, keeping each step only when the batches come at least 5%
  /// faster; when the consumer never waits it gives workers back. loader::tuning() reports the
  /// choice, which is logged once when it settles. Batch contents never depend on it.
  std::size_t workers = 0;
  /// Batches produced ahead of the consumer. auto_tune: 2 at first, one more while the consumer
  /// still waits with no worker to add, kept when it helps, up to 8 and what memory_budget
  /// allows (the budget is checked for the most; slots are allocated as prefetch grows).
  std::size_t prefetch = 2;
  /// The most batches the consumer may still hold when it calls next(): batch objects, and DLPack
  /// views of batches already released (each keeps its slot). The loader has prefetch + this slots.
  /// The default, 1, lets a loop keep the batch it has while it asks for the next
  /// (`b = loader.next()`); a trainer that keeps batches (gradient accumulation over k batches, a
  /// replay buffer) sets it to the most it holds at a call. next() enforces it: holding more, the
  /// call throws batches_held_error at once, instead of waiting for a slot that may never come back.
  std::size_t max_batches_in_use = 1;
  device_spec device{};                  ///< auto (default), cpu, cuda, cuda:N, local_rank: see device_spec
  bool drop_last = false;              ///< drop a last partial batch
  std::uint64_t seed = 0;              ///< with (epoch, index), fixes every sample's random stream
  std::uint32_t epoch = 0;             ///< the epoch next() starts with
  /// Sample order: sequential or shuffled per epoch, and this process's shard of it. The default
  /// shards by the launcher's environment (torchrun, Open MPI, Slurm) when one set it.
  epoch_order_options order{};
  /// The consumer's stream. Unset: the loader creates a non-blocking stream on its device.
  std::optional<cudaStream_t> stream{};
  /// Called right after each batch's host-to-device copy is queued on the copy stream, with the
  /// bytes copied; work it queues on that stream delays the batch's readiness (an emulated slow
  /// link: pinfeed::throttle_copy; instrumentation). It runs on the worker thread that completed
  /// the batch, so calls for different batches may run at the same time and in any order: it must
  /// be thread-safe. The copy event is recorded after it returns (or throws). Empty (default):
  /// none. Only with a GPU: on the CPU path nothing is copied and the loader refuses it. An
  /// exception it throws fails that batch.
  std::function<void(std::size_t bytes, cudaStream_t copy_stream)> after_copy{};
  /// Called on the consumer's thread about every 100 ms while next() waits for a batch that is not
  /// produced yet (a language binding checks its signals here: Ctrl-C in a Python loop). What it
  /// throws, next() throws, with nothing consumed: the next call waits for the same batch. Empty
  /// (default): none.
  std::function<void()> interrupt{};
  /// The most bytes the loader and its source may hold: the host slots (pinned with a GPU), the
  /// device slots and what the source reports (source::memory(): sample caches, a remote reader's
  /// shard cache or read-ahead). A loader that would need more fails at construction with a
  /// message naming each part's bytes and the budget; so does a budget above the memory this
  /// process may use (the node plan's: physical memory or its cgroup's limit). Unset: this rank's
  /// share of that memory (divided among the ranks on this node) bounds the host's parts - the
  /// host slots and the source's - and prefetch auto grows within half of it; settings that cannot
  /// fit fail at construction, naming the limit and where it came from.
  std::optional<std::uint64_t> memory_budget{};
  cpu_binding bind = cpu_binding::plan;  ///< where threads and pinned slots go (see cpu_binding)
  bool trace = false;                  ///< record stage spans for a Chrome trace
  std::size_t trace_max_events = 1u << 20;
};

/// Throws std::invalid_argument naming the option and value when `o` is unusable.
void validate(const loader_options& o);

/// "1.50 GiB", "12.0 MiB", "512 bytes": a size as messages print it.
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);
/// "8GiB", "512 MiB", "1.5GB", "4096": bytes (B, KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB,
/// TiB and K, M, G powers of 1024; case ignored). Throws std::invalid_argument quoting the text.
[[nodiscard]] std::uint64_t parse_bytes(std::string_view text);

/// Loads batches from a source. Delivery is strictly in order; batch contents are a pure function
/// of (source, seed, epoch, batch index), whatever the worker count or timing.
///
/// Threads: next(), start_epoch() and the destructor are called from one consumer thread at a time.
/// Errors: if producing sample i throws, next() throws pinfeed::sample_error (naming i and the
/// original message) when it reaches the batch holding i; that batch is dropped and the loader stays
/// usable: the following next() yields the batch after it. Destroying the loader mid-epoch cancels
/// queued work, waits for running samples and in-flight copies, and joins every thread.
class loader {
 public:
  /// Allocates the slots of the first prefetch (host: pinned when a GPU is used; device: one slot
  /// each; prefetch auto allocates more as it grows) and starts no work yet. Throws std::invalid_argument for bad options or fields, cuda_error on CUDA failures.
  loader(std::shared_ptr<source> src, loader_options options);
  loader(loader&&) noexcept;
  loader& operator=(loader&&) noexcept;
  loader(const loader&) = delete;
  loader& operator=(const loader&) = delete;
  ~loader();

  /// The next batch of the current epoch, or nullopt at its end (then start_epoch() begins another).
  /// Starts the epoch of the options on first use. Blocks only while the batch is not produced yet
  /// (counted as consumer wait); never waits for the GPU. Throws sample_error as described above,
  /// and batches_held_error (at once, nothing consumed) when the consumer holds more than
  /// loader_options::max_batches_in_use batches: release one and call again.
  [[nodiscard]] std::optional<batch> next();
  /// Starts `epoch` from its first batch: cancels the current epoch (in-flight work is discarded;
  /// batches the consumer holds stay valid). One exception: when the loader already stands at the
  /// start of its position in `epoch` - resume() (or start_epoch()) put it there and no batch has
  /// been taken since - the position is kept. So a loop that calls start_epoch(e) at each epoch's
  /// top continues a resumed epoch where the saved state left it, instead of delivering its first
  /// batches again. start_epoch(e, 0) always restarts.
  void start_epoch(std::uint32_t epoch);
  /// Starts `epoch` at batch `first_batch` (0: from its start), whatever the loader's position:
  /// an explicit restart. Throws std::out_of_range (leaving the loader as it was) past the epoch's
  /// batches.
  void start_epoch(std::uint32_t epoch, std::uint64_t first_batch);

  /// The epochs up to `end` (not included), for `for (std::uint32_t e : loader.epochs(n))`: the
  /// first is the loader's current epoch, continued from its position (after resume(): the resumed
  /// epoch at the saved batch; on a new loader: options().epoch from its start); each step to the
  /// next epoch starts it from batch 0. Empty when the loader is at `end` or past it. Iterate the
  /// batches of each epoch with `for (batch& b : loader)` or next() inside.
  class epoch_range {
   public:
    class iterator {
     public:
      using iterator_category = std::input_iterator_tag;
      using value_type = std::uint32_t;
      using difference_type = std::ptrdiff_t;
      iterator() = default;
      iterator(loader* l, std::uint32_t e, std::uint32_t end) : loader_(l), epoch_(e), end_(end) {}
      std::uint32_t operator*() const noexcept { return epoch_; }
      iterator& operator++() {
        if (++epoch_ < end_) loader_->start_epoch(epoch_, 0);
        return *this;
      }
      void operator++(int) { ++*this; }
      friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.epoch_ >= it.end_; }

     private:
      loader* loader_ = nullptr;
      std::uint32_t epoch_ = 0, end_ = 0;
    };
    epoch_range(loader* l, std::uint32_t end) : loader_(l), end_(end) {}
    [[nodiscard]] iterator begin() const { return iterator(loader_, loader_->epoch(), end_); }
    [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

   private:
    loader* loader_;
    std::uint32_t end_;
  };
  [[nodiscard]] epoch_range epochs(std::uint32_t end) { return epoch_range(this, end); }

  /// Input iterator over the rest of the current epoch: `for (batch& b : loader) ...`. Each step
  /// calls next() (and so may throw sample_error); the previous batch is released first.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(loader* l) : loader_(l) { ++*this; }
    batch& operator*() const { return *current_; }
    batch* operator->() const { return &*current_; }
    iterator& operator++() {
      current_.reset();
      current_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return !it.current_; }

   private:
    loader* loader_ = nullptr;
    mutable std::optional<batch> current_;
  };
  [[nodiscard]] iterator begin() { return iterator(this); }
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

  /// The loader's position as a small JSON object (seed, epoch, next batch, and what the order
  /// depends on). Call it between batches; a loader restored from it yields exactly the batches
  /// this one would have yielded next.
  [[nodiscard]] std::string state() const;
  /// Continues from a state() of a loader over the same data. Throws std::invalid_argument naming
  /// the field when the state is malformed or does not match this loader (dataset size, batch
  /// size, seed, order, shard).
  void resume(const std::string& state);

  [[nodiscard]] std::uint32_t epoch() const noexcept;
  /// Index of the batch next() returns next.
  [[nodiscard]] std::uint64_t next_batch() const noexcept;
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept;
  /// The order of samples (this rank's shard, per epoch).
  [[nodiscard]] const epoch_order& order() const noexcept;
  [[nodiscard]] const std::vector<field_spec>& fields() const noexcept;
  [[nodiscard]] const loader_options& options() const noexcept;
  [[nodiscard]] device_choice device() const noexcept;
  /// The consumer stream (null on the CPU path).
  [[nodiscard]] cudaStream_t stream() const noexcept;
  [[nodiscard]] std::size_t slots() const noexcept;
  /// A host slot's bytes.
  [[nodiscard]] std::size_t slot_bytes() const noexcept;
  /// A device slot's bytes (0 on the CPU): slot_bytes() and the source's device_only fields.
  [[nodiscard]] std::size_t device_slot_bytes() const noexcept;
  /// Host memory held by the slots allocated so far: slot_bytes() each; all slots() of them unless
  /// prefetch is auto (then as many as prefetch has needed).
  [[nodiscard]] std::size_t host_bytes() const noexcept;
  /// The same on the GPU: device_slot_bytes() each.
  [[nodiscard]] std::size_t device_bytes() const noexcept;
  /// The worker threads that run now (see loader_options::workers).
  [[nodiscard]] std::size_t workers() const noexcept;
  /// The batches produced ahead now (see loader_options::prefetch).
  [[nodiscard]] std::size_t prefetch() const noexcept;

  /// What auto_tune chose, and why.
  struct tuning_report {
    bool workers_auto = false, prefetch_auto = false;
    std::size_t workers = 0, prefetch = 0;            ///< now
    std::size_t workers_most = 0, prefetch_most = 0;  ///< the bounds: TBB's cap, the memory budget
    std::uint64_t windows = 0, changes = 0;           ///< windows judged, changes made
    bool settled = false;                             ///< a window changed nothing
    std::string reason;                               ///< the last window's judgement
    /// One judged window of the tuner's path: what it measured and what it then ran with.
    struct window {
      std::uint64_t index = 0;        ///< 1 for the first window judged
      double seconds = 0;             ///< the window's measured time
      double images_per_s = 0;        ///< samples taken per second in it
      double consumer_wait = 0;       ///< fraction of it the consumer waited, in [0, 1]
      double cpu_utilization = 0;     ///< process CPU time / (time x the place's cores)
      std::size_t workers = 0, prefetch = 0;  ///< after the judgement
      bool changed = false;           ///< the judgement moved workers or prefetch
      std::string reason;             ///< the judgement, in words
    };
    /// The windows judged, oldest first: the first kPathWindows, then only the ones that changed
    /// something (up to as many again), so a long run keeps its path in bounded memory.
    std::vector<window> path;
    static constexpr std::size_t kPathWindows = 256;
    /// One line: "workers 6 (auto, of 15), prefetch 3 (auto, of 8): <reason>".
    [[nodiscard]] std::string to_string() const;
    /// A JSON object of the fields.
    [[nodiscard]] std::string to_json() const;
  };
  /// The settings and, with `with_path`, the tuner's path (up to 512 windows, copied: a caller
  /// polling once per batch leaves it out). Call it from the consumer's thread (the one calling
  /// next()), which the tuner's windows are judged on.
  [[nodiscard]] tuning_report tuning(bool with_path = true) const;

  /// The loader's counters since it began or since the last reset_stats(): batches, samples,
  /// bytes, bad samples, per-stage times and the consumer's wait (stats_snapshot::summary() puts
  /// them on one line). For figures per epoch, read them at an epoch's end and reset:
  ///   for (auto e : loader.epochs(n)) { for (auto& b : loader) {...}
  ///     log(loader.stats().summary()); loader.reset_stats(); }
  [[nodiscard]] stats_snapshot stats() const;
  /// Zeroes the counters (the slots' sizes stay).
  void reset_stats();
  /// The trace recorder, or null when options().trace is false.
  [[nodiscard]] const trace_recorder* trace() const noexcept;
  /// Writes the Chrome trace; throws std::logic_error when tracing is off.
  void write_trace(const std::string& path) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace pinfeed

namespace pinfeed {

/// Settings a loader runs with, as `pinfeed doctor --write-config` writes them and `pinfeed run
/// --config` and the library read them back. The file is one JSON object (docs/config.md):
///   {"schema": "pinfeed.config/1", "workers": 6, "prefetch": 3, "requests_in_flight": 128,
///    "memory_budget": 8589934592, "expected_speedup": 1.42, "measured": "..."}
/// Every field but "schema" may be left out; "workers" and "prefetch" take a positive number or
/// "auto". Unknown fields are refused (a misspelt one would silently do nothing).
struct loader_config {
  std::optional<std::size_t> workers{}, prefetch{};  ///< auto_tune for "auto"
  std::optional<std::uint64_t> memory_budget{};
  std::optional<std::size_t> requests_in_flight{};  ///< remote shards (remote_options)
  /// Where JPEGs are decoded, "host", "device" or "device-inexact" (pinfeed::loaders::pipeline_source_options::decode).
  std::optional<std::string> decode{};
  std::optional<double> expected_speedup{};         ///< what the doctor measured against the settings it started from
  std::string measured{};                           ///< how, in words

  /// Sets the options the config gives.
  void apply_to(loader_options& o) const;
  [[nodiscard]] std::string to_json() const;
  /// Throws std::invalid_argument naming `origin` (a file name), the field and the value.
  [[nodiscard]] static loader_config from_json(const std::string& text, const std::string& origin);
  /// Reads a file; throws std::runtime_error when it cannot be read, std::invalid_argument when
  /// it is malformed.
  [[nodiscard]] static loader_config read(const std::string& path);
  void write(const std::string& path) const;
};

}  // namespace pinfeed
