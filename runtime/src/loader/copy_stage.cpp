// The copy stage: a filled slot goes to the device on the loader's copy stream, after every use
// of its previous batch there has finished (the consumer's release event, a release_after()
// event, DLPack views' fences), and its copy event lets the feeder refill the host slot. Without
// a GPU, or for a failed batch, the slot is published as it is.
#include <cassert>
#include <chrono>
#include <thread>

#include "loader_impl.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

using detail::slot_state;

namespace detail {

void loader_core::drain(cudaStream_t stream) { wait_for_stream(stream, drain_event.get()); }

void loader_core::release_after(std::size_t slot, cudaStream_t stream) {
  if (!dev.is_cuda()) return;
  device_guard guard(dev.index);
  auto& m = meta[slot];
  const named_stream named = name_stream(stream);
  m.after_recorded = false;
  m.after_recorded = record_after(m.after_event.get(), named);
  if (!m.after_recorded) defer_fence(slot, named);
}

namespace {
/// Records a fence of slot meta `m` after the work queued so far on `stream` (fence_mutex held),
/// from a spare event or a new one: true, and the next copy waits on it; false, nothing recorded,
/// while the stream is being captured (record_after).
bool fence_locked(slot_meta& m, const named_stream& stream) {
  cuda_event fence;
  if (m.spare_fences.empty()) {
    fence = cuda_event::create(cudaEventDisableTiming);
  } else {
    fence = std::move(m.spare_fences.back());
    m.spare_fences.pop_back();
  }
  bool recorded = false;
  try {
    recorded = record_after(fence.get(), stream);
  } catch (...) {
    m.spare_fences.push_back(std::move(fence));
    throw;
  }
  (recorded ? m.fences : m.spare_fences).push_back(std::move(fence));
  return recorded;
}
}  // namespace

void loader_core::pend_locked(slot_meta& m, const named_stream& stream) {
  m.pending.push_back(stream);
  pending_fences.fetch_add(1, std::memory_order_relaxed);
  stats.add_capture_deferred();
}

bool loader_core::settle_pending(slot_meta& m) {
  for (std::size_t i = 0; i < m.pending.size();) {
    if (!fence_locked(m, m.pending[i])) {  // still being captured
      ++i;
      continue;
    }
    m.pending.erase(m.pending.begin() + static_cast<std::ptrdiff_t>(i));
    pending_fences.fetch_sub(1, std::memory_order_relaxed);
  }
  return m.pending.empty();
}

void loader_core::defer_fence(std::size_t slot, const named_stream& stream) {
  auto& m = meta[slot];
  std::lock_guard lock(m.fence_mutex);
  pend_locked(m, stream);
}

void loader_core::record_pending() {
  if (pending_fences.load(std::memory_order_relaxed) == 0 || !dev.is_cuda()) return;
  device_guard guard(dev.index);
  for (std::size_t s = 0; s < ring.size(); ++s) {
    std::lock_guard lock(meta[s].fence_mutex);
    (void)settle_pending(meta[s]);  // what is still being captured: the slot's next copy sees to it
  }
}

void loader_core::fence_after(std::size_t slot, const named_stream& stream) {
  if (!dev.is_cuda()) return;
  device_guard guard(dev.index);
  auto& m = meta[slot];
  std::lock_guard lock(m.fence_mutex);
  if (!fence_locked(m, stream)) pend_locked(m, stream);  // recorded later (record_pending, wait_fences)
}

void loader_core::wait_fences(std::size_t slot, cudaStream_t stream, const std::atomic<bool>& stopping) {
  auto& m = meta[slot];
  // Streams that were being captured when their fence was due get it once their capture has ended
  // (it then follows the work queued before the capture, and the graph's launches since): polled,
  // the lock let go between tries so that deleters on other threads go on meanwhile.
  for (;;) {
    {
      std::lock_guard lock(m.fence_mutex);
      if (settle_pending(m)) {
        while (!m.fences.empty()) {
          PINFEED_CUDA_TRY(cudaStreamWaitEvent(stream, m.fences.back().get(), 0));
          m.spare_fences.push_back(std::move(m.fences.back()));
          m.fences.pop_back();
        }
        return;
      }
    }
    if (stopping.load(std::memory_order_acquire))  // what is pending stays for release_cuda()
      throw loader_closed("loader closed while a copy waited for a graph capture of a reader stream to end");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void loader_core::release_slot(std::size_t slot) noexcept {
  assert(ring.state(slot) == slot_state::in_use);  // the lease's last owner, once
  if (dev.is_cuda()) {
    try {
      device_guard guard(dev.index);
      // On whichever thread drops the last lease: the consumer stream as the taking thread named it.
      auto& m = meta[slot];
      m.release_recorded = false;  // a record that throws leaves no stale event to wait on
      m.release_recorded = record_after(m.release_event.get(), m.consumer);
      if (!m.release_recorded) defer_fence(slot, m.consumer);
    } catch (const std::exception& e) {
      log(log_level::error, std::string("releasing a batch slot: ") + e.what());
    }
  }
  ring.release(slot);
}

}  // namespace detail

namespace {
/// The source's work on a whole batch (source::finish_batch: a batch op), on the host slot of a
/// batch that has not failed; a throw fails it. False for a failed batch.
bool finish_batch(detail::loader_core& c, source& src, std::size_t slot) noexcept {
  auto& m = c.meta[slot];
  if (m.error) return false;
  try {
    auto& hooks = pinfeed::detail::thread_scratch<detail::loader_core::hook_view, struct finish_hooks>();
    c.view_slot(slot, hooks);
    src.finish_batch(hooks.view);
    return true;
  } catch (...) {
    std::lock_guard lock(m.error_mutex);
    m.error = std::current_exception();
    m.error_index = m.indices[0];
    return false;
  }
}
}  // namespace

void loader::impl::finish_slot(std::size_t slot) noexcept {
  auto& c = *core;
  if (stopping.load(std::memory_order_acquire)) return;  // cancel() resets the slot
  auto& m = c.meta[slot];
  assert(m.remaining.load(std::memory_order_acquire) == 0);  // the last chunk's thread, or the feeder
  c.ring.advance(slot, slot_state::filling, slot_state::filled);
  if (!finish_batch(c, *src, slot) || !c.dev.is_cuda()) {
    c.ring.publish(slot, slot_state::filled);
    return;
  }
  c.ring.advance(slot, slot_state::filled, slot_state::copying);
  try {
    stage_timer t(stage::copy, &c.stats, c.trace.get(), m.batch);
    device_guard guard(c.dev.index);
    const detail::relaxed_capture_scope relaxed(true);  // beside a user's capture in global mode
    // The device slot may still be read by consumer work queued before its last release.
    if (m.release_recorded) PINFEED_CUDA_TRY(cudaStreamWaitEvent(c.copy_stream.get(), m.release_event.get(), 0));
    if (m.after_recorded) {  // work the consumer queued on its own stream before release_after()
      PINFEED_CUDA_TRY(cudaStreamWaitEvent(c.copy_stream.get(), m.after_event.get(), 0));
      m.after_recorded = false;
    }
    c.wait_fences(slot, c.copy_stream.get(), stopping);  // work on DLPack views' own streams up to their deleters
    detail::loader_core::hook_view hooks;
    c.view_slot(slot, hooks);
    src->before_copy(hooks.view);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(c.device_slot(slot), c.host_slot(slot), c.used_bytes(m.count),
                                     cudaMemcpyHostToDevice, c.copy_stream.get()));
    for (std::size_t f = 0; f < c.fields.size(); ++f)  // each arena's used part
      if (const std::size_t bytes = c.arena_bytes(slot, f); bytes > 0)
        PINFEED_CUDA_TRY(cudaMemcpyAsync(c.device_slot(slot) + c.arena_offset[f], c.host_slot(slot) + c.arena_offset[f],
                                         bytes, cudaMemcpyHostToDevice, c.copy_stream.get()));
    // The copy event is recorded even when the hook throws: the queued copy still reads the host
    // slot, which must not be refilled before it has (the feeder waits for this event).
    std::exception_ptr hook_failure;
    try {
      src->after_copy(hooks.view);  // the source's device work, before the copy event and the user's hook
    } catch (...) {
      hook_failure = std::current_exception();
    }
    if (c.options.after_copy && !hook_failure) {
      try {
        c.options.after_copy(c.copied_bytes(slot), c.copy_stream.get());
      } catch (const std::exception&) {  // (a std::bad_alloc included) reaches next() as thrown
        hook_failure = std::current_exception();
      } catch (...) {
        hook_failure = std::make_exception_ptr(pinfeed::runtime_error(
            "loader: the after_copy hook threw an exception that is not a std::exception (batch " +
            std::to_string(m.batch) + ")"));
      }
    }
    PINFEED_CUDA_TRY(cudaEventRecord(m.copy_event.get(), c.copy_stream.get()));
    m.copy_recorded = true;
    if (hook_failure) std::rethrow_exception(hook_failure);
  } catch (...) {
    std::lock_guard lock(m.error_mutex);
    m.error = std::current_exception();
    m.error_index = m.indices[0];
  }
  c.ring.publish(slot, slot_state::copying);
}

}  // namespace pinfeed
