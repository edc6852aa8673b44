#pragma once
// How many range requests run at once when none is given: Little's law, measured as the loader
// reads. A pure function of the reads' times, the answers' latency and whether the cap held
// requests back, so that each step can be tested alone.
//
// Over windows of kEvery samples read and at least max(250 ms, two latencies), the target is twice
// the samples read per second times a request's latency (room for both to vary), within
// [kMinRequestsInFlight, most]:
//   - The cap grows, by half to double a window, only where it held requests back (the transfer
//     loop had requests queued with the cap full): a consumer slower than the link keeps it. A
//     growth is kept only when the next window reads at least 10% faster; else the cap goes back
//     and stays below it (a full link, or a server at its limit, gains nothing from more) until
//     the latency doubles.
//   - It shrinks, by a quarter a window at most, where the target is under half of it and the
//     cap held nothing back, so that a bursty consumer does not swing it.
//   - A pause (a gap between two reads of over max(1 s, four latencies): between epochs, a
//     checkpoint) starts the window anew instead of reading as a slow rate.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace pinfeed::loaders::remote {

class in_flight_controller {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint64_t kEvery = 64;

  /// `most`: the most it takes (kMinRequestsInFlight at least).
  explicit in_flight_controller(std::size_t most);

  /// One sample read at `now`, with `latency` (seconds, a range answer's of late; 0: none yet)
  /// and `cap` requests in flight now; `take_held_back` says (and clears) whether the cap held
  /// requests back since it was last asked. Returns the cap to set, when it changes.
  [[nodiscard]] std::optional<std::size_t> on_read(clock::time_point now, double latency, std::size_t cap,
                                                   const std::function<bool()>& take_held_back);

  /// Takes at most `most` from now on (kMinRequestsInFlight at least), keeping what it has
  /// learned (the window under way, a ceiling a growth without gain set, a growth being judged):
  /// a memory budget met again, by a second loader over the same reader, forgets nothing.
  /// Returns the cap to set where the cap in use (`cap`) is now past it.
  [[nodiscard]] std::optional<std::size_t> limit(std::size_t most, std::size_t cap);

  [[nodiscard]] std::size_t ceiling() const noexcept { return ceiling_; }
  /// The most it ever takes.
  [[nodiscard]] std::size_t most() const noexcept { return most_; }

 private:
  std::optional<std::size_t> judge_window(double rate, double latency, std::size_t cap, bool held_back);

  std::size_t most_;
  std::size_t ceiling_;           ///< the most for now (lowered where a growth gained nothing)
  double ceiling_latency_ = 0;    ///< the latency when it was lowered
  std::uint64_t count_ = 0;       ///< samples read since mark_, plus one
  clock::time_point mark_, last_;
  bool grew_ = false;  ///< the last window grew the cap from cap_before_growth_ at rate_before_growth_
  std::size_t cap_before_growth_ = 0;
  double rate_before_growth_ = 0;
};

}  // namespace pinfeed::loaders::remote
