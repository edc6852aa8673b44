#pragma once
/// @file stats.hpp
/// Per-stage counters, the Chrome-trace recorder and the scoped stage timer that feeds both (and
/// NVTX). Counters are lock-free atomics; tracing is off unless enabled.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace pinfeed {

/// Pipeline stages that are timed.
enum class stage : std::uint8_t {
  produce,        ///< a worker producing one sample (everything a source does)
  read,           ///< reading bytes from storage (sources that read files)
  fetch,          ///< inside read: waiting for a sample's bytes from remote storage
  decode,         ///< decoding an image
  transform,      ///< per-sample transforms
  wait_slot,      ///< the producer waiting for a free slot (the consumer is slower: good)
  copy,           ///< issuing the host-to-device copy of a batch
  consumer_wait,  ///< the consumer blocked in next(): the GPU starves while this grows
  count_
};
inline constexpr std::size_t kStageCount = static_cast<std::size_t>(stage::count_);
[[nodiscard]] std::string to_string(stage s);

/// Totals of one stage.
struct stage_totals {
  std::uint64_t count = 0;
  std::uint64_t total_ns = 0;
  std::uint64_t max_ns = 0;
  [[nodiscard]] double mean_ms() const noexcept { return count ? total_ns / 1e6 / count : 0.0; }
  [[nodiscard]] double total_ms() const noexcept { return total_ns / 1e6; }
};

/// A consistent-enough copy of a loader's counters.
struct stats_snapshot {
  std::array<stage_totals, kStageCount> stages{};
  std::uint64_t batches = 0;    ///< batches handed to the consumer
  std::uint64_t samples = 0;    ///< samples in those batches
  std::uint64_t bytes = 0;      ///< payload bytes in those batches
  std::uint64_t errors = 0;     ///< attempts to produce a sample that failed
  std::uint64_t bad_samples = 0;  ///< distinct samples found bad, counted once per epoch (skip)
  std::uint64_t replaced = 0;   ///< samples served by a stand-in because theirs was bad (skip)
  /// Batch releases and DLPack views' fences that were due while their stream was being captured
  /// into a CUDA graph: recorded after the capture, before the slot's next copy.
  std::uint64_t capture_deferred = 0;
  /// Samples decoded past corrupt data that libjpeg warns of and decodes on (decode_options::strict
  /// off), counted per decode; each is named at log level debug.
  std::uint64_t decode_warnings = 0;
  std::uint64_t wall_ns = 0;    ///< since the consumer first asked for a batch
  std::size_t host_bytes = 0;   ///< host memory of the slot arena
  std::size_t device_bytes = 0; ///< device memory of the slot arena

  [[nodiscard]] const stage_totals& operator[](stage s) const { return stages[static_cast<std::size_t>(s)]; }
  /// Fraction of wall time the consumer spent waiting for data (GPU starvation), in [0, 1].
  [[nodiscard]] double consumer_wait_fraction() const noexcept;
  [[nodiscard]] double samples_per_s() const noexcept;
  [[nodiscard]] double megabytes_per_s() const noexcept;
  /// A human-readable table, one line per stage, then summary().
  [[nodiscard]] std::string to_string() const;
  /// One line: "batches 32, samples 1024, errors 0 (bad samples 0, replaced 0), wall 3.21 s,
  /// 319.0 samples/s, 12.3 MB/s, consumer wait 12.5%", and ", decode warnings N" where N > 0.
  [[nodiscard]] std::string summary() const;
};

/// Thread-safe counters of one loader.
class stage_stats {
 public:
  void add(stage s, std::uint64_t ns) noexcept;
  void add_batch(std::uint64_t samples, std::uint64_t bytes) noexcept;
  void add_error() noexcept { errors_.fetch_add(1, std::memory_order_relaxed); }
  void add_bad_sample() noexcept { bad_samples_.fetch_add(1, std::memory_order_relaxed); }
  void add_replaced() noexcept { replaced_.fetch_add(1, std::memory_order_relaxed); }
  void add_capture_deferred() noexcept { capture_deferred_.fetch_add(1, std::memory_order_relaxed); }
  void add_decode_warning() noexcept { decode_warnings_.fetch_add(1, std::memory_order_relaxed); }
  void reset() noexcept;
  [[nodiscard]] stats_snapshot snapshot() const noexcept;

 private:
  struct alignas(64) counter {
    std::atomic<std::uint64_t> count{0}, total_ns{0}, max_ns{0};
  };
  std::array<counter, kStageCount> stages_{};
  std::atomic<std::uint64_t> batches_{0}, samples_{0}, bytes_{0}, errors_{0}, bad_samples_{0}, replaced_{0},
      capture_deferred_{0}, decode_warnings_{0};
};

/// Records stage spans per thread and writes them as Chrome trace JSON (chrome://tracing, Perfetto).
/// Bounded: at most `max_events` spans are kept, later ones are counted as dropped.
class trace_recorder {
 public:
  explicit trace_recorder(std::size_t max_events = 1u << 20);
  void record(stage s, std::uint64_t start_ns, std::uint64_t dur_ns, std::uint64_t arg = 0) noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] std::size_t dropped() const noexcept { return dropped_.load(); }
  /// The Chrome trace JSON ({"traceEvents": [...]}); ts/dur in microseconds.
  [[nodiscard]] std::string to_json() const;
  /// Writes to_json() to `path`; throws std::runtime_error naming the path on failure.
  void write(const std::string& path) const;

 private:
  struct event {
    std::uint64_t start_ns, dur_ns, arg;
    std::uint32_t tid;
    stage what;
  };
  struct alignas(64) shard {
    mutable std::mutex mutex;
    std::vector<event> events;
  };
  static constexpr std::size_t kShards = 32;
  std::size_t max_events_;
  std::atomic<std::size_t> total_{0}, dropped_{0};
  std::unique_ptr<shard[]> shards_;
};

/// Nanoseconds on the steady clock since an arbitrary process-wide origin.
[[nodiscard]] std::uint64_t now_ns() noexcept;
/// A small dense id for the calling thread (for traces).
[[nodiscard]] std::uint32_t thread_id() noexcept;

namespace detail {
void nvtx_push(stage s) noexcept;
void nvtx_pop() noexcept;
}  // namespace detail

/// Times a scope as `stage`: adds to the counters, to the trace when one is given, and opens an
/// NVTX range for Nsight Systems.
class stage_timer {
 public:
  stage_timer(stage s, stage_stats* stats, trace_recorder* trace, std::uint64_t arg = 0) noexcept
      : stage_(s), stats_(stats), trace_(trace), arg_(arg), start_(now_ns()) {
    detail::nvtx_push(s);
  }
  ~stage_timer() {
    const std::uint64_t end = now_ns();
    detail::nvtx_pop();
    if (stats_ != nullptr) stats_->add(stage_, end - start_);
    if (trace_ != nullptr) trace_->record(stage_, start_, end - start_, arg_);
  }
  stage_timer(const stage_timer&) = delete;
  stage_timer& operator=(const stage_timer&) = delete;

 private:
  stage stage_;
  stage_stats* stats_;
  trace_recorder* trace_;
  std::uint64_t arg_;
  std::uint64_t start_;
};

}  // namespace pinfeed
