#include "pinfeed/runtime/epoch_order.hpp"

#include <cstdlib>
#include <stdexcept>

#include "detail/parse_index.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed {
namespace {

/// Reads a non-negative integer variable; -1 when unset.
long env_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  const long x = detail::parse_index(v);
  if (x < 0)
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + v +
                                "' is not a non-negative integer (at most 2147483647)");
  return x;
}

/// The launchers whose environment pinfeed reads, in the order it looks: the one table behind
/// distributed_from_env() and local_rank_from_env().
struct launcher {
  const char *name, *rank, *world, *local;
};
constexpr launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

}  // namespace

int local_rank_from_env() {
  for (const auto& l : kLaunchers) {
    const long r = env_number(l.local);
    if (r >= 0) return static_cast<int>(r);
  }
  return -1;
}

distributed_env distributed_from_env() {
  for (const auto& l : kLaunchers) {
    const long rank = env_number(l.rank), world = env_number(l.world);
    if (rank < 0 && world < 0) continue;
    if (rank < 0 || world < 1)
      throw std::invalid_argument(std::string(l.name) + " environment is incomplete: " + l.rank + " and " + l.world +
                                  " must both be set (world >= 1)");
    if (rank >= world)
      throw std::invalid_argument(std::string(l.rank) + "=" + std::to_string(rank) + " is not below " + l.world + "=" +
                                  std::to_string(world));
    return {static_cast<int>(rank), static_cast<int>(world), static_cast<int>(env_number(l.local)), l.name};
  }
  return {};
}

epoch_order::epoch_order(std::uint64_t dataset_size, std::uint64_t seed, epoch_order_options o)
    : n_(dataset_size), seed_(seed), per_rank_(0), rank_(o.rank), world_(o.world), shuffle_(o.shuffle),
      drop_(o.drop_remainder), half_bits_(1) {
  if (rank_ < 0) {
    const distributed_env env = distributed_from_env();
    rank_ = env.rank;
    world_ = env.world;
  }
  if (world_ < 1) throw std::invalid_argument("epoch order: world size must be >= 1, got " + std::to_string(world_));
  if (rank_ >= world_)
    throw std::invalid_argument("epoch order: rank " + std::to_string(rank_) + " is not below world size " +
                                std::to_string(world_));
  const auto w = static_cast<std::uint64_t>(world_);
  per_rank_ = drop_ ? n_ / w : (n_ + w - 1) / w;
  if (per_rank_ == 0)
    throw std::invalid_argument("epoch order: " + std::to_string(n_) + " samples over " + std::to_string(world_) +
                                " ranks leaves rank " + std::to_string(rank_) + " nothing");
  while ((std::uint64_t{1} << (2 * half_bits_)) < n_) ++half_bits_;
}

std::uint64_t epoch_order::permute(std::uint32_t epoch, std::uint64_t i) const noexcept {
  // A balanced Feistel network over 2 * half_bits bits, keyed by (seed, epoch), with Philox as the
  // round function; cycle-walking maps it onto [0, n): the domain is under 4n, so under 4 walks
  // are expected.
  const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
  const philox_stream key(seed_, epoch, 0, 0xFEED);
  std::uint64_t x = i;
  do {
    std::uint64_t l = x >> half_bits_, r = x & mask;
    for (std::uint32_t round = 0; round < 6; ++round) {
      const philox_block b = philox4x32_10({{static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(r >> 32), round,
                                             epoch}},
                                           key.key_lo(), key.key_hi());
      const std::uint64_t f = ((static_cast<std::uint64_t>(b.v[1]) << 32) | b.v[0]) & mask;
      const std::uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << half_bits_) | r;
  } while (x >= n_);
  return x;
}

std::uint64_t epoch_order::index_at(std::uint32_t epoch, std::uint64_t position) const noexcept {
  // Rank r takes global positions r, r + world, r + 2 world, ...; past the end they wrap to the
  // start (padding).
  std::uint64_t g = position * static_cast<std::uint64_t>(world_) + static_cast<std::uint64_t>(rank_);
  if (g >= n_) g %= n_;
  return shuffle_ ? permute(epoch, g) : g;
}

}  // namespace pinfeed
