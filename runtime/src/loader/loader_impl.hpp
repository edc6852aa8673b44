#pragma once
// The loader's parts, wired together by loader.cpp. Each job is a file of this folder:
//   slot_plan.cpp    the slots' layout, how many, and the memory they and the source take
//   loader_core.cpp  the slots' memory and CUDA resources (detail/loader_core.hpp)
//   worker_pool.cpp  the chunk queue and the runners, and the worker count that can move
//   feeder.cpp       the feeder thread: fills slots in order, produces samples, keeps their errors
//   copy_stage.cpp   the host-to-device copy of a filled slot, its events, and a slot's reuse
//   take.cpp         the consumer's take of the next batch, and the batch's lease on its slot
//   tuning.cpp       auto_tune's measuring windows
//   loader_state.cpp state() and resume() across world sizes
//   byte_size.cpp    byte sizes and their parsing
// Their tests: tests/runtime/loader/ (slot plan, worker pool, take, state, byte sizes), the copy
// stage's in tests/runtime/gpu_loader_test.cu (a GPU, or the simulator), the feeder's through the
// whole loader in tests/runtime/loader_test.cpp, auto_tune's in tests/runtime/loader_auto_test.cpp.
//
// Threads and what orders them. The consumer thread calls every public member (loader is not
// thread-safe); it starts and stops the feeder (start(), cancel()), so the fields below marked
// (consumer) are written only while no feeder or worker runs, or are read only by the consumer.
// The feeder writes a slot's batch fields (detail::slot_meta: epoch, batch, count, indices, and
// error before its chunks run) after ring.acquire() hands it the slot, and publishes them to the
// workers through the pool's mutex when it submits the chunks; the worker that finishes the last
// chunk (slot_meta::remaining, acq_rel) runs the copy stage; ring.publish() and the consumer's
// ring.take() then order everything written to the slot before the consumer reads it, through the
// ring's mutex. See detail/loader_core.hpp for each field of a slot.

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "../detail/loader_core.hpp"
#include "pinfeed/runtime/detail/auto_tuner.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "loader_state.hpp"
#include "worker_pool.hpp"

namespace pinfeed {

namespace detail {
/// Places a sample in its epoch: it sits at `position` of `order`, read in pass `pass`.
struct sample_access {
  static void place(sample& s, const epoch_order* order, std::uint64_t position, std::uint64_t pass) noexcept {
    s.order_ = order;
    s.position_ = position;
    s.pass_ = pass;
  }
  /// Lends the sample its batch's arenas (per field) and its place in the batch.
  static void lend(sample& s, const field_arena* arenas, std::size_t slot_position) noexcept {
    s.arenas_ = arenas;
    s.slot_position_ = slot_position;
  }
};
/// The last pass number an epoch's start took (sample::pass()), over every loader of the process.
extern std::atomic<std::uint64_t> last_pass;

/// Batches of an epoch in which this rank takes `positions` samples.
[[nodiscard]] inline std::uint64_t batches_in(std::uint64_t positions, const loader_options& o) noexcept {
  return o.drop_last ? positions / o.batch_size : (positions + o.batch_size - 1) / o.batch_size;
}
}  // namespace detail

struct loader::impl {
  impl(std::shared_ptr<source> s, loader_options o);
  ~impl() { cancel(); }

  // loader.cpp
  void start(std::uint32_t epoch, std::uint64_t first_batch);
  void cancel() noexcept;

  // feeder.cpp
  /// The feeder thread: fills slots in order. Every failure reaches the consumer (feed_batches).
  void feed(std::uint32_t epoch, std::uint64_t first_batch, std::uint64_t seq_base) noexcept;
  void feed_batches(std::uint32_t epoch, std::uint64_t first_batch, std::uint64_t seq_base);
  /// Sets up the batch `b` of epoch `e` in `slot` and submits its chunks (the feeder).
  void fill_slot(std::size_t slot, std::uint32_t e, std::uint64_t b, std::exception_ptr failure);
  /// Runs one chunk of a slot's samples; the last chunk of the slot finishes it (any thread).
  void run_chunk(const detail::chunk& c) noexcept;
  void produce_chunk(std::size_t slot, std::size_t begin, std::size_t end);
  /// Keeps the first failure (by sample index) of a slot's batch.
  static void record_error(detail::slot_meta& m, std::exception_ptr err, std::uint64_t index) noexcept;

