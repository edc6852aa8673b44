#pragma once
// Range reads (shard_options::window_shards = 0): a request per sample, for the exact global
// shuffle. Inside a loader the next samples of the epoch's order are requested ahead of use (and
// near its end, the next epoch's first ones), as many in flight as the link needs when none is
// given (in_flight_controller).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "remote/in_flight.hpp"
#include "remote/shard_set.hpp"

namespace pinfeed::loaders::remote {

/// The most bytes of samples the adapted read-ahead holds: it caps the requests in flight at half
/// that many samples of the shards' mean size.
inline constexpr std::uint64_t kReadAheadBytes = std::uint64_t{256} << 20;

/// A quarter of this process's open-file limit (RLIMIT_NOFILE, soft), within
/// [kMinRequestsInFlight, kMaxRequestsInFlight]: requests in flight hold a connection each, and as
/// many again are kept for reuse.
[[nodiscard]] std::size_t open_file_share() noexcept;

/// The most requests in flight the adaptation takes (in_flight_controller's most): as many as
/// keep kReadAheadBytes of samples of `mean_image_bytes` read ahead (twice as many samples as
/// requests), within [kMinRequestsInFlight, `open_files` (open_file_share())]; with a read_ahead
/// given, no more than it (and the workers' own requests) can use: max(kMinRequestsInFlight,
/// read_ahead) at most.
[[nodiscard]] std::size_t in_flight_most(std::uint64_t mean_image_bytes, std::optional<std::size_t> read_ahead,
                                         std::size_t open_files) noexcept;

/// Which samples of the order to request ahead: the positions walked, and what is pending or was
/// taken, by (epoch, index). No I/O and no lock (range_reads holds one around every call).
class read_ahead_walk {
 public:
  /// One read at o.position() (an order_cursor, see shard_set.hpp) with `depth` samples read ahead and at most `max_pending` answers
  /// pending: calls `queue(epoch, index)` for each sample to request now, in order.
  template <class Order, class Queue>
  void step(const Order& o, std::size_t depth, std::size_t max_pending, std::size_t pending, Queue&& queue);

 private:
  std::uint32_t epoch_ = ~0u;  ///< the walk looked at positions [low_, next_) of this epoch
  std::uint64_t pass_ = 0;     ///< in this pass (sample::pass())
  std::uint64_t low_ = 0, size_ = 0, next_ = 0;
  std::uint64_t next_epoch_ = 0;  ///< and positions [0, next_epoch_) of the next epoch
};

/// Drops the reads of `pending` (a map to values with an `epoch`) that belong to neither `epoch` nor
/// the one after it (read ahead across its start; none after the last epoch number).
template <class Map>
void drop_other_epochs(Map& pending, std::uint32_t epoch) {
  const bool next_epoch = epoch != ~0u;
  for (auto it = pending.begin(); it != pending.end();) {
    const bool kept = it->second.epoch == epoch || (next_epoch && it->second.epoch == epoch + 1);
    it = kept ? std::next(it) : pending.erase(it);
  }
}

/// The samples taken in the current pass (sample::pass()), by id: the last `most` of them, so that a
/// late read-ahead does not fetch them again; a new pass forgets the last one's. No lock.
class taken_samples {
 public:
  void remember(std::uint64_t id, std::uint64_t pass, std::size_t most);
  [[nodiscard]] bool contains(std::uint64_t id) const { return ids_.count(id) != 0; }
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }

 private:
  std::unordered_set<std::uint64_t> ids_;
  std::deque<std::uint64_t> order_;  ///< ids_ in the order taken
  std::uint64_t pass_ = 0;
};

class range_reads final : public fetch_strategy {
 public:
  /// With no requests_in_flight given, they follow in_flight_controller, up to what the shards' mean
  /// sample size lets kReadAheadBytes hold.
  range_reads(shard_set& set, const remote_options& o);

  std::span<const std::byte> fetch(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                   std::shared_ptr<const void>& held) override;
  void add_counters(remote_counters& c) const override;
  [[nodiscard]] memory_use memory() const override;
  /// With the requests in flight adapting: lowers the most they take (kMinRequestsInFlight at
  /// least) so that the read-ahead they drive holds at most `bytes` of samples.
  void limit_memory(std::uint64_t bytes) override;
  void stop() noexcept override {}

