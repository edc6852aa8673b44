#pragma once
// Every request of a reader (or of an S3 listing), on one thread: a libcurl multi handle runs up
// to `requests_in_flight` transfers at once, each on a keep-alive connection of its own, and
// retries each (classify(), backoff_ms(), up to max_attempts) without holding a thread while it
// waits. Urgent requests (a reader waits for them) start at once, past the cap: there are at most
// as many as reader threads. A request ends in its callback, run on this loop's thread (keep it
// short; it may submit more): the answer, or the error (fatal_error, or `cancelled` once the loop
// stops).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include <curl/curl.h>

#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "remote/http.hpp"

namespace pinfeed::loaders::remote {

/// Thrown when a request is abandoned because its reader is going away.
struct cancelled : pinfeed::runtime_error {
  using pinfeed::runtime_error::runtime_error;
};

/// What a reader's requests have cost (remote_counters' running totals).
struct request_counters {
  std::atomic<std::uint64_t> requests{0}, retries{0}, bytes{0}, wait_ns{0}, read_ahead{0};
  std::atomic<std::uint64_t> shards{0}, streamed{0}, sidecars{0}, index_cached{0};
};

/// Names the calling thread (as top -H and debuggers show it) and, when `batch`, makes it
/// SCHED_BATCH (remote_options::batch_scheduling). Both are hints: a refusal (a seccomp filter,
/// say) leaves the thread as it was.
void tune_thread(const char* name, bool batch) noexcept;

class transfer_loop {
 public:
  using done_fn = std::function<void(response&&, std::exception_ptr)>;

  transfer_loop(const remote_options& o, request_counters& c);
  ~transfer_loop() { shutdown(); }
  transfer_loop(const transfer_loop&) = delete;
  transfer_loop& operator=(const transfer_loop&) = delete;

  /// Queues a request; throws `cancelled` once the loop stops. `done` is never run on the
  /// calling thread.
  void submit(const endpoint& e, const request& q, done_fn done, bool urgent = false);
  std::future<response> submit(const endpoint& e, const request& q, bool urgent = false);
  /// The most requests run at once, urgent ones aside.
  [[nodiscard]] std::size_t cap() const noexcept { return cap_.load(std::memory_order_relaxed); }
  /// From now on, run up to `n` requests at once (1 to kMaxRequestsInFlight).
  void set_cap(std::size_t n);
  /// How long a range request's answer has taken of late, from the start of its transfer (a
  /// moving average; 0 before the first).
  [[nodiscard]] double range_latency_s() const noexcept {
    return static_cast<double>(range_latency_ns_.load(std::memory_order_relaxed)) / 1e9;
  }
  /// Whether requests waited for the cap (queued while it was full) since the last call.
  [[nodiscard]] bool take_held_back() noexcept { return held_back_.exchange(false, std::memory_order_relaxed); }
  /// A range answer's body storage, given back once read, for a later range request's body: a
  /// buffer already grown and paged in, instead of a fresh one per sample. At most
  /// requests_in_flight are kept (the rest are freed), each as large as the samples it held.
  void recycle(std::vector<std::byte> buffer) noexcept;
  /// From now on, requests not yet running (queued, or waiting to retry) end with `error`.
  void fail_queued(std::exception_ptr error);
  /// Ends every request (running ones aborted) with `cancelled`, each callback run before this
  /// returns; later submits throw. Idempotent.
  void shutdown() noexcept;

 private:
  using clock = std::chrono::steady_clock;
  struct job {
    endpoint e;
    request q;
    done_fn done;
    bool urgent = false;
    int attempt = 0;            ///< attempts started
    clock::time_point started;  ///< the last attempt's start
    transfer t;
  };
  using queue = std::deque<std::unique_ptr<job>>;

  void run() noexcept;
  /// Under m_: the next job to start: a due urgent retry, an urgent job, then while there is room
  /// a due retry or a queued job; null when none is due. `all` (a failure, stopping): any job left,
  /// due or not, room or not. Allocates nothing (the jobs move out of their containers), so the
  /// loop thread never fails here.
  std::unique_ptr<job> next_job(clock::time_point now, bool all) noexcept;
  /// How long the loop may sleep in curl_multi_poll: until the next retry is due, 0 when work waits.
  int poll_ms();
  /// Stopping: every request ends with `cancelled`, the running ones first.
  void cancel_all() noexcept;
  void start(std::unique_ptr<job> j) noexcept;
  std::vector<std::byte> body_for(std::uint64_t length);
  void release_handle(CURL* h) noexcept;
  void finish(CURL* h, CURLcode code) noexcept;
  void note_latency(clock::duration took) noexcept;
  static void complete(job& j, std::exception_ptr error) noexcept;

  remote_options o_;
  request_counters& counters_;
  std::minstd_rand jitter_;
  CURLM* multi_ = nullptr;
  std::thread thread_;
  // The loop thread's own.
  std::unordered_map<CURL*, job*> running_;  ///< the jobs running, by their handles (owned)
  std::vector<CURL*> idle_;                  ///< handles to reuse
  std::size_t connections_for_ = 0;          ///< the cap CURLMOPT_MAXCONNECTS was last set for
  // Shared, under m_.
  std::mutex m_;
  queue urgent_, queue_;
  std::multimap<clock::time_point, std::unique_ptr<job>> waiting_;  ///< retries, by due time
  std::exception_ptr failed_;
  bool stopping_ = false;
  std::mutex pool_m_;
  std::vector<std::vector<std::byte>> pool_;  ///< recycled bodies (under pool_m_)
  std::atomic<std::size_t> cap_;
  std::atomic<std::uint64_t> range_latency_ns_{0};  ///< written by the loop thread only
  std::atomic<bool> held_back_{false};
};

}  // namespace pinfeed::loaders::remote