  // copy_stage.cpp
  /// A slot's samples are all produced: copies it to the device (with a GPU) and publishes it.
  void finish_slot(std::size_t slot) noexcept;

  // take.cpp
  std::optional<batch> next();
  /// Throws batches_held_error when the consumer holds more than max_batches_in_use slots.
  void check_held() const;
  /// The batch in `slot` was just taken: its wait goes to auto_tune's window.
  void count_take(std::size_t slot, std::uint64_t wait_from);

  // loader_state.cpp
  /// This loader's state, without the plan of its epoch.
  [[nodiscard]] detail::loader_state current_state() const;
  /// Where a resume from `saved` puts the loader: its order restricted to what is left, the batch
  /// to go on from, and what to log. Worked out on a copy of the order: a resume that fails
  /// leaves the loader as it was.
  struct resume_plan {
    epoch_order order;
    std::uint64_t first = 0;
    std::string warning, note;
  };
  [[nodiscard]] resume_plan plan_resume(const detail::loader_state& saved) const;
  /// The order `saved` was saved under (rank 0 of its world: every rank is at the same batch).
  [[nodiscard]] epoch_order saved_order(const detail::loader_state& saved, bool whole) const;

  // tuning.cpp: auto_tune's window being measured, judged from next().
  void start_window();
  void judge_window();
  void record_window(const detail::tuner_window& w, bool changed);  // into tuning_path

  std::shared_ptr<source> src;          // (consumer) read by workers while they run
  std::uint64_t dataset_size;
  std::optional<epoch_order> order;     // changed only by the consumer while stopped (cancel())
  std::uint64_t batches;                // of the current epoch
  device_choice device;
  detail::node_place place;  // where the node plan puts workers, the feeder and host slots
  std::shared_ptr<detail::loader_core> core;
  std::optional<detail::worker_pool> pool;

  // auto_tune (consumer)
  std::optional<detail::auto_tuner> tuner;
  std::vector<loader::tuning_report::window> tuning_path;  // the judged windows (tuning.cpp)
  bool tuning_logged = false;
  bool epoch_fresh = true;  // the next batch is the first of an epoch: its wait (the pipeline filling) is not measured
  std::uint64_t window_excluded_ns = 0;  // of the window, time not measured
  std::uint64_t last_take_ns = 0;        // when next() last had its batch
  std::uint64_t window_start_ns = 0, window_wait_ns = 0, window_samples = 0, window_batches = 0;
  double window_cpu_s = 0;

  std::thread feeder;
  std::mutex feeder_mutex;
  std::exception_ptr feeder_error;  // (feeder_mutex) the feeder stopped with it (and closed the ring); next() throws it
  /// Set by cancel() before it closes the ring: the feeder and the chunks stop (acquire/release).
  std::atomic<bool> stopping{false};

  // The position (consumer).
  bool started = false;
  /// The position (epoch, next_batch) was set by construction, resume() or start_epoch() and no
  /// batch has been taken since: start_epoch(epoch) keeps it (see loader::start_epoch).
  bool positioned = true;
  std::uint32_t epoch = 0;
  std::uint64_t next_batch = 0;
  std::uint64_t seq_base = 0;  // ring sequence number of batch 0 of the current epoch
  std::uint64_t pass = 0;      // this start's pass number (sample::pass()); read by workers
  std::uint64_t next_seq = 0;  // never reused, so a held batch of an old epoch never matches
};

}  // namespace pinfeed