 private:
  static std::uint64_t key(std::uint32_t epoch, std::uint64_t index) { return (std::uint64_t{epoch} << 44) ^ index; }
  /// Queues the samples the walk hands out, dropping other epochs' pending reads when full. Under m_.
  void read_ahead(const order_cursor& order);
  /// The bytes of (epoch, index): its read-ahead, or a request ahead of the read-ahead ones.
  std::future<std::vector<std::byte>> take(std::uint32_t epoch, std::uint64_t index, std::uint64_t pass);
  /// The read-ahead for `in_flight` requests at once: read_ahead as given, else twice them (128 at
  /// least); and the answers that may be pending, four times that. Under m_ (or before any read).
  void set_depth(std::size_t in_flight);
  /// The samples read ahead for `in_flight` requests at once: read_ahead as given, else twice them
  /// (128 at least).
  [[nodiscard]] std::size_t depth_for(std::size_t in_flight) const;
  /// The read-ahead answers that may be pending for a read-ahead of `depth`.
  [[nodiscard]] static std::size_t pending_for(std::size_t depth) { return std::max<std::size_t>(4 * depth, 64); }
  void apply_cap(std::size_t n);

  struct pending {
    std::uint32_t epoch;
    std::future<std::vector<std::byte>> bytes;
  };

  shard_set& set_;
  remote_options o_;
  std::mutex m_;
  std::unordered_map<std::uint64_t, pending> pending_;
  taken_samples taken_;  ///< the last 4 x max_pending_ taken in this pass
  std::size_t max_pending_ = 64;
  std::atomic<std::size_t> depth_{0};  ///< samples read ahead (written under m_)
  read_ahead_walk walk_;
  std::uint64_t mean_image_bytes_;             ///< of the shards' samples, from the index
  std::optional<in_flight_controller> adapt_;  ///< when requests_in_flight is not given
};

template <class Order, class Queue>
void read_ahead_walk::step(const Order& o, std::size_t depth, std::size_t max_pending, std::size_t pending,
                           Queue&& queue) {
  const std::uint64_t pos = o.position(), size = o.epoch_size();
  const std::uint32_t epoch = o.epoch();
  // A new epoch, the same one restricted anew, a new pass over it, or restarted behind (further
  // than workers lag: a reset by a lagging worker only walks again positions pending or taken).
  if (o.pass() != pass_ || epoch != epoch_ || size != size_ || next_ > pos + 1 + depth + 512) {
    pass_ = o.pass();
    epoch_ = epoch;
    size_ = size;
    next_ = low_ = pos + 1;
    next_epoch_ = 0;
  }
  // A worker behind where the walk began (the first sample of a pass that a worker takes need not
  // be its first position): the positions between are walked too, not left to be requested one
  // by one by the workers that take them.
  const bool behind = pos + 1 < low_;
  const std::uint64_t back_to = low_;
  if (behind) low_ = pos + 1;
  next_ = std::max(next_, pos + 1);
  const auto room = [&] { return pending < max_pending; };
  const auto put = [&](std::uint32_t epoch, std::uint64_t index) {
    if (queue(epoch, index)) ++pending;
  };
  if (behind)  // (at most depth + 512 positions: further behind restarts the walk above)
    for (std::uint64_t p = pos + 1; p < std::min(back_to, size) && room(); ++p)
      if (const auto next = o.index_at(epoch, p)) put(epoch, *next);
  const std::uint64_t end = pos + 1 + depth;
  while (next_ < std::min(size, end) && room()) {
    const auto next = o.index_at(epoch, next_);
    if (!next) break;
    ++next_;
    put(epoch, *next);
  }
  if (next_ < size || epoch == ~0u) return;  // (epoch + 1 would wrap)
  while (size + next_epoch_ < end && room()) {
    const auto next = o.index_at(epoch + 1, next_epoch_);
    if (!next) break;
    ++next_epoch_;
    put(epoch + 1, *next);
  }
}

}  // namespace pinfeed::loaders::remote
