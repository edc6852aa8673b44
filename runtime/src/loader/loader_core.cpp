// A loader's slots: their host (pinned with a GPU) and device memory, allocated as prefetch
// grows, and the CUDA streams and events of the loader, given back in order at the end.
#include <algorithm>
#include <chrono>
#include <thread>

#include "../detail/loader_core.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed::detail {

loader_core::loader_core(const loader_options& o, std::vector<field_spec> f, device_choice d, slot_plan plan,
                         std::optional<unsigned> numa)
    : options(o),
      fields(std::move(f)),
      field_offset(std::move(plan.field_offset)),
      arena_offset(std::move(plan.arena_offset)),
      slot_bytes(plan.slot_bytes),
      host_slot_bytes(plan.host_slot_bytes),
      options_used(std::move(plan.options_used)),
      dev(d),
      numa_node(numa),
      ring(plan.prefetch_most + o.max_batches_in_use),
      host(ring.size()),
      device(ring.size()) {
  const std::size_t slots = ring.size();
  meta.reset(new slot_meta[slots]);
  for (std::size_t s = 0; s < slots; ++s) {
    meta[s].indices.resize(o.batch_size);
    meta[s].arena_used.reset(new std::atomic<std::uint64_t>[fields.size()]());
    meta[s].arenas.resize(fields.size());
  }
  if (o.trace) trace = std::make_unique<trace_recorder>(o.trace_max_events);
  if (!dev.is_cuda()) {
    allocate_slots(plan.prefetch + o.max_batches_in_use);
    return;
  }
  device_guard guard(dev.index);
  try {
    allocate_slots(plan.prefetch + o.max_batches_in_use);
    copy_stream = cuda_stream::create();
    if (o.stream) {
      consumer_stream = *o.stream;
    } else {
      own_consumer_stream = cuda_stream::create();
      consumer_stream = own_consumer_stream.get();
    }
    // The feeder and the destructor wait on these: blocking sync (the default), so a waiting
    // thread sleeps.
    drain_event = cuda_event::create();
    for (std::size_t s = 0; s < slots; ++s) {
      meta[s].copy_event = cuda_event::create();
      meta[s].release_event = cuda_event::create(cudaEventDisableTiming);
      meta[s].after_event = cuda_event::create();
    }
  } catch (...) {
    release_cuda();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void loader_core::allocate_slots(std::size_t n) {
  n = std::min(n, ring.size());
  std::size_t s = allocated();
  if (s >= n) return;
  auto allocation_failed = [&](std::size_t bytes, const std::string& where, const std::exception& e) {
    throw pinfeed::runtime_error("loader: allocating " + std::to_string(bytes) + " bytes of " + where + " for slot " +
                             std::to_string(s) + " of " + std::to_string(ring.size()) + " failed (" + options_used +
                             "): " + e.what());
  };
  std::optional<device_guard> guard;
  if (dev.is_cuda()) guard.emplace(dev.index);
  const relaxed_capture_scope relaxed(dev.is_cuda());  // next() may run beside (or inside) a user's capture
  for (; s < n; ++s) {
    try {
      host[s] = host_buffer(host_slot_bytes, /*pinned=*/dev.is_cuda(), numa_node);
    } catch (const std::exception& e) {
      allocation_failed(host_slot_bytes, dev.is_cuda() ? "pinned host memory" : "host memory", e);
    }
    if (dev.is_cuda()) {
      try {
        device[s] = device_buffer(slot_bytes);
      } catch (const std::exception& e) {
        allocation_failed(slot_bytes, "memory on " + dev.to_string(), e);
      }
    }
    allocated_.store(s + 1, std::memory_order_release);
  }
}

void loader_core::fence_teardown(const named_stream& s, const char* what,
                                 std::chrono::steady_clock::time_point until) noexcept {
  try {
    if (drain_event.get() == nullptr) {  // no event to record (its creation failed): the stream itself
      if (!stream_capturing(stream_here(s))) PINFEED_CUDA_TRY(cudaStreamSynchronize(stream_here(s)));
      return;
    }
    // A capture that has not ended yet: waited for until `until` (nothing hangs on teardown).
    while (!record_after(drain_event.get(), s)) {
      if (std::chrono::steady_clock::now() >= until) {
        log(log_level::error, std::string("loader teardown: ") + what + " is still being captured into a CUDA graph; "
                              "the slots are freed without waiting for the work queued on it before the capture");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    PINFEED_CUDA_TRY(cudaEventSynchronize(drain_event.get()));
  } catch (const std::exception& e) {
    log(log_level::error, std::string("loader teardown, waiting for ") + what + ": " + e.what());
  }
}

void loader_core::release_cuda() noexcept {
  if (!dev.is_cuda()) return;
  std::optional<device_guard> on_device;  // the caller's device back afterwards (if it had one)
  try {
    on_device.emplace(dev.index);
  } catch (const std::exception& e) {
    log(log_level::error, std::string("loader teardown: ") + e.what());
  }
  // Copies and consumer work may still read or write the slots: finish them before freeing. The
  // consumer stream as the thread that took batches last named it; the streams whose fences waited
  // for a capture to end, once it has (fence_teardown: 10 s for all of them together). In relaxed
  // capture mode: a user's thread may be capturing beside this one.
  const relaxed_capture_scope relaxed(true);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  if (copy_stream.get() != nullptr) wait_for_stream_nothrow(copy_stream.get(), drain_event.get());
  if (consumer_stream != nullptr)
    fence_teardown({consumer_stream, consumer_thread.load(std::memory_order_relaxed)}, "the consumer stream", until);
  for (std::size_t s = 0; s < ring.size(); ++s) {
    if (meta[s].after_recorded) PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(meta[s].after_event.get()));
    std::vector<named_stream> pending;
    {  // work of DLPack views on their own streams may still read the slot
      std::lock_guard lock(meta[s].fence_mutex);
      for (const auto& f : meta[s].fences) PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(f.get()));
      meta[s].fences.clear();
      meta[s].spare_fences.clear();
      pending.swap(meta[s].pending);
    }
    for (const auto& p : pending) fence_teardown(p, "a stream whose fence waited for its graph capture", until);
    meta[s].copy_event.reset();
    meta[s].release_event.reset();
    meta[s].after_event.reset();
  }
  drain_event.reset();
  copy_stream.reset();
  own_consumer_stream.reset();
  consumer_stream = nullptr;
  for (auto& h : host) h = host_buffer();
  for (auto& d : device) d = device_buffer();
}

std::size_t loader_core::used_bytes(std::size_t n) const {
  std::size_t end = 0;
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (!fields[i].device_only) end = std::max(end, field_offset[i] + (fields[i].variable ? 16 : fields[i].bytes()) * n);
  return end;
}

std::size_t loader_core::arena_bytes(std::size_t s, std::size_t f) const {
  if (!fields[f].variable) return 0;
  const std::uint64_t capacity = fields[f].elements() * options.batch_size;
  const std::uint64_t used = std::min(meta[s].arena_used[f].load(std::memory_order_relaxed), capacity);
  return static_cast<std::size_t>(used) * dtype_size(fields[f].type);
}

std::size_t loader_core::copied_bytes(std::size_t s) const {
  std::size_t bytes = used_bytes(meta[s].count);
  for (std::size_t f = 0; f < fields.size(); ++f) bytes += arena_bytes(s, f);
  return bytes;
}

void loader_core::reset_arenas(std::size_t s) {
  auto& m = meta[s];
  for (std::size_t f = 0; f < fields.size(); ++f) {
    if (!fields[f].variable) continue;
    auto* extents = reinterpret_cast<std::uint64_t*>(host_slot(s) + field_offset[f]);
    std::fill(extents, extents + 2 * options.batch_size, std::uint64_t{0});
    m.arena_used[f].store(0, std::memory_order_relaxed);
    m.arenas[f] = field_arena{host_slot(s) + arena_offset[f], fields[f].elements() * options.batch_size,
                              &m.arena_used[f], extents};
  }
}

void loader_core::view_slot(std::size_t s, hook_view& out) const {
  const std::size_t n = fields.size();
  out.host.assign(n, nullptr);
  out.device.assign(n, nullptr);
  out.extents.assign(n, nullptr);
  out.used.assign(n, 0);
  for (std::size_t f = 0; f < n; ++f) {
    const std::size_t at = fields[f].variable ? arena_offset[f] : field_offset[f];
    out.host[f] = fields[f].device_only ? nullptr : host_slot(s) + at;
    if (dev.is_cuda()) out.device[f] = device_slot(s) + at;
    if (!fields[f].variable) continue;
    out.extents[f] = reinterpret_cast<const std::uint64_t*>(host_slot(s) + field_offset[f]);
    out.used[f] = arena_bytes(s, f) / dtype_size(fields[f].type);
  }
  out.view = slot_view{fields, out.host, out.device, out.extents, out.used, meta[s].count, meta[s].batch,
                       copy_stream.get(), dev.index, options.seed, meta[s].epoch};
}

}  // namespace pinfeed::detail
