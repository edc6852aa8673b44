#include "remote/in_flight.hpp"

#include <algorithm>
#include <cmath>

#include "pinfeed/loaders/remote.hpp"

namespace pinfeed::loaders::remote {

in_flight_controller::in_flight_controller(std::size_t most)
    : most_(std::max(most, kMinRequestsInFlight)), ceiling_(most_) {}

std::optional<std::size_t> in_flight_controller::limit(std::size_t most, std::size_t cap) {
  most_ = std::min(most_, std::max(most, kMinRequestsInFlight));
  ceiling_ = std::min(ceiling_, most_);
  cap_before_growth_ = std::min(cap_before_growth_, most_);
  if (cap > most_) return most_;
  return std::nullopt;
}

std::optional<std::size_t> in_flight_controller::on_read(clock::time_point now, double latency, std::size_t cap,
                                                         const std::function<bool()>& take_held_back) {
  using seconds = std::chrono::duration<double>;
  const bool paused = count_ > 0 && seconds(now - last_).count() > std::max(1.0, 4 * latency);
  last_ = now;
  if (count_ == 0 || paused) {
    count_ = 1;
    mark_ = now;
    grew_ = false;  // a growth is judged on windows next to each other only
    (void)take_held_back();
    return std::nullopt;
  }
  ++count_;
  const double elapsed = seconds(now - mark_).count();
  if (count_ <= kEvery || elapsed < std::max(0.25, 2 * latency)) return std::nullopt;
  const double rate = static_cast<double>(count_ - 1) / elapsed;
  count_ = 1;
  mark_ = now;
  const bool held_back = take_held_back();
  if (!(latency > 0) || !(rate > 0)) return std::nullopt;
  return judge_window(rate, latency, cap, held_back);
}

std::optional<std::size_t> in_flight_controller::judge_window(double rate, double latency, std::size_t cap,
                                                              bool held_back) {
  if (grew_) {
    grew_ = false;
    if (rate < 1.1 * rate_before_growth_) {  // no gain: back, and no higher until the latency doubles
      ceiling_ = cap_before_growth_;
      ceiling_latency_ = latency;
      return cap_before_growth_;
    }
  }
  if (ceiling_ < most_ && latency > 2 * ceiling_latency_) ceiling_ = most_;
  const double want = std::ceil(2.0 * rate * latency);
  const std::size_t target =
      want >= static_cast<double>(ceiling_) ? ceiling_ : std::max(kMinRequestsInFlight, static_cast<std::size_t>(want));
  if (held_back && target > cap) {
    // By half at least: a window that began with the epoch reads a rate below what the cap allows.
    const std::size_t next = std::min({std::max(target, cap + cap / 2), 2 * cap, ceiling_});
    if (next <= cap) return std::nullopt;
    cap_before_growth_ = cap;
    rate_before_growth_ = rate;
    grew_ = true;
    return next;
  }
  if (!held_back && 2 * target < cap) return std::max(target, cap - cap / 4);
  return std::nullopt;
}

}  // namespace pinfeed::loaders::remote
