#pragma once
// Internal (not installed): per-thread scratch objects (buffers, decoder handles) without C++
// thread_local destructors.
//
// A thread_local object with a destructor is registered with glibc the first time a thread uses
// it (__cxa_thread_atexit_impl), and that registration allocates: when the allocation fails glibc
// ends the process ("failed to register TLS destructor: out of memory") instead of reporting it.
// thread_scratch<T, Tag>() gives each thread its own T from a per-thread table, created with
// `new` (a failure is a std::bad_alloc at the call, as any allocation) and destroyed when the
// thread exits (a pthread key's destructor); the only thread_local is a plain pointer.

#include <cstddef>
#include <memory>
#include <vector>

namespace pinfeed::detail {

/// A new slot number for thread_scratch (at most 32 kinds in a process: more throw logic_error).
[[nodiscard]] std::size_t new_thread_scratch_slot();
/// This thread's object in `slot`, made by `make` on first use (throws what `make` throws, or
/// std::bad_alloc for this thread's table), destroyed by `destroy` when the thread exits.
[[nodiscard]] void* thread_scratch_object(std::size_t slot, void* (*make)(), void (*destroy)(void*) noexcept);

/// This thread's T of kind `Tag` (one per (T, Tag) a thread), default-constructed on first use.
template <class T, class Tag>
T& thread_scratch() {
  static const std::size_t slot = new_thread_scratch_slot();
  thread_local T* mine = nullptr;  // trivially destructible: nothing registered with glibc
  if (mine == nullptr) {
    mine = static_cast<T*>(thread_scratch_object(
        slot, []() -> void* { return new T(); }, [](void* p) noexcept { delete static_cast<T*>(p); }));
  }
  return *mine;
}

/// This thread's T of kind `Tag` for the nesting level it is taken at, held for a scope: for code
/// that may run inside itself on one thread (a loaders::pipeline_source over another one produces
/// the inner sample inside the outer one's produce), where one thread_scratch would hand the outer
/// level's buffers to the inner one.
template <class T, class Tag>
class scratch_level {
 public:
  scratch_level() : levels_(thread_scratch<levels, Tag>()) {
    if (levels_.of.size() <= levels_.depth) levels_.of.resize(levels_.depth + 1);
    std::unique_ptr<T>& mine = levels_.of[levels_.depth];
    if (!mine) mine = std::make_unique<T>();
    t_ = mine.get();  // stays where it is when a deeper level grows `of`
    ++levels_.depth;
  }
  ~scratch_level() { --levels_.depth; }
  scratch_level(const scratch_level&) = delete;
  scratch_level& operator=(const scratch_level&) = delete;
  [[nodiscard]] T& get() const noexcept { return *t_; }

 private:
  struct levels {
    std::vector<std::unique_ptr<T>> of;
    std::size_t depth = 0;
  };
  levels& levels_;
  T* t_ = nullptr;
};

}  // namespace pinfeed::detail
