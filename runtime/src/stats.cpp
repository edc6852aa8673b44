#include "pinfeed/runtime/stats.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pinfeed/runtime/exception.hpp"

#if PINFEED_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#endif

namespace pinfeed {

namespace {
constexpr std::array<std::string_view, kStageCount> kStageNames{
    "produce", "read", "fetch", "decode", "transform", "wait_slot", "copy", "consumer_wait"};
const auto kOrigin = std::chrono::steady_clock::now();
}  // namespace

std::string to_string(stage s) { return std::string(kStageNames[static_cast<std::size_t>(s)]); }

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - kOrigin)
          .count());
}

std::uint32_t thread_id() noexcept {
  static std::atomic<std::uint32_t> next{1};
  thread_local const std::uint32_t id = next.fetch_add(1);
  return id;
}

namespace detail {
#if PINFEED_HAVE_NVTX
void nvtx_push(stage s) noexcept {
  // NVTX binds its entry points lazily without synchronization; bind them once, before any race.
  static const bool initialized = (nvtxInitialize(nullptr), true);
  (void)initialized;
  nvtxRangePushA(kStageNames[static_cast<std::size_t>(s)].data());
}
void nvtx_pop() noexcept { nvtxRangePop(); }
#else  // no NVTX in this toolkit, or no CUDA
void nvtx_push(stage) noexcept {}
void nvtx_pop() noexcept {}
#endif
}  // namespace detail

double stats_snapshot::consumer_wait_fraction() const noexcept {
  if (wall_ns == 0) return 0.0;
  return std::clamp(static_cast<double>((*this)[stage::consumer_wait].total_ns) / wall_ns, 0.0, 1.0);
}
double stats_snapshot::samples_per_s() const noexcept { return wall_ns ? samples * 1e9 / wall_ns : 0.0; }
double stats_snapshot::megabytes_per_s() const noexcept { return wall_ns ? bytes * 1e3 / wall_ns : 0.0; }

std::string stats_snapshot::to_string() const {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line, "%-14s %10s %12s %10s %10s\n", "stage", "count", "total_ms", "mean_ms",
                "max_ms");
  os << line;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto& t = stages[i];
    if (t.count == 0) continue;
    std::snprintf(line, sizeof line, "%-14s %10llu %12.2f %10.3f %10.3f\n", kStageNames[i].data(),
                  static_cast<unsigned long long>(t.count), t.total_ms(), t.mean_ms(), t.max_ns / 1e6);
    os << line;
  }
  os << summary() << '\n';
  return os.str();
}

std::string stats_snapshot::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "batches %llu, samples %llu, errors %llu (bad samples %llu, replaced %llu), wall %.2f s, "
                "%.1f samples/s, %.1f MB/s, consumer wait %.1f%%",
                static_cast<unsigned long long>(batches), static_cast<unsigned long long>(samples),
                static_cast<unsigned long long>(errors), static_cast<unsigned long long>(bad_samples),
                static_cast<unsigned long long>(replaced), wall_ns / 1e9, samples_per_s(), megabytes_per_s(),
                100.0 * consumer_wait_fraction());
  std::string out = line;
  if (decode_warnings > 0) out += ", decode warnings " + std::to_string(decode_warnings);
  return out;
}

void stage_stats::add(stage s, std::uint64_t ns) noexcept {
  auto& c = stages_[static_cast<std::size_t>(s)];
  c.count.fetch_add(1, std::memory_order_relaxed);
  c.total_ns.fetch_add(ns, std::memory_order_relaxed);
  std::uint64_t prev = c.max_ns.load(std::memory_order_relaxed);
  while (prev < ns && !c.max_ns.compare_exchange_weak(prev, ns, std::memory_order_relaxed)) {
  }
}

void stage_stats::add_batch(std::uint64_t samples, std::uint64_t bytes) noexcept {
  batches_.fetch_add(1, std::memory_order_relaxed);
  samples_.fetch_add(samples, std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void stage_stats::reset() noexcept {
  for (auto& c : stages_) {
    c.count.store(0);
    c.total_ns.store(0);
    c.max_ns.store(0);
  }
  batches_.store(0);
  samples_.store(0);
  bytes_.store(0);
  errors_.store(0);
  bad_samples_.store(0);
  replaced_.store(0);
  capture_deferred_.store(0);
  decode_warnings_.store(0);
}

stats_snapshot stage_stats::snapshot() const noexcept {
  stats_snapshot s;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    s.stages[i].count = stages_[i].count.load(std::memory_order_relaxed);
    s.stages[i].total_ns = stages_[i].total_ns.load(std::memory_order_relaxed);
    s.stages[i].max_ns = stages_[i].max_ns.load(std::memory_order_relaxed);
  }
  s.batches = batches_.load(std::memory_order_relaxed);
  s.samples = samples_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.bad_samples = bad_samples_.load(std::memory_order_relaxed);
  s.replaced = replaced_.load(std::memory_order_relaxed);
  s.capture_deferred = capture_deferred_.load(std::memory_order_relaxed);
  s.decode_warnings = decode_warnings_.load(std::memory_order_relaxed);
  return s;
}

trace_recorder::trace_recorder(std::size_t max_events)
    : max_events_(max_events), shards_(new shard[kShards]) {}

void trace_recorder::record(stage s, std::uint64_t start_ns, std::uint64_t dur_ns, std::uint64_t arg) noexcept {
  if (total_.fetch_add(1, std::memory_order_relaxed) >= max_events_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint32_t tid = thread_id();
  auto& sh = shards_[tid % kShards];
  std::lock_guard lock(sh.mutex);
  try {
    sh.events.push_back({start_ns, dur_ns, arg, tid, s});
  } catch (...) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

std::size_t trace_recorder::size() const noexcept {
  return std::min(total_.load(), max_events_);
}

std::string trace_recorder::to_json() const {
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  char buf[256];
  for (std::size_t i = 0; i < kShards; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    for (const auto& e : shards_[i].events) {
      std::snprintf(buf, sizeof buf,
                    "%s{\"name\":\"%s\",\"cat\":\"pinfeed\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,"
                    "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"id\":%llu}}",
                    first ? "" : ",\n", kStageNames[static_cast<std::size_t>(e.what)].data(), e.tid,
                    e.start_ns / 1e3, e.dur_ns / 1e3, static_cast<unsigned long long>(e.arg));
      os << buf;
      first = false;
    }
  }
  os << "]}\n";
  return os.str();
}

void trace_recorder::write(const std::string& path) const {
  detail::write_whole_file(path, to_json(), "cannot write trace file '" + path + "'");
}

}  // namespace pinfeed
