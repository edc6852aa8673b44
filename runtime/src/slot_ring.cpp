#include "pinfeed/runtime/detail/slot_ring.hpp"
#include "pinfeed/runtime/exception.hpp"

#include <stdexcept>
#include <string>

namespace pinfeed::detail {

std::string to_string(slot_state s) {
  switch (s) {
    case slot_state::free: return "free";
    case slot_state::filling: return "filling";
    case slot_state::filled: return "filled";
    case slot_state::copying: return "copying";
    case slot_state::ready: return "ready";
    case slot_state::in_use: return "in_use";
  }
  return "?";
}

slot_ring::slot_ring(std::size_t slots) : count_(slots), usable_(slots), slots_(new entry[slots]) {
  if (slots == 0) throw pinfeed::invalid_argument("slot_ring needs at least one slot");
}

void slot_ring::set_usable(std::size_t n) {
  if (n == 0 || n > count_)
    throw pinfeed::out_of_range("slot_ring: " + std::to_string(n) + " usable slots asked for, the ring has " +
                            std::to_string(count_));
  {
    std::lock_guard lock(mutex_);
    usable_ = n;
  }
  free_cv_.notify_all();
}

std::size_t slot_ring::usable() const {
  std::lock_guard lock(mutex_);
  return usable_;
}

void slot_ring::check_index(std::size_t slot) const {
  if (slot >= count_)
    throw pinfeed::out_of_range("slot " + std::to_string(slot) + " out of range (ring has " +
                            std::to_string(count_) + ")");
}

std::optional<std::size_t> slot_ring::acquire(std::uint64_t seq) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (closed_) return std::nullopt;
    for (std::size_t i = 0; i < usable_; ++i) {
      if (slots_[i].state.load(std::memory_order_acquire) == slot_state::free) {
        slots_[i].seq.store(seq, std::memory_order_relaxed);
        advance(i, slot_state::free, slot_state::filling);
        return i;
      }
    }
    free_cv_.wait(lock);
  }
}

void slot_ring::advance(std::size_t slot, slot_state from, slot_state to) {
  check_index(slot);
  slot_state expected = from;
  if (!slots_[slot].state.compare_exchange_strong(expected, to, std::memory_order_acq_rel)) {
    throw pinfeed::logic_error("slot " + std::to_string(slot) + ": expected state " +
                           std::string(to_string(from)) + " to move to " + std::string(to_string(to)) +
                           ", found " + std::string(to_string(expected)));
  }
}

void slot_ring::publish(std::size_t slot, slot_state from) {
  {
    std::lock_guard lock(mutex_);
    advance(slot, from, slot_state::ready);
  }
  ready_cv_.notify_all();
}

std::optional<std::size_t> slot_ring::take(std::uint64_t seq) { return take(seq, std::chrono::milliseconds(0), {}); }

std::optional<std::size_t> slot_ring::take(std::uint64_t seq, std::chrono::milliseconds poll,
                                           const std::function<void()>& idle) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (closed_) return std::nullopt;
    for (std::size_t i = 0; i < count_; ++i) {
      if (slots_[i].seq.load(std::memory_order_relaxed) == seq &&
          slots_[i].state.load(std::memory_order_acquire) == slot_state::ready) {
        advance(i, slot_state::ready, slot_state::in_use);
        return i;
      }
    }
    if (!idle) {
      ready_cv_.wait(lock);
    } else if (ready_cv_.wait_for(lock, poll) == std::cv_status::timeout) {
      lock.unlock();
      idle();
      lock.lock();
    }
  }
}

void slot_ring::release(std::size_t slot) {
  {
    std::lock_guard lock(mutex_);
    advance(slot, slot_state::in_use, slot_state::free);
    slots_[slot].seq.store(~std::uint64_t{0}, std::memory_order_relaxed);
  }
  free_cv_.notify_one();
}

void slot_ring::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  free_cv_.notify_all();
  ready_cv_.notify_all();
}

void slot_ring::reopen() {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < count_; ++i) {
    if (slots_[i].state.load(std::memory_order_acquire) != slot_state::in_use) {
      slots_[i].state.store(slot_state::free, std::memory_order_release);
      slots_[i].seq.store(~std::uint64_t{0}, std::memory_order_relaxed);
    }
  }
  closed_ = false;
}

slot_state slot_ring::state(std::size_t slot) const {
  check_index(slot);
  return slots_[slot].state.load(std::memory_order_acquire);
}

std::uint64_t slot_ring::seq(std::size_t slot) const {
  check_index(slot);
  return slots_[slot].seq.load(std::memory_order_relaxed);
}

std::size_t slot_ring::count(slot_state s) const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < count_; ++i) n += slots_[i].state.load(std::memory_order_acquire) == s;
  return n;
}

bool slot_ring::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace pinfeed::detail
