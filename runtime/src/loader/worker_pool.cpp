#include "worker_pool.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include <oneapi/tbb/global_control.h>

#include "../detail/loader_core.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::detail {

std::size_t tbb_worker_limit() {
  const std::size_t allowed = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return allowed > 1 ? allowed - 1 : 1;
}

std::size_t planned_workers(const node_place& place) {
  return std::max<std::size_t>(1, std::min(tbb_worker_limit(), place.cores));
}

std::size_t effective_workers(std::size_t requested, const node_place& place) {
  const std::size_t limit = tbb_worker_limit();
  if (requested == 0) return planned_workers(place);
  if (requested > limit)
    log(log_level::warn, "loader: " + std::to_string(requested) + " workers asked for, but TBB allows " +
                             std::to_string(limit) + (limit == 1 ? " worker thread" : " worker threads") +
                             " in this process (tbb::global_control::max_allowed_parallelism is " +
                             std::to_string(limit + 1) + "); running " + std::to_string(limit) +
                             ". To run more, hold a tbb::global_control raising it while the loader lives");
  return std::min(requested, limit);
}

bool worker_pool::task_count::begin() noexcept {
  std::lock_guard lock(mutex);
  if (abandoned) return false;
  ++running;
  return true;
}
void worker_pool::task_count::end() noexcept {
  std::lock_guard lock(mutex);
  --running;
  idle.notify_all();
}
void worker_pool::task_count::done() noexcept {
  if (value.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard lock(mutex);
    idle.notify_all();
  }
}

worker_pool::worker_pool(std::size_t most, std::vector<unsigned> cpus, run_fn run)
    : most_(most), cpus_(std::move(cpus)), run_(std::move(run)), arena_(static_cast<int>(most), 0), active_(most) {
  arena_.initialize();
}

void worker_pool::submit(chunk c) {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    c.queued_ns = now_ns();
    queue_.push_back(c);  // throws with nothing queued
    try {
      spawn_runners();
      return;
    } catch (const std::exception& e) {  // TBB could not take a task (memory)
      if (runners_ > 0) return;          // a runner takes the chunk
      queue_.pop_back();
      why = e.what();
    } catch (...) {
      if (runners_ > 0) return;
      queue_.pop_back();
    }
  }
  log_once(warned_submitter_runs_, log_level::warn, [&] {
    return "loader: no worker task could start (" + why + "); the feeder runs chunks itself from now on";
  });
  run_(c);  // noexcept: a failure is the batch's
}

void worker_pool::spawn_runners() {
  // Once TBB failed to take a task (it could not start a thread), its next enqueue can wait
  // forever inside TBB: the pool is not asked again, and queued chunks run on the feeder and the
  // consumer (submit(), help_if_stalled()).
  if (failure_ != nullptr) throw pinfeed::runtime_error(failure_);
  while (runners_ < active_ && starting_ < queue_.size()) enqueue_runner();
}

void worker_pool::enqueue_runner() {
  ++runners_;
  ++starting_;
  tasks_->value.fetch_add(1, std::memory_order_acq_rel);  // release: publishes the queued chunks' slots
  // Until TBB holds the task, a throw (TBB could not take it: memory, or a thread it could not
  // start) gives the counts back, and the pool is not asked again.
  struct undo {
    worker_pool& self;
    bool armed = true;
    ~undo() {
      if (!armed) return;
      --self.runners_;
      --self.starting_;
      self.tasks_->done();
      self.failure_ = "the thread pool refused a task (it could not start a thread): chunks run on the feeder";
    }
  } guard{*this};
  arena_.enqueue([this, count = tasks_] {
    // Pairs with the fetch_add above: TBB orders the hand-off too, but in code ThreadSanitizer
    // cannot see.
    (void)count->value.load(std::memory_order_acquire);
    if (count->begin()) {
      runner();  // noexcept: whatever fails in a chunk is that batch's error
      count->end();
    }
    count->done();  // the last use of the pool by this task
  });
  guard.armed = false;
}

void worker_pool::runner() noexcept {
  // A TBB thread, given back its affinity after. Placement is best effort: without it (no memory
  // for the CPU set) the chunks still run, wherever the thread is.
  std::optional<scoped_cpu_binding> placed;
  try {
    placed.emplace(cpus_);
  } catch (...) {
  }
  std::unique_lock lock(mutex_);
  --starting_;
  // Runs queued chunks until there are none, or more runners than the workers asked for.
  while (!queue_.empty() && runners_ <= active_) {
    const chunk c = queue_.front();
    queue_.pop_front();
    last_pop_ns_ = now_ns();
    lock.unlock();
    run_(c);
    lock.lock();
  }
  --runners_;
}

void worker_pool::help_if_stalled() noexcept {
  // Stalled: chunks wait, and no runner has taken one for 2 s (merely slow workers keep taking
  // them). Then every chunk that has waited that long runs here, in the consumer's thread.
  constexpr std::uint64_t kStallNs = 2'000'000'000;
  for (;;) {
    chunk c{};
    try {
      std::lock_guard lock(mutex_);
      const std::uint64_t now = now_ns();
      if (queue_.empty() || now - queue_.front().queued_ns < kStallNs || now - last_pop_ns_ < kStallNs) return;
      c = queue_.front();
      queue_.pop_front();
    } catch (...) {  // the pool's mutex: try again at the next poll
      return;
    }
    log_once(warned_consumer_helps_, log_level::warn, [] {
      return std::string("loader: no worker took a queued chunk for 2 s (the thread pool could not start its "
                         "threads?); the consumer runs such chunks itself while it waits");
    });
    run_(c);
  }
}

void worker_pool::set_workers(std::size_t n) {
  std::lock_guard lock(mutex_);
  active_ = std::clamp<std::size_t>(n, 1, most_);
  if (failure_ == nullptr) spawn_runners();  // runners beyond it stop after their chunk
}

std::size_t worker_pool::workers() const {
  std::lock_guard lock(mutex_);
  return active_;
}

void worker_pool::quiesce() noexcept {
  bool abandoned = false;
  {
    // A healthy pool runs every task within milliseconds (the chunks do nothing while stopping).
    // Tasks still not begun after a second are given up: TBB may never run them (a worker thread
    // it could not start fails inside TBB, where pinfeed never hears of it), and one that begins
    // later returns at once without touching the pool. The ones inside runner() are waited for.
    std::unique_lock lock(tasks_->mutex);
    const auto all_done = [&] { return tasks_->value.load(std::memory_order_acquire) == 0; };
    if (!tasks_->idle.wait_for(lock, std::chrono::seconds(1), all_done)) {
      tasks_->abandoned = abandoned = true;
      tasks_->idle.wait(lock, [&] { return tasks_->running == 0 || all_done(); });
    }
  }
  if (!abandoned) return;
  std::lock_guard pool(mutex_);
  queue_.clear();  // (their slots are reset by the loader, as a runner would have skipped them)
  runners_ = starting_ = 0;
  try {
    tasks_ = std::make_shared<task_count>();
  } catch (...) {  // no memory for a new count: the pool is not asked again, chunks run on the feeder
    failure_ = "no memory to count the thread pool's tasks: chunks run on the feeder";
  }
}

}  // namespace pinfeed::detail
