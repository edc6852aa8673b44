// The feeder thread fills the slots in order: it takes a free slot for each batch, sets the
// batch's indices, and hands its samples to the worker pool in chunks. A chunk produces its
// samples into the slot and keeps the first failure; the last chunk of a slot finishes it
// (copy_stage.cpp).
#include <algorithm>
#include <cassert>

#include "loader_impl.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed {

using detail::slot_state;

void loader::impl::feed(std::uint32_t e, std::uint64_t first_batch, std::uint64_t base) noexcept {
  try {
    feed_batches(e, first_batch, base);
  } catch (...) {
    // Outside any one batch (the thread's placement, waiting for a slot): the consumer's next()
    // throws it and stops the loader; the following next() starts again at the batch it lacks.
    {
      std::lock_guard lock(feeder_mutex);
      feeder_error = std::current_exception();
    }
    core->ring.close();
  }
}

void loader::impl::feed_batches(std::uint32_t e, std::uint64_t first_batch, std::uint64_t base) {
  const scoped_cpu_binding placed(place.cpus);
  auto& c = *core;
  // This thread waits on the loader's events: it works on the loader's device, so that a CUDA call
  // here never creates a context on device 0 (a rank on GPU 3 of a multi-GPU job). If the device
  // cannot be made current, every batch carries that failure to the consumer.
  std::optional<device_guard> on_device;
  std::exception_ptr device_failure;
  // Its waits on copy events must neither fail nor break a user's graph capture in global mode.
  const detail::relaxed_capture_scope relaxed(c.dev.is_cuda());
  if (c.dev.is_cuda()) {
    try {
      on_device.emplace(c.dev.index);
    } catch (...) {
      device_failure = std::current_exception();
    }
  }
  for (std::uint64_t b = first_batch; b < batches; ++b) {
    if (stopping.load(std::memory_order_acquire)) return;
    std::optional<std::size_t> slot;
    std::exception_ptr failure = device_failure;
    {
      stage_timer t(stage::wait_slot, &c.stats, c.trace.get(), b);
      slot = c.ring.acquire(base + b);
      if (!slot) return;
      auto& m = c.meta[*slot];
      // The host slot is rewritten only once its previous copy has completed.
      if (c.dev.is_cuda() && m.copy_recorded && !failure) {
        try {
          PINFEED_CUDA_TRY(cudaEventSynchronize(m.copy_event.get()));
        } catch (...) {
          failure = std::current_exception();
        }
      }
    }
    fill_slot(*slot, e, b, failure);
  }
}

void loader::impl::fill_slot(std::size_t slot, std::uint32_t e, std::uint64_t b, std::exception_ptr failure) {
  auto& c = *core;
  assert(c.ring.state(slot) == slot_state::filling);  // acquire() gave it to this thread alone
  const std::size_t B = c.options.batch_size;
  auto& m = c.meta[slot];
  m.epoch = e;
  m.batch = b;
  m.count = static_cast<std::size_t>(std::min<std::uint64_t>(B, order->size(e) - b * B));
  m.error_count = 0;
  try {
    for (std::size_t j = 0; j < m.count; ++j) m.indices[j] = order->index_at(e, b * B + j);
  } catch (...) {  // the batch fails with it, and no sample of it runs
    m.error = std::current_exception();
    m.error_index = 0;
    m.remaining.store(0, std::memory_order_release);
    finish_slot(slot);
    return;
  }
  m.error = failure;
  m.error_index = failure ? m.indices[0] : 0;
  c.reset_arenas(slot);
  const std::size_t chunks = std::min(m.count, pool->most() * 4);
  m.remaining.store(chunks, std::memory_order_release);
  for (std::size_t k = 0; k < chunks; ++k) {
    const detail::chunk piece{slot, m.count * k / chunks, m.count * (k + 1) / chunks};
    try {
      pool->submit(piece);
    } catch (...) {  // not queued (memory): the batch fails with it; its chunks not sent never run
      record_error(m, std::current_exception(), m.indices[piece.begin]);
      const std::size_t unsent = chunks - k;
      if (m.remaining.fetch_sub(unsent, std::memory_order_acq_rel) == unsent) finish_slot(slot);
      break;
    }
  }
}

void loader::impl::run_chunk(const detail::chunk& piece) noexcept {
  auto& m = core->meta[piece.slot];
  try {
    produce_chunk(piece.slot, piece.begin, piece.end);
  } catch (...) {  // outside a sample (its buffers' list, say): the batch fails with it
    record_error(m, std::current_exception(), m.indices[piece.begin]);
  }
  if (m.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_slot(piece.slot);
}

void loader::impl::record_error(detail::slot_meta& m, std::exception_ptr err, std::uint64_t index) noexcept {
  std::lock_guard lock(m.error_mutex);
  ++m.error_count;
  if (!m.error || index < m.error_index) {
    m.error = std::move(err);
    m.error_index = index;
  }
}

void loader::impl::produce_chunk(std::size_t slot, std::size_t begin, std::size_t end) {
  auto& c = *core;
  auto& m = c.meta[slot];
  if (stopping.load(std::memory_order_acquire)) return;
  // Per chunk, not thread_local: a user source may wait inside TBB without isolation, and the
  // thread can then run another chunk while this one's sample still points into its buffers.
  std::vector<std::byte*> buffers(c.fields.size());
  std::byte* base = c.host_slot(slot);
  for (std::size_t j = begin; j < end; ++j) {
    for (std::size_t f = 0; f < c.fields.size(); ++f)
      buffers[f] = c.fields[f].variable || c.fields[f].device_only ? nullptr : base + c.field_offset[f] + j * c.fields[f].bytes();
    sample s(m.indices[j], m.epoch, c.options.seed, c.fields, buffers, &c.stats, c.trace.get());
    detail::sample_access::place(s, &*order, m.batch * c.options.batch_size + j, pass);
    detail::sample_access::lend(s, m.arenas.data(), j);
    std::exception_ptr err;
    try {
      stage_timer t(stage::produce, &c.stats, c.trace.get(), s.index());
      src->produce(s);
    } catch (const sample_error&) {
      err = std::current_exception();
    } catch (const fatal_error&) {  // not the sample's fault: reaches the consumer as it is
      err = std::current_exception();
    } catch (const std::bad_alloc&) {
      err = std::current_exception();
    } catch (const std::exception& ex) {
      err = std::make_exception_ptr(sample_error(s.index(), "produce", s.origin(), ex.what()));
    } catch (...) {
      err = std::make_exception_ptr(sample_error(s.index(), "produce", s.origin(), "unknown exception"));
    }
    if (err) {
      c.stats.add_error();
      record_error(m, std::move(err), s.index());
    }
  }
}

}  // namespace pinfeed
