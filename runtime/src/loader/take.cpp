// The consumer's take: next() waits for the slot of the batch it needs (helping a stalled
// pool meanwhile), and the batch it returns holds that slot through a lease until its last owner
// (the batch or a DLPack view) lets it go.
#include "loader_impl.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

std::optional<batch> loader::impl::next() {
  if (!started) start(epoch, next_batch);
  if (next_batch >= batches) return std::nullopt;
  auto& c = *core;
  check_held();
  std::uint64_t expected = 0;
  c.first_take_ns.compare_exchange_strong(expected, now_ns());
  std::optional<std::size_t> slot;
  // Allocated before a slot is taken: once taken, nothing may fail before the lease holds it.
  auto lease = std::make_shared<detail::slot_lease>(core, detail::slot_lease::kNone);
  const std::uint64_t wait_from = now_ns();
  {
    stage_timer t(stage::consumer_wait, &c.stats, c.trace.get(), next_batch);
    slot = c.ring.take(seq_base + next_batch, std::chrono::milliseconds(100), [&] {
      pool->help_if_stalled();
      if (c.options.interrupt) c.options.interrupt();  // may throw: nothing is taken yet
    });
  }
  positioned = false;  // (an interrupt above leaves the position as it was)
  if (!slot) {
    std::exception_ptr failed;
    {
      std::lock_guard lock(feeder_mutex);
      failed = feeder_error;
    }
    if (failed) {
      cancel();  // the next call starts again at this batch
      std::rethrow_exception(failed);
    }
    throw loader_closed("loader was closed while waiting for batch " + std::to_string(next_batch));
  }
  lease->slot = *slot;
  ++next_batch;
  if (tuner) count_take(*slot, wait_from);
  auto& m = c.meta[*slot];
  if (m.error) {
    const std::exception_ptr err = m.error;
    lease.reset();  // the failed batch is dropped; its slot goes back to the ring
    std::rethrow_exception(err);
  }
  if (c.dev.is_cuda()) {
    device_guard guard(c.dev.index);
    // The consumer stream as this thread names it (cudaStreamPerThread: this thread's), for the
    // release on whichever thread drops the batch; inside a capture of it, the host waits instead.
    m.consumer = detail::name_stream(c.consumer_stream);
    c.consumer_thread.store(m.consumer.thread, std::memory_order_relaxed);
    detail::wait_for_event(m.consumer, m.copy_event.get());
    c.record_pending();  // fences deferred past a capture that has ended since
  }
  c.stats.add_batch(m.count, c.copied_bytes(*slot));
  return batch(std::move(lease));
}

void loader::impl::check_held() const {
  // The ring has prefetch + max_batches_in_use usable slots. While the consumer holds at most
  // max_batches_in_use of them, at least prefetch (>= 1) are left to fill, so the batch asked for
  // comes; holding every slot would make next() wait forever. Past the limit it is refused at once.
  const std::size_t held = core->ring.count(detail::slot_state::in_use);
  const std::size_t most = core->options.max_batches_in_use;
  if (held <= most) return;
  const std::size_t pf = core->ring.usable() - most;
  throw batches_held_error(
      held, most,
      "loader::next(): the consumer holds " + std::to_string(held) + " batches (batch objects, or DLPack views of " +
          "released ones) and loader_options::max_batches_in_use is " + std::to_string(most) + " (prefetch " +
          std::to_string(pf) + ", " + std::to_string(core->ring.usable()) + " slots): with more held, the loader " +
          "could run out of slots to fill and next() would wait forever. Release a batch before asking for the " +
          "next (batch::release(), or let it go out of scope), or set max_batches_in_use to the most batches you " +
          "keep at a call of next() (each adds a slot of " + format_bytes(core->host_slot_bytes) +
          (core->dev.is_cuda() ? " and one of " + format_bytes(core->slot_bytes) + " on the GPU" : std::string()) + ")");
}

}  // namespace pinfeed
