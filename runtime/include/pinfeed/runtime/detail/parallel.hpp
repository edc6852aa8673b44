#pragma once
/// @file parallel.hpp
/// tbb::parallel_for with explicit happens-before edges between the caller and the bodies.
/// TBB already orders them, but through its own (uninstrumented) code; the two atomics make the
/// ordering visible to ThreadSanitizer at the cost of two atomic operations per chunk.

#include <atomic>
#include <cstddef>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

namespace pinfeed::detail {

/// Calls fn(i) for every i in [begin, end) on the current TBB arena; returns when all are done.
/// Exceptions thrown by fn propagate to the caller (TBB cancels the remaining chunks).
///
/// The loop is isolated: while the calling thread waits for it, it runs only this loop's chunks,
/// never an unrelated task of the arena (say, another sample of a loader calling this from its
/// worker), so per-thread scratch of the caller stays untouched until the call returns.
template <class Fn>
void parallel_for(std::size_t begin, std::size_t end, Fn&& fn) {
  std::atomic<std::size_t> edge{0};
  edge.store(1, std::memory_order_release);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(begin, end), [&](const tbb::blocked_range<std::size_t>& r) {
      (void)edge.load(std::memory_order_acquire);
      for (std::size_t i = r.begin(); i != r.end(); ++i) fn(i);
      edge.fetch_add(1, std::memory_order_release);
    });
  });
  (void)edge.load(std::memory_order_acquire);
}

}  // namespace pinfeed::detail
