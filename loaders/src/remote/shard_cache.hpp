#pragma once
// The bookkeeping of whole-shard reads: which shards are resident, being fetched, or wanted, the
// bytes they hold against the cache's cap, and the look-ahead along the epoch's order that decides
// what to fetch next and what may be evicted. No I/O and no lock: its owner (whole_shards) holds
// one around every call, and fetches what take_fetches() hands out.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "remote/blob.hpp"
#include "remote/shard_set.hpp"

namespace pinfeed::loaders::remote {

class shard_cache {
 public:
  struct slot {
    std::shared_ptr<const blob> data;  ///< resident
    bool fetching = false;
    std::uint64_t reserved = 0;  ///< bytes counted against the cap (resident or being fetched)
    std::uint64_t last_use = 0;
    std::uint64_t pending = 0;  ///< its samples the look-ahead met this epoch that no reader took yet
    bool queued = false;        ///< in the wanted queue
    bool next_epoch = false;    ///< met at the start of the next epoch: kept until it starts
  };

  /// `sizes`: each shard's bytes; `shard_of`: each sample's shard; `cap`: the cache's bytes;
  /// `lookahead`: how many positions of the order past a read are walked.
  shard_cache(std::vector<std::uint64_t> sizes, std::vector<std::uint32_t> shard_of, std::uint64_t cap,
              std::uint64_t lookahead);

  /// Makes `data` (a copy of shard s kept while it was indexed, within the cap) resident.
  void adopt(std::uint32_t s, std::shared_ptr<const blob> data);

  // ---- reading ----
  /// Walks the order (an order_cursor, see shard_set.hpp) from o.position() up to `lookahead` positions on (each position once an epoch;
  /// near its end on into the next epoch's first positions), counting each shard's samples to
  /// come and queueing the shards met. Returns the shard whose count holds o's own position.
  template <class Order>
  std::optional<std::uint32_t> walk(const Order& o);
  /// The queued shards, in order of need, that there is room for now (evicting as reserve() does),
  /// each marked fetching; stops at the first that has no room. Shards that never fit, and those
  /// whose samples were all read meanwhile, are dropped from the queue.
  [[nodiscard]] std::vector<std::uint32_t> take_fetches();
  /// Counts shard sh's bytes against the cap, first evicting resident shards that no sample met
  /// by the look-ahead waits for (least recently used first). False when that makes no room.
  [[nodiscard]] bool reserve(std::uint32_t sh);
  void begin_fetch(std::uint32_t sh) { slots_[sh].fetching = true; }
  /// Shard sh's fetch ended: resident with `data`, or (null) its bytes free again.
  void arrived(std::uint32_t sh, std::shared_ptr<const blob> data);
  /// Frees shard sh's reserved bytes (a fetch that never started, an indexing copy not kept).
  void release(std::uint32_t sh) noexcept;
  /// A sample counted at `counted` (walk()'s answer) was taken.
  void taken(std::optional<std::uint32_t> counted) noexcept;
  /// Shard sh resident: marked used now.
  [[nodiscard]] std::shared_ptr<const blob> use(std::uint32_t sh);

  [[nodiscard]] const slot& at(std::uint32_t sh) const { return slots_.at(sh); }
  [[nodiscard]] std::uint64_t used() const noexcept { return used_; }
  [[nodiscard]] std::uint64_t cap() const noexcept { return cap_; }
  /// Drops every resident shard (the reader is going; a directory cache's files go with them).
  void clear() noexcept;

 private:
  void restart_walk(std::uint32_t epoch, std::uint64_t pass, std::uint64_t epoch_size, std::uint64_t position);
  void want(std::uint32_t sh);

  std::vector<std::uint64_t> sizes_;
  std::vector<std::uint32_t> shard_of_;
  std::uint64_t cap_, lookahead_;
  std::vector<slot> slots_;
  std::uint64_t used_ = 0, clock_ = 0;
  std::deque<std::uint32_t> wanted_;  ///< shards met, in order of need, not yet fetching
  std::uint32_t epoch_ = ~0u;
  std::uint64_t pass_ = 0, epoch_size_ = 0;
  std::uint64_t start_ = 0, frontier_ = 0;  ///< the walk covered positions [start_, frontier_)
  std::uint64_t next_frontier_ = 0;         ///< and the next epoch's positions [0, next_frontier_)
};

template <class Order>
std::optional<std::uint32_t> shard_cache::walk(const Order& o) {
  const std::uint64_t pos = o.position(), size = o.epoch_size();
  const std::uint32_t epoch = o.epoch();
  // A new epoch, the same one restricted anew, a new pass over it, or restarted far from where
  // the walk is: nothing counted so far holds.
  const bool restarted = pos + 4 * lookahead_ + 4096 < start_ || pos > frontier_ + 4 * lookahead_ + 4096;
  if (epoch != epoch_ || size != epoch_size_ || o.pass() != pass_ || restarted) restart_walk(epoch, o.pass(), size, pos);
  while (frontier_ < pos + lookahead_) {
    const auto next = o.index_at(epoch, frontier_);
    if (!next || *next >= shard_of_.size()) break;
    const std::uint32_t sh = shard_of_[*next];
    ++slots_[sh].pending;
    want(sh);
    ++frontier_;
  }
  // Near the end of the epoch, on into the next one's first positions: its first window is then
  // on its way before the epoch turns (most trainers start the next epoch next).
  if (frontier_ >= size && epoch != ~0u) {
    while (size + next_frontier_ < pos + lookahead_) {
      const auto next = o.index_at(epoch + 1, next_frontier_);
      if (!next || *next >= shard_of_.size()) break;
      slots_[shard_of_[*next]].next_epoch = true;  // resident ones too: kept until that epoch starts
      want(shard_of_[*next]);
      ++next_frontier_;
    }
  }
  if (pos < start_ || pos >= frontier_) return std::nullopt;
  const auto mine = o.index_at(epoch, pos);
  if (!mine || *mine >= shard_of_.size()) return std::nullopt;
  return shard_of_[*mine];
}

}  // namespace pinfeed::loaders::remote
