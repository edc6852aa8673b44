#pragma once
// Shared state of a loader and the batches it handed out: slots, memory, events, counters.
// Batches hold it through slot_lease, so memory outlives the loader while a batch is alive.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/detail/slot_ring.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/detail/capture.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::detail {

/// One slot's batch and its synchronization. Who writes each field, and what orders the write
/// before its readers (the ring's transitions are made under slot_ring's mutex, so acquire() ->
/// publish() -> take() -> release() -> acquire() of a slot are ordered):
///   feeder    after ring.acquire() gave it the slot (state filling), before it submits the chunks;
///             the pool's mutex (and the task count's release increment) publishes them to the
///             runners, and ring.publish()/take() to the consumer.
///   workers   while the slot is filling, each chunk its own samples; shared fields under a mutex
///             or atomic, as marked.
///   finisher  the thread whose chunk brings `remaining` to 0 (acq_rel: every chunk's writes are
///             seen), or the feeder when no chunk ran; it runs the copy stage and publish().
///   consumer  while the slot is in_use (after take(), before release()).
struct slot_meta {
  std::uint32_t epoch = 0;               // feeder
  std::uint64_t batch = 0;               // feeder
  std::size_t count = 0;                 // feeder: samples in this batch
  std::vector<std::uint64_t> indices;    // feeder; capacity batch_size, fixed
  std::atomic<std::size_t> remaining{0}; // feeder stores (release), workers count down (acq_rel): chunks still running
  std::mutex error_mutex;                // taken only when a sample fails
  std::exception_ptr error;              // feeder (before any chunk), then workers and finisher under error_mutex:
                                         // of the lowest failing index; read by the consumer after take()
  std::uint64_t error_index = 0;         // as error
  std::size_t error_count = 0;           // feeder (reset), then workers under error_mutex
  cuda_event copy_event;                 // finisher: recorded on the copy stream after the H2D copy (blocking sync);
                                         // the feeder waits on it after its next acquire() of the slot
  cuda_event release_event;              // consumer: recorded on the consumer stream at release
  cuda_event after_event;                // consumer: recorded on the stream given to batch::release_after
  bool copy_recorded = false;            // finisher; read by the feeder after acquire()
  bool release_recorded = false;         // consumer before ring.release(); read by the next finisher
  bool after_recorded = false;           // consumer before ring.release(); read and cleared by the next finisher:
                                         // the next copy into the slot waits on after_event too
  // Fences of DLPack views read on streams of their own (batch::to_dlpack(name, stream)): a view's
  // deleter, on any thread, records one on its stream; the next copy into the slot waits on every
  // one recorded (then they are kept for reuse). Guarded by fence_mutex: deleters run concurrently
  // with the copy stage's wait_fences(), which runs on the worker that completes the next fill.
  // A stream that was being captured into a graph when its fence was due (a view freed, a batch
  // released or release_after() inside a capture) gets no event then: it is kept in `pending`,
  // and the next copy into the slot records the fence once the capture has ended.
  std::mutex fence_mutex;
  std::vector<cuda_event> fences;        // recorded, not waited on by a copy yet
  std::vector<cuda_event> spare_fences;  // waited on: free to record again
  std::vector<named_stream> pending;     // streams whose fence waits for their capture to end
  named_stream consumer;                 // take(): the consumer stream as the thread taking the batch names it
  // Per field: elements claimed in a variable-size field's arena. The feeder zeroes them with the
  // extents before any chunk; workers add (relaxed: the finisher reads them after `remaining`).
  std::unique_ptr<std::atomic<std::uint64_t>[]> arena_used;
  std::vector<field_arena> arenas;       // feeder: per field, this slot's arenas as samples see them
};

/// The slots a loader has: their layout, how many there may be and how many to allocate at first.
struct slot_plan {
  std::vector<std::size_t> field_offset;  // per field, within a slot (a variable-size field's extents)
  std::vector<std::size_t> arena_offset;  // per variable-size field, its arena within a slot (0: fixed)
  std::size_t slot_bytes = 0;             // a device slot (with a GPU): every field
  std::size_t host_slot_bytes = 0;        // a host slot: all but the device_only fields, laid out last
  std::size_t prefetch_most = 0;  // the ring has prefetch_most + max_batches_in_use slots
  std::size_t prefetch = 0;       // the prefetch to start with (its slots are allocated at once)
  std::string options_used;       // the options that sized them, for messages
};

