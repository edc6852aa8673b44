#pragma once
/// @file auto_tuner.hpp
/// How a loader with workers or prefetch set to auto_tune picks them: a pure function of what it
/// measured over windows of delivered batches, so that each rule can be tested alone.
///
/// Each window gives the samples delivered, the time the consumer waited for batches and the
/// cores the process kept busy. Then, in this order:
///   - A growth tried in the last window is kept only when this one delivered at least 5% more
///     samples a second; otherwise the setting goes back and that value becomes a ceiling (for
///     kCeilingWindows windows: the load may change, and then it is tried again).
///   - A shrink tried in the last window goes back when the consumer now waits (over 5% of the
///     window), and the value it left becomes a floor.
///   - The consumer waits (over 5%) and a core idles (half a core at least): one worker more (a
///     quarter more past four), up to the TBB cap. Waiting with no idle core or at the workers'
///     ceiling: one batch more prefetch, up to what the memory budget allows.
///   - The consumer never waits (under 1%) two windows in a row: one worker less, down to the
///     floor (the trainer gets the core back). A kept growth raises the floor to what it grew to;
///     floors, like ceilings, hold for kCeilingWindows windows.
/// Settled means a window that changed nothing; the first one is what the loader logs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace pinfeed::detail {

struct tuner_window {
  double seconds = 0;          ///< the window's wall time
  double consumer_wait_s = 0;  ///< of it, the consumer's wait for batches
  double busy_cores = 0;       ///< the process's CPU time over the window's wall time
  double cores = 1;            ///< the cores this process may run on
  std::uint64_t samples = 0;   ///< delivered
};

class auto_tuner {
 public:
  static constexpr double kWaits = 0.05;       ///< the consumer waits: over this share of a window
  static constexpr double kNeverWaits = 0.01;  ///< the consumer never waits: under this share
  static constexpr double kGain = 1.05;        ///< a growth is kept for this much more throughput
  static constexpr double kIdleCore = 0.5;     ///< idle cores that count as one idle
  static constexpr std::uint64_t kCeilingWindows = 16;

  struct bounds {
    bool workers = false, prefetch = false;  ///< which ones it tunes
    std::size_t workers_most = 1, prefetch_most = 1;
  };
  auto_tuner(bounds b, std::size_t workers, std::size_t prefetch);

  /// Judges one window; returns true when it changed workers() or prefetch().
  bool judge(const tuner_window& w);
  /// The prefetch judge() chose could not be had (its slots could not be allocated): back to
  /// `prefetch`, which becomes the ceiling.
  void refuse_prefetch(std::size_t prefetch);

  [[nodiscard]] std::size_t workers() const noexcept { return workers_; }
  [[nodiscard]] std::size_t prefetch() const noexcept { return prefetch_; }
  [[nodiscard]] const bounds& limits() const noexcept { return bounds_; }
  [[nodiscard]] std::uint64_t windows() const noexcept { return windows_; }
  [[nodiscard]] std::uint64_t changes() const noexcept { return changes_; }
  /// Some window changed nothing.
  [[nodiscard]] bool settled() const noexcept { return settled_; }
  /// Why the last window did what it did, in words.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  enum class trial { none, grew_workers, grew_prefetch, shrank_workers };
  void set(std::size_t workers, std::size_t prefetch, std::string why);
  /// The steps of judge(): ceilings and the floor that have stood long enough go back to the bounds;
  /// a growth trial is kept or taken back; with the consumer waiting, workers or prefetch grow (or
  /// nothing can); with it never waiting twice running, a worker goes.
  void expire_limits();
  bool judge_growth(bool workers, double rate);
  bool grow(double rate, double wait, double idle);
  bool judge_calm(double wait);

  bounds bounds_;
  std::size_t workers_, prefetch_;
  std::size_t workers_ceiling_, prefetch_ceiling_, workers_floor_ = 1;
  std::uint64_t ceiling_since_ = 0;  ///< the window a ceiling was last lowered in
  std::uint64_t floor_since_ = 0;    ///< the window the floor was last raised in
  trial trial_ = trial::none;
  std::size_t before_ = 0;           ///< the value the trial changed
  double rate_before_ = 0;           ///< samples per second before it
  std::uint64_t windows_ = 0, changes_ = 0, calm_ = 0;
  bool settled_ = false;
  std::string reason_ = "not judged yet";
};

}  // namespace pinfeed::detail
