#pragma once
/// @file epoch_order.hpp
/// Which dataset index comes at each position of an epoch: sequential, shuffled per epoch, or
/// shuffled shard-aware (windows of storage groups), and split over ranks. Every order is a pure
/// function of (seed, epoch, rank, world size) that needs no memory per sample (keyed Feistel
/// permutations, not stored ones); the shard-aware one keeps O(groups) per epoch.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pinfeed {

/// Rank, world size and local rank of this process.
struct distributed_env {
  int rank = 0;
  int world = 1;
  int local_rank = -1;
  std::string launcher;  ///< "torchrun", "openmpi", "slurm" or "" (none found)
};

/// Reads the launchers' environment: torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI
/// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK) and Slurm (SLURM_PROCID,
/// SLURM_NTASKS, SLURM_LOCALID), in that order. Throws std::invalid_argument naming the variable
/// when a value is not a number or the rank is not below the world size.
[[nodiscard]] distributed_env distributed_from_env();

/// How a dataset's samples sit in storage: consecutive runs of dataset indices that are read
/// together (the samples of one tar shard), for an order that reads them group by group.
struct sample_groups {
  std::vector<std::uint64_t> sizes;  ///< samples per group, in dataset-index order (summing to the size)
  std::uint32_t window = 1;          ///< groups whose samples are shuffled together (>= 1)
};

struct epoch_order_options {
  bool shuffle = false;
  /// This process's shard: rank in [0, world). rank = -1 takes rank and world from the environment
  /// (distributed_from_env()), or 0 of 1 when no launcher set them.
  int rank = -1;
  int world = 1;
  /// With world > 1 and a dataset size not divisible by it: false pads every rank to the same
  /// length by repeating the epoch's first positions (as torch's DistributedSampler does); true
  /// drops the remainder.
  bool drop_remainder = false;
  /// With shuffle: a shard-aware shuffle over these groups instead of a global one. The groups are
  /// put in a new order every epoch, cut into windows of `window` consecutive groups, and the
  /// samples of each window are shuffled among themselves; so a reader needs only one window's
  /// groups at a time (plus the next one's, fetched ahead). Null: the exact global shuffle.
  std::shared_ptr<const sample_groups> groups{};
};

/// Global positions [begin, end) of an epoch's order.
struct position_range {
  std::uint64_t begin = 0, end = 0;
  friend bool operator==(const position_range&, const position_range&) = default;
};

/// The order of one dataset under one seed. Cheap to copy; thread-safe for reading.
///
/// An epoch's global order is a pure function of (seed, epoch, dataset size, groups): position g
/// of [0, n) holds dataset index permute(epoch, g) (g itself when not shuffling). Ranks take
/// contiguous runs of it: rank r the positions [r * size(), (r + 1) * size()), those past the end
/// wrapping to the epoch's first positions (padding) or, with drop_remainder, the tail that does not
/// divide evenly left out. An epoch can be restricted to the positions some other world size left
/// undelivered (restrict()): those are then split over this order's ranks the same way, which is how
/// a loader's state saved on W ranks resumes on W' ranks.
class epoch_order {
 public:
  /// Throws std::invalid_argument for a rank outside [0, world), a world < 1, an empty shard, or
  /// groups that do not sum to the dataset size (or have a window of 0).
  epoch_order(std::uint64_t dataset_size, std::uint64_t seed, epoch_order_options options);

  /// Positions of this rank in a whole epoch.
  [[nodiscard]] std::uint64_t size() const noexcept { return per_rank_; }
  /// Positions of this rank in `epoch`: size(), or this rank's share of a restricted epoch (may be 0).
  [[nodiscard]] std::uint64_t size(std::uint32_t epoch) const noexcept;
  /// The dataset index at this rank's `position` of `epoch` (position < size(epoch)). Throws only
  /// std::bad_alloc (a shard-aware order builds each epoch's group order on first use).
  [[nodiscard]] std::uint64_t index_at(std::uint32_t epoch, std::uint64_t position) const;
  /// The global position behind this rank's `position` of `epoch`.
  [[nodiscard]] std::uint64_t global_position(std::uint32_t epoch, std::uint64_t position) const noexcept;
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int world() const noexcept { return world_; }
  [[nodiscard]] bool shuffled() const noexcept { return shuffle_; }
  [[nodiscard]] bool drops_remainder() const noexcept { return drop_; }
  [[nodiscard]] std::uint64_t dataset_size() const noexcept { return n_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  /// The groups of a shard-aware shuffle, or null.
  [[nodiscard]] const std::shared_ptr<const sample_groups>& groups() const noexcept { return groups_; }
  /// "sequential", "shuffle" or "shard-shuffle(groups=G,window=W)": what the order depends on
  /// besides seed and size.
  [[nodiscard]] std::string kind() const;

  /// The shuffled order's permutation of [0, n) for `epoch`: exposed for tests.
  [[nodiscard]] std::uint64_t permute(std::uint32_t epoch, std::uint64_t i) const;

  /// From now on `epoch` holds only the global positions `remaining` (sorted, disjoint, non-empty
  /// ranges within [0, dataset_size); an empty list makes an empty epoch), split over the ranks as
  /// above. Other epochs are whole. Not to be called while another thread reads the order. Throws
  /// std::invalid_argument naming the range that is out of bounds, unsorted or overlapping.
  void restrict(std::uint32_t epoch, std::vector<position_range> remaining);
  /// Makes every epoch whole again.
  void unrestrict() noexcept;
  /// The global positions `epoch` holds: [0, n) unless restricted.
  [[nodiscard]] std::vector<position_range> plan(std::uint32_t epoch) const;
  /// The positions of `epoch` not yet delivered once every rank has taken its first `taken`
  /// positions (padding repeats nothing new; the tail drop_remainder leaves out stays out).
  [[nodiscard]] std::vector<position_range> remaining_after(std::uint32_t epoch, std::uint64_t taken) const;

 private:
  struct restriction {
    std::uint32_t epoch = 0;
    std::vector<position_range> ranges;
    std::vector<std::uint64_t> starts;  // offset of each range in their concatenation
    std::uint64_t total = 0, per_rank = 0;
    /// The range holding offset q of the ranges' concatenation, and q's offset in it.
    [[nodiscard]] std::pair<std::size_t, std::uint64_t> locate(std::uint64_t q) const noexcept {
      const auto it = std::upper_bound(starts.begin(), starts.end(), q) - 1;
      return {static_cast<std::size_t>(it - starts.begin()), q - *it};
    }
  };
  struct grouped_epoch;
  struct grouped_cache;
  [[nodiscard]] std::shared_ptr<const grouped_epoch> grouped(std::uint32_t epoch) const;
  [[nodiscard]] std::uint64_t share(std::uint64_t total) const noexcept;
  [[nodiscard]] std::uint64_t grouped_permute(std::uint32_t epoch, std::uint64_t g) const;
  [[nodiscard]] const restriction* restricted(std::uint32_t epoch) const noexcept;
  std::uint64_t n_, seed_, per_rank_;
  int rank_, world_;
  bool shuffle_, drop_;
  int half_bits_;  // the Feistel network works on 2 * half_bits_ bits
  std::shared_ptr<const sample_groups> groups_;
  std::vector<std::uint64_t> group_starts_;  // dataset index of each group's first sample
  std::shared_ptr<const restriction> restricted_;
  /// The last epochs' group order and window offsets (computed on first use; shared by copies).
  std::shared_ptr<grouped_cache> cache_;
};

}  // namespace pinfeed