/// Lays the fields out in a slot and sizes the ring: `o.prefetch` batches, or with prefetch auto
/// as many as kAutoPrefetchMost and the memory budget allow. With a budget, `src` first gets what
/// the first slots leave (source::limit_memory), then its memory() counts. Throws
/// std::invalid_argument naming the options (and, with a budget, each consumer's bytes) when the
/// slots overflow, exceed the budget, or without one this rank's memory in the node plan.
[[nodiscard]] slot_plan plan_slots(const loader_options& o, const std::vector<field_spec>& fields, bool cuda,
                                   source& src);

/// Where the node plan puts a loader on `dev` (loader_options::bind): the CPUs its workers and
/// feeder run on and the NUMA node of its host slots (none when it is not placed: bind none, a
/// device that is not the plan's GPU, no locality known), and the cores its workers on auto (or 0)
/// are held to: the CPUs placed on, else the rank's share. A CPU loader never asks CUDA for it.
struct node_place {
  std::vector<unsigned> cpus;
  std::optional<unsigned> numa_node;
  std::size_t cores = 1;
};
[[nodiscard]] node_place place_of(const loader_options& o, const device_choice& dev);
/// place_of() for a CUDA loader bound by `plan` (the process's own: this_node_plan()), its cores
/// otherwise `cores`.
[[nodiscard]] node_place place_in(const node_plan& plan, const device_choice& dev, std::size_t cores);

/// The most batches prefetch auto takes.
inline constexpr std::size_t kAutoPrefetchMost = 8;

struct loader_core {
  /// Allocates the slots of the plan's first prefetch; the others wait for allocate_slots().
  loader_core(const loader_options& o, std::vector<field_spec> f, device_choice d, slot_plan plan,
              std::optional<unsigned> numa_node);
  ~loader_core() { release_cuda(); }
  /// Finishes queued copies and consumer work, then destroys streams and events and frees memory,
  /// with the loader's device current (the caller's restored after).
  void release_cuda() noexcept;
  /// Teardown: waits for the work queued so far on `s` (`what`, for the log), once any capture of
  /// it has ended (waiting until `until` at most for that).
  void fence_teardown(const named_stream& s, const char* what, std::chrono::steady_clock::time_point until) noexcept;
  loader_core(const loader_core&) = delete;
  loader_core& operator=(const loader_core&) = delete;

