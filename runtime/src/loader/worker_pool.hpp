#pragma once
// The loader's worker pool: chunks of a batch's samples wait in a queue, and up to workers()
// runner tasks in a TBB arena of its own take them one by one, so the number of workers that run
// can change at any time (auto_tune) without a task ever being cancelled.
//
// Threads: submit() is called by the feeder, help_if_stalled() by the consumer while it waits,
// set_workers() by the consumer (auto_tune), quiesce() by whoever stops the loader once the feeder
// has been joined; runners are TBB's threads. The queue and the counts are guarded by mutex_; a
// chunk's slot is published to the runner that takes it by that mutex (and by the release
// increment of the task count before the task is handed to TBB).

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <oneapi/tbb/task_arena.h>

namespace pinfeed::detail {

struct node_place;

/// Samples [begin, end) of the batch in `slot`.
struct chunk {
  std::size_t slot, begin, end;
  std::uint64_t queued_ns = 0;  // when submit() queued it
};

/// Worker threads TBB lets one arena have in this process: max_allowed_parallelism less the
/// thread that calls in. Only the application changes the limit (a tbb::global_control it owns).
[[nodiscard]] std::size_t tbb_worker_limit();
/// The workers of auto_tune's ceiling and of workers = 0: the node plan's cores for this loader
/// (node_place::cores), within TBB's cap.
[[nodiscard]] std::size_t planned_workers(const node_place& place);
/// The workers a fixed request runs: 0 as planned_workers(), more than TBB allows capped (with a
/// warning that says how to raise the cap).
[[nodiscard]] std::size_t effective_workers(std::size_t requested, const node_place& place);

class worker_pool {
 public:
  /// Runs one chunk; must not throw (a chunk's failure is its batch's).
  using run_fn = std::function<void(const chunk&)>;
  /// A pool of up to `most` workers (all of them running at first), whose threads run on `cpus`
  /// (anywhere when empty). Throws what tbb::task_arena::initialize() throws.
  worker_pool(std::size_t most, std::vector<unsigned> cpus, run_fn run);
  ~worker_pool() { quiesce(); }
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  /// Queues `c` for a runner. When no runner task can start (TBB refused one: memory, or a thread
  /// it could not start) the chunk runs here, on the caller's thread, and so do all later ones.
  /// Throws std::bad_alloc with nothing queued.
  void submit(chunk c);
  /// Runs, on the caller's thread, every chunk that has waited 2 s while no runner took one for
  /// 2 s (a pool whose threads never started). For the consumer's waits.
  void help_if_stalled() noexcept;
  /// Workers from now on: n within [1, most()]. Runners beyond it stop after their chunk.
  void set_workers(std::size_t n);
  [[nodiscard]] std::size_t workers() const;
  [[nodiscard]] std::size_t most() const noexcept { return most_; }
  /// Waits until no task runs a chunk: every queued task has run (the chunks of a stopping loader
  /// return at once), or, for tasks TBB has not begun within a second, until those that have
  /// begun are done; the others are given up (they return without touching the pool's owner) and
  /// the queue is cleared. Call once nothing submits any more.
  void quiesce() noexcept;

 private:
  /// Counts queued and running tasks. Shared with every task, so a worker that finishes the last
  /// task can still notify after quiesce() has seen the count reach zero and returned.
  struct task_count {
    std::atomic<std::int64_t> value{0};
    std::mutex mutex;
    std::condition_variable idle;
    std::int64_t running = 0;  // (mutex) tasks inside runner()
    bool abandoned = false;    // (mutex) set by quiesce(): tasks not begun yet never touch the pool
    bool begin() noexcept;
    void end() noexcept;
    void done() noexcept;
  };
  void spawn_runners();   // with mutex_ held
  void enqueue_runner();  // one more runner task; with mutex_ held
  void runner() noexcept;

  const std::size_t most_;
  const std::vector<unsigned> cpus_;
  const run_fn run_;
  tbb::task_arena arena_;
  mutable std::mutex mutex_;
  std::deque<chunk> queue_;                // (mutex_)
  std::size_t active_, runners_ = 0, starting_ = 0;  // (mutex_) workers asked for, tasks alive, tasks not begun
  std::uint64_t last_pop_ns_ = 0;          // (mutex_) when a runner last took a chunk
  /// (mutex_) Set once TBB refused a task, or its count could not be made: the pool is not asked
  /// again (spawn_runners). A fixed text: set where memory may have run out.
  const char* failure_ = nullptr;
  std::shared_ptr<task_count> tasks_ = std::make_shared<task_count>();
  // The warnings given once a pool: the feeder running chunks itself, the consumer helping.
  std::atomic<bool> warned_submitter_runs_{false}, warned_consumer_helps_{false};
};

}  // namespace pinfeed::detail
