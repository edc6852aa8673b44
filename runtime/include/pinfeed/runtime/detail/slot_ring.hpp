#pragma once
/// @file slot_ring.hpp
/// The state machine of the batch slots. Each slot cycles
///   free -> filling -> filled -> (copying ->) ready -> in_use -> free
/// and every transition is checked: a slot can never be handed to two owners. Sample-level work
/// never touches this class; it is used once per batch per stage.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace pinfeed::detail {

enum class slot_state : std::uint8_t { free, filling, filled, copying, ready, in_use };

[[nodiscard]] std::string to_string(slot_state s);

/// A fixed set of slots and their states. Thread-safe: acquire() is called by the producer,
/// advance()/publish() by workers, take()/release() by the consumer, all concurrently.
class slot_ring {
 public:
  explicit slot_ring(std::size_t slots);
  slot_ring(const slot_ring&) = delete;
  slot_ring& operator=(const slot_ring&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// The slots acquire() hands out: the first `n` (1 to size(); all of them at first). A slot
  /// past them that is in use finishes its cycle and is not handed out again.
  void set_usable(std::size_t n);
  [[nodiscard]] std::size_t usable() const;

  /// Blocks until one of the usable slots is free, then marks it `filling` for batch `seq` and returns it.
  /// Returns nullopt once the ring is closed.
  [[nodiscard]] std::optional<std::size_t> acquire(std::uint64_t seq);
  /// Moves `slot` from `from` to `to`. Throws std::logic_error (naming the slot and both states)
  /// if the slot is not in state `from`.
  void advance(std::size_t slot, slot_state from, slot_state to);
  /// Moves `slot` from `from` (filled or copying) to `ready` and wakes the consumer.
  void publish(std::size_t slot, slot_state from);
  /// Blocks until the slot holding batch `seq` is ready, marks it `in_use` and returns it.
  /// Returns nullopt once the ring is closed.
  [[nodiscard]] std::optional<std::size_t> take(std::uint64_t seq);
  /// take() that, each `poll` it has waited, calls `idle` without the ring's lock held (the
  /// consumer helping a stalled pool).
  [[nodiscard]] std::optional<std::size_t> take(std::uint64_t seq, std::chrono::milliseconds poll,
                                                const std::function<void()>& idle);
  /// Returns an in_use slot to free and wakes the producer.
  void release(std::size_t slot);
  /// Wakes every waiter; acquire() and take() return nullopt until reopen().
  void close();
  /// Reopens a closed ring and forces every slot that is not in_use back to free. Call only when
  /// no producer or worker touches the ring.
  void reopen();

  [[nodiscard]] slot_state state(std::size_t slot) const;
  [[nodiscard]] std::uint64_t seq(std::size_t slot) const;
  [[nodiscard]] std::size_t count(slot_state s) const;
  [[nodiscard]] bool closed() const;

 private:
  struct alignas(64) entry {  // one cache line per slot: workers of different slots never share one
    std::atomic<slot_state> state{slot_state::free};
    std::atomic<std::uint64_t> seq{~std::uint64_t{0}};
  };
  void check_index(std::size_t slot) const;

  std::size_t count_;
  std::size_t usable_;  // guarded by mutex_
  std::unique_ptr<entry[]> slots_;
  mutable std::mutex mutex_;
  std::condition_variable free_cv_, ready_cv_;
  bool closed_ = false;
};

}  // namespace pinfeed::detail
