#include "remote/task_thread.hpp"

#include "remote/transfer_loop.hpp"

namespace pinfeed::loaders::remote {

task_thread::task_thread(const char* name) : thread_([this, name] { run(name); }) {}

void task_thread::post(std::function<void()> task) {
  {
    std::lock_guard lock(m_);
    if (!closed_) {
      tasks_.push_back(std::move(task));
      cv_.notify_one();
      return;
    }
  }
  try {
    task();
  } catch (...) {
  }
}

void task_thread::shutdown() noexcept {
  {
    std::lock_guard lock(m_);
    if (closed_) return;
    closed_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void task_thread::run(const char* name) noexcept {
  tune_thread(name, false);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return closed_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    try {
      task();
    } catch (...) {
    }
  }
}

}  // namespace pinfeed::loaders::remote
