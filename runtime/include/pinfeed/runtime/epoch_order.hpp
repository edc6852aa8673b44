#pragma once
/// @file epoch_order.hpp
/// Which dataset index comes at each position of an epoch: sequential or shuffled per epoch, and
/// sharded over ranks. Every order is a pure function of (seed, epoch, rank, world size) that
/// needs O(1) memory whatever the dataset size (a keyed Feistel permutation, not a stored one).

#include <cstdint>
#include <string>

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
};

/// The order of one dataset under one seed. Cheap to copy; thread-safe.
class epoch_order {
 public:
  /// Throws std::invalid_argument for a rank outside [0, world), a world < 1, or an empty shard.
  epoch_order(std::uint64_t dataset_size, std::uint64_t seed, epoch_order_options options);

  /// Positions of this rank per epoch.
  [[nodiscard]] std::uint64_t size() const noexcept { return per_rank_; }
  /// The dataset index at this rank's `position` of `epoch` (position < size()).
  [[nodiscard]] std::uint64_t index_at(std::uint32_t epoch, std::uint64_t position) const noexcept;
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int world() const noexcept { return world_; }
  [[nodiscard]] bool shuffled() const noexcept { return shuffle_; }
  [[nodiscard]] bool drops_remainder() const noexcept { return drop_; }
  [[nodiscard]] std::uint64_t dataset_size() const noexcept { return n_; }

  /// The shuffled order's permutation of [0, n) for `epoch`: exposed for tests.
  [[nodiscard]] std::uint64_t permute(std::uint32_t epoch, std::uint64_t i) const noexcept;

 private:
  std::uint64_t n_, seed_, per_rank_;
  int rank_, world_;
  bool shuffle_, drop_;
  int half_bits_;  // the Feistel network works on 2 * half_bits_ bits
};

}  // namespace pinfeed
