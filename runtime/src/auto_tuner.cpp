#include "pinfeed/runtime/detail/auto_tuner.hpp"

#include <algorithm>
#include <cstdio>

namespace pinfeed::detail {
namespace {
std::string percent(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * x);
  return text;
}
}  // namespace

auto_tuner::auto_tuner(bounds b, std::size_t workers, std::size_t prefetch)
    : bounds_(b),
      workers_(std::clamp<std::size_t>(workers, 1, std::max<std::size_t>(b.workers_most, 1))),
      prefetch_(std::clamp<std::size_t>(prefetch, 1, std::max<std::size_t>(b.prefetch_most, 1))),
      workers_ceiling_(std::max<std::size_t>(b.workers_most, 1)),
      prefetch_ceiling_(std::max<std::size_t>(b.prefetch_most, 1)) {}

void auto_tuner::set(std::size_t workers, std::size_t prefetch, std::string why) {
  workers_ = workers;
  prefetch_ = prefetch;
  ++changes_;
  reason_ = std::move(why);
}

void auto_tuner::refuse_prefetch(std::size_t prefetch) {
  prefetch_ = prefetch_ceiling_ = prefetch;
  ceiling_since_ = windows_;
  if (trial_ == trial::grew_prefetch) trial_ = trial::none;
}

bool auto_tuner::judge(const tuner_window& w) {
  ++windows_;
  if (w.seconds <= 0) return false;
  const double rate = static_cast<double>(w.samples) / w.seconds;
  const double wait = std::clamp(w.consumer_wait_s / w.seconds, 0.0, 1.0);
  const double idle = w.cores - w.busy_cores;
  expire_limits();
  const trial last = trial_;
  trial_ = trial::none;
  if (last == trial::grew_workers || last == trial::grew_prefetch)
    return judge_growth(last == trial::grew_workers, rate);
  if (last == trial::shrank_workers && wait > kWaits) {
    workers_floor_ = before_;
    floor_since_ = windows_;
    set(before_, prefetch_,
        "workers back to " + std::to_string(before_) + ": with " + std::to_string(workers_) +
            " the consumer waited " + percent(wait));
    return true;
  }
  if (wait > kWaits) return grow(rate, wait, idle);
  return judge_calm(wait);
}

void auto_tuner::expire_limits() {
  if (windows_ - ceiling_since_ > kCeilingWindows) {  // the load may have changed: try the bounds again
    workers_ceiling_ = std::max<std::size_t>(bounds_.workers_most, 1);
    prefetch_ceiling_ = std::max<std::size_t>(bounds_.prefetch_most, 1);
  }
  if (windows_ - floor_since_ > kCeilingWindows) workers_floor_ = 1;
}

bool auto_tuner::judge_growth(bool workers, double rate) {
  const char* what = workers ? "workers" : "prefetch";
  const std::size_t now = workers ? workers_ : prefetch_;
  if (rate >= rate_before_ * kGain) {
    if (workers) {  // fewer did not do: a later calm spell does not take this one back at once
      workers_floor_ = std::max(workers_floor_, now);
      floor_since_ = windows_;
    }
    reason_ = std::string(what) + " " + std::to_string(before_) + " -> " + std::to_string(now) + " kept: " +
              std::to_string(static_cast<long long>(rate)) + " samples/s, was " +
              std::to_string(static_cast<long long>(rate_before_));
    return false;
  }
  (workers ? workers_ceiling_ : prefetch_ceiling_) = before_;
  ceiling_since_ = windows_;
  set(workers ? before_ : workers_, workers ? prefetch_ : before_,
      std::string(what) + " back to " + std::to_string(before_) + ": " + std::to_string(now) + " gained under 5% (" +
          std::to_string(static_cast<long long>(rate)) + " samples/s, was " +
          std::to_string(static_cast<long long>(rate_before_)) + ")");
  return true;
}

bool auto_tuner::grow(double rate, double wait, double idle) {
  calm_ = 0;
  if (bounds_.workers && workers_ < workers_ceiling_ && idle >= kIdleCore) {
    trial_ = trial::grew_workers;
    before_ = workers_;
    rate_before_ = rate;
    const std::size_t step = workers_ < 4 ? 1 : workers_ / 4;
    const std::size_t to = std::min(workers_ + step, workers_ceiling_);
    char cores[32];
    std::snprintf(cores, sizeof cores, "%.1f", idle);
    set(to, prefetch_,
        "workers " + std::to_string(workers_) + " -> " + std::to_string(to) + ": the consumer waited " +
            percent(wait) + " with " + cores + " cores idle");
    return true;
  }
  if (bounds_.prefetch && prefetch_ < prefetch_ceiling_) {
    trial_ = trial::grew_prefetch;
    before_ = prefetch_;
    rate_before_ = rate;
    set(workers_, prefetch_ + 1,
        "prefetch " + std::to_string(prefetch_) + " -> " + std::to_string(prefetch_ + 1) + ": the consumer waited " +
            percent(wait) + (bounds_.workers && workers_ < workers_ceiling_ ? " with no core idle" : ""));
    return true;
  }
  reason_ = "the consumer waits " + percent(wait) + ", but more workers or prefetch gains nothing here";
  settled_ = true;
  return false;
}

bool auto_tuner::judge_calm(double wait) {
  if (wait < kNeverWaits) {
    if (++calm_ >= 2 && bounds_.workers && workers_ > workers_floor_) {
      calm_ = 0;
      trial_ = trial::shrank_workers;
      before_ = workers_;
      set(workers_ - 1, prefetch_,
          "workers " + std::to_string(workers_) + " -> " + std::to_string(workers_ - 1) +
              ": the consumer never waited (" + percent(wait) + ")");
      return true;
    }
  } else {
    calm_ = 0;
  }
  reason_ = "the consumer waits " + percent(wait) + ": settled";
  settled_ = true;
  return false;
}

}  // namespace pinfeed::detail
