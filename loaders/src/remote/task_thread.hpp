#pragma once
// One thread running posted tasks in order: for what must not hold up the transfer loop (a shard
// written to the cache directory). Not a TBB task: a loader's workers are TBB threads that may all
// be waiting for the very shard such a task files, and would never run it.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace pinfeed::loaders::remote {

class task_thread {
 public:
  /// `name`: the thread's name (top -H), a string literal.
  explicit task_thread(const char* name);
  ~task_thread() { shutdown(); }
  task_thread(const task_thread&) = delete;
  task_thread& operator=(const task_thread&) = delete;
  /// Queues `task`; after shutdown() it runs on the calling thread instead. A task's exception
  /// is dropped: tasks report their own failures.
  void post(std::function<void()> task);
  /// Runs what is queued, then joins. Idempotent.
  void shutdown() noexcept;

 private:
  void run(const char* name) noexcept;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool closed_ = false;
  std::thread thread_;  ///< last: it starts once the members above exist
};

}  // namespace pinfeed::loaders::remote