  [[nodiscard]] std::byte* host_slot(std::size_t s) const { return host[s].data(); }
  [[nodiscard]] std::byte* device_slot(std::size_t s) const { return device[s].data(); }
  /// Allocates the slots below `n` that are not yet (host, and device with a GPU). Call before
  /// ring.set_usable(n), from the consumer thread. Throws like the constructor.
  void allocate_slots(std::size_t n);
  /// Slots allocated so far.
  [[nodiscard]] std::size_t allocated() const noexcept { return allocated_.load(std::memory_order_acquire); }
  /// Host bytes of the slots allocated so far (with a GPU as many on the device, and the
  /// device_only fields' there too).
  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return allocated() * host_slot_bytes; }
  /// The most prefetch the ring has slots for.
  [[nodiscard]] std::size_t prefetch_most() const noexcept { return ring.size() - options.max_batches_in_use; }
  /// Bytes of a slot holding `n` samples that must reach the device in its first piece (up to the
  /// last field's end, a variable-size field's extents; the arenas after).
  [[nodiscard]] std::size_t used_bytes(std::size_t n) const;
  /// Bytes of variable-size field f's arena in slot s that must reach the device.
  [[nodiscard]] std::size_t arena_bytes(std::size_t s, std::size_t f) const;
  /// Every byte a copy of slot s moves: used_bytes() and every arena's used part.
  [[nodiscard]] std::size_t copied_bytes(std::size_t s) const;
  /// The copy hooks' view of slot s (source::before_copy, source::after_copy).
  struct hook_view {
    std::vector<std::byte*> host, device;
    std::vector<const std::uint64_t*> extents;
    std::vector<std::uint64_t> used;
    slot_view view;
  };
  void view_slot(std::size_t s, hook_view& out) const;
  /// Points slot s's arenas at its memory and empties them (no sample holds any claim): the
  /// feeder, before a fill's chunks.
  void reset_arenas(std::size_t s);
  /// Returns a slot from the consumer: records the release event (GPU) and frees it.
  void release_slot(std::size_t slot) noexcept;
  /// Records on `stream` an event that the next copy into `slot` waits for (batch::release_after,
  /// on the thread that names `stream`).
  void release_after(std::size_t slot, cudaStream_t stream);
  /// Records on `stream` a fence that the next copy into `slot` waits for, as well as every other
  /// fence recorded so far (a DLPack view's deleter; any thread). While `stream` is being captured
  /// the fence is deferred (slot_meta::pending). Throws cuda_error.
  void fence_after(std::size_t slot, const named_stream& stream);
  /// Keeps `stream`, being captured, as a pending fence of `slot` (fence_mutex not held).
  void defer_fence(std::size_t slot, const named_stream& stream);
  /// The same with slot meta `m`'s fence_mutex held.
  void pend_locked(slot_meta& m, const named_stream& stream);
  /// Records the fences of `m`'s pending streams whose capture has ended (fence_mutex held); true
  /// when none is left pending.
  bool settle_pending(slot_meta& m);
  /// Records the pending fences whose capture has ended (next(), on the consumer's thread): as soon
  /// as the consumer goes on after a capture, while the streams it named surely live. Cheap where
  /// none is pending.
  void record_pending();
  /// Makes `stream` wait on the slot's fences (the copy stage, before the slot's next copy). A
  /// deferred fence is recorded once its stream's capture has ended: until then this waits,
  /// polling every millisecond, and throws loader_closed once `stopping` is set.
  void wait_fences(std::size_t slot, cudaStream_t stream, const std::atomic<bool>& stopping);
  /// Blocks (sleeping, not spinning) until the work queued on `stream` so far has finished.
  void drain(cudaStream_t stream);

  loader_options options;
  std::vector<field_spec> fields;
  std::vector<std::size_t> field_offset;  // per field, within a slot
  std::vector<std::size_t> arena_offset;  // per variable-size field, within a slot
  std::size_t slot_bytes = 0;       // a device slot's
  std::size_t host_slot_bytes = 0;  // a host slot's (the device_only fields lie past it)
  std::string options_used;
  device_choice dev;
  std::optional<unsigned> numa_node;  // where host slots are allocated (nullopt: as the kernel places them)
  slot_ring ring;
  std::vector<host_buffer> host;      // one per slot, the first allocated() of them allocated
  std::vector<device_buffer> device;  // likewise, with a GPU
  std::atomic<std::size_t> allocated_{0};
  std::unique_ptr<slot_meta[]> meta;
  cuda_stream copy_stream;
  cuda_stream own_consumer_stream;       // none when the caller gave its stream
  cudaStream_t consumer_stream = nullptr;  // the caller's, or own_consumer_stream's
  cuda_event drain_event;                // blocking-sync event for drain()
  std::atomic<std::thread::id> consumer_thread{};  // take(): the thread that named consumer_stream last
  std::atomic<std::size_t> pending_fences{0};      // entries of the slots' `pending`, all together
  stage_stats stats;
  std::unique_ptr<trace_recorder> trace;
  std::atomic<std::uint64_t> first_take_ns{0};
};

/// Keeps one slot in use; the last owner (batch or DLPack view) returns it.
struct slot_lease {
  static constexpr std::size_t kNone = ~std::size_t{0};  ///< made before its slot is taken
  slot_lease(std::shared_ptr<loader_core> c, std::size_t s) noexcept : core(std::move(c)), slot(s) {}
  ~slot_lease() {
    if (slot != kNone) core->release_slot(slot);
  }
  slot_lease(const slot_lease&) = delete;
  slot_lease& operator=(const slot_lease&) = delete;

  std::shared_ptr<loader_core> core;
  std::size_t slot;
};

}  // namespace pinfeed::detail
