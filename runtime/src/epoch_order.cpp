#include "pinfeed/runtime/epoch_order.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <stdexcept>

#include "detail/parse_index.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed {
namespace {

/// Reads a non-negative integer variable; -1 when unset.
long env_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  const long x = detail::parse_index(v);
  if (x < 0)
    throw pinfeed::invalid_argument(std::string("environment variable ") + name + "='" + v +
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
      throw pinfeed::invalid_argument(std::string(l.name) + " environment is incomplete: " + l.rank + " and " + l.world +
                                  " must both be set (world >= 1)");
    if (rank >= world)
      throw pinfeed::invalid_argument(std::string(l.rank) + "=" + std::to_string(rank) + " is not below " + l.world + "=" +
                                  std::to_string(world));
    return {static_cast<int>(rank), static_cast<int>(world), static_cast<int>(env_number(l.local)), l.name};
  }
  return {};
}

namespace {

/// A keyed bijection of [0, n): a balanced Feistel network over 2 * half_bits bits (the domain is
/// under 4n), Philox as the round function, cycle-walking back into [0, n).
std::uint64_t feistel(std::uint64_t x, std::uint64_t n, int half_bits, const philox_stream& key,
                      std::uint32_t tweak) noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << half_bits) - 1;
  do {
    std::uint64_t l = x >> half_bits, r = x & mask;
    for (std::uint32_t round = 0; round < 6; ++round) {
      const philox_block b = philox4x32_10({{static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(r >> 32), round,
                                             tweak}},
                                           key.key_lo(), key.key_hi());
      const std::uint64_t f = ((static_cast<std::uint64_t>(b.v[1]) << 32) | b.v[0]) & mask;
      const std::uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << half_bits) | r;
  } while (x >= n);
  return x;
}

int half_bits_for(std::uint64_t n) noexcept {
  int h = 1;
  while ((std::uint64_t{1} << (2 * h)) < n) ++h;
  return h;
}

/// Philox substreams of the shard-aware shuffle's keys.
constexpr std::uint32_t kGlobalKey = 0xFEED, kGroupKey = 0xFEEE, kWindowKey = 0xFEEF;

}  // namespace

/// One epoch of a shard-aware shuffle: the groups in their epoch order and where each starts.
struct epoch_order::grouped_epoch {
  std::vector<std::uint64_t> order;  // group ids in epoch order
  std::vector<std::uint64_t> start;  // start[k]: global position of order[k]'s first sample; start[S] = n
};

struct epoch_order::grouped_cache {
  std::mutex mutex;
  std::vector<std::pair<std::uint32_t, std::shared_ptr<const grouped_epoch>>> epochs;  // the last few
};

epoch_order::epoch_order(std::uint64_t dataset_size, std::uint64_t seed, epoch_order_options o)
    : n_(dataset_size), seed_(seed), per_rank_(0), rank_(o.rank), world_(o.world), shuffle_(o.shuffle),
      drop_(o.drop_remainder), half_bits_(half_bits_for(dataset_size)), groups_(std::move(o.groups)) {
  if (rank_ < 0) {
    const distributed_env env = distributed_from_env();
    rank_ = env.rank;
    world_ = env.world;
  }
  if (world_ < 1) throw pinfeed::invalid_argument("epoch order: world size must be >= 1, got " + std::to_string(world_));
  if (rank_ >= world_)
    throw pinfeed::invalid_argument("epoch order: rank " + std::to_string(rank_) + " is not below world size " +
                                std::to_string(world_));
  per_rank_ = share(n_);
  if (per_rank_ == 0)
    throw pinfeed::invalid_argument("epoch order: " + std::to_string(n_) + " samples over " + std::to_string(world_) +
                                " ranks leaves rank " + std::to_string(rank_) + " nothing");
  if (groups_) {
    if (groups_->window == 0) throw pinfeed::invalid_argument("epoch order: a shard-aware shuffle needs a window of >= 1 group");
    std::uint64_t sum = 0;
    group_starts_.reserve(groups_->sizes.size());
    for (const std::uint64_t g : groups_->sizes) {
      group_starts_.push_back(sum);
      sum += g;
    }
    if (sum != n_)
      throw pinfeed::invalid_argument("epoch order: the " + std::to_string(groups_->sizes.size()) + " groups hold " +
                                  std::to_string(sum) + " samples, but the dataset has " + std::to_string(n_));
    cache_ = std::make_shared<grouped_cache>();
  }
}

std::uint64_t epoch_order::share(std::uint64_t total) const noexcept {
  const auto w = static_cast<std::uint64_t>(world_);
  return drop_ ? total / w : (total + w - 1) / w;
}

std::string epoch_order::kind() const {
  if (!shuffle_) return "sequential";
  if (!groups_) return "shuffle";
  return "shard-shuffle(groups=" + std::to_string(groups_->sizes.size()) + ",window=" +
         std::to_string(groups_->window) + ")";
}

std::uint64_t epoch_order::permute(std::uint32_t epoch, std::uint64_t i) const {
  if (groups_) return grouped_permute(epoch, i);
  return feistel(i, n_, half_bits_, philox_stream(seed_, epoch, 0, kGlobalKey), epoch);
}

std::shared_ptr<const epoch_order::grouped_epoch> epoch_order::grouped(std::uint32_t epoch) const {
  {
    std::lock_guard lock(cache_->mutex);
    for (const auto& [e, table] : cache_->epochs)
      if (e == epoch) return table;
  }
  // O(groups) per epoch, outside the lock; two threads may both build it, to the same result.
  auto table = std::make_shared<grouped_epoch>();
  const auto& sizes = groups_->sizes;
  const std::uint64_t S = sizes.size();
  const philox_stream key(seed_, epoch, 0, kGroupKey);
  const int hb = half_bits_for(S);
  table->order.resize(S);
  table->start.resize(S + 1);
  std::uint64_t pos = 0;
  for (std::uint64_t k = 0; k < S; ++k) {
    table->order[k] = feistel(k, S, hb, key, epoch);
    table->start[k] = pos;
    pos += sizes[table->order[k]];
  }
  table->start[S] = pos;
  std::lock_guard lock(cache_->mutex);
  if (cache_->epochs.size() >= 4) cache_->epochs.erase(cache_->epochs.begin());
  cache_->epochs.emplace_back(epoch, table);
  return table;
}

std::uint64_t epoch_order::grouped_permute(std::uint32_t epoch, std::uint64_t g) const {
  const auto table = grouped(epoch);
  const auto& start = table->start;
  const std::uint64_t S = table->order.size(), W = groups_->window;
  // The group at g (the last one starting at or before it: empty groups are skipped), its window,
  // and the window's span of positions.
  const auto k = static_cast<std::uint64_t>(std::upper_bound(start.begin(), start.begin() + S, g) - start.begin()) - 1;
  const std::uint64_t j = k / W, first = j * W, last = std::min(first + W, S);
  const std::uint64_t ws = start[first], span = start[last] - ws;
  const std::uint64_t u = feistel(g - ws, span, half_bits_for(span), philox_stream(seed_, epoch, j, kWindowKey), epoch);
  const std::uint64_t target = ws + u;
  const auto kk = static_cast<std::uint64_t>(
                      std::upper_bound(start.begin() + static_cast<std::ptrdiff_t>(first),
                                       start.begin() + static_cast<std::ptrdiff_t>(last), target) -
                      start.begin()) -
                  1;
  return group_starts_[table->order[kk]] + (target - start[kk]);
}

const epoch_order::restriction* epoch_order::restricted(std::uint32_t epoch) const noexcept {
  return restricted_ && restricted_->epoch == epoch ? restricted_.get() : nullptr;
}

std::uint64_t epoch_order::size(std::uint32_t epoch) const noexcept {
  const restriction* r = restricted(epoch);
  return r != nullptr ? r->per_rank : per_rank_;
}

std::uint64_t epoch_order::global_position(std::uint32_t epoch, std::uint64_t position) const noexcept {
  // Rank r takes the run [r * per, (r + 1) * per) of the epoch's positions; past the end they wrap
  // to its start (padding).
  const restriction* r = restricted(epoch);
  const std::uint64_t total = r != nullptr ? r->total : n_, per = r != nullptr ? r->per_rank : per_rank_;
  std::uint64_t q = static_cast<std::uint64_t>(rank_) * per + position;
  if (total == 0) return 0;
  if (q >= total) q %= total;
  if (r == nullptr) return q;
  const auto [i, off] = r->locate(q);
  return r->ranges[i].begin + off;
}

std::uint64_t epoch_order::index_at(std::uint32_t epoch, std::uint64_t position) const {
  const std::uint64_t g = global_position(epoch, position);
  return shuffle_ ? permute(epoch, g) : g;
}

void epoch_order::restrict(std::uint32_t epoch, std::vector<position_range> remaining) {
  auto r = std::make_shared<restriction>();
  r->epoch = epoch;
  std::uint64_t last_end = 0;
  for (std::size_t i = 0; i < remaining.size(); ++i) {
    const auto& x = remaining[i];
    if (x.begin >= x.end || x.end > n_ || (i > 0 && x.begin < last_end))
      throw pinfeed::invalid_argument("epoch order: remaining range " + std::to_string(i) + " [" + std::to_string(x.begin) +
                                  ", " + std::to_string(x.end) + ") is empty, past the dataset's " + std::to_string(n_) +
                                  " samples, or not after the range before it");
    r->starts.push_back(r->total);
    r->total += x.end - x.begin;
    last_end = x.end;
  }
  r->ranges = std::move(remaining);
  r->per_rank = share(r->total);
  restricted_ = std::move(r);
}

void epoch_order::unrestrict() noexcept { restricted_.reset(); }

std::vector<position_range> epoch_order::plan(std::uint32_t epoch) const {
  const restriction* r = restricted(epoch);
  if (r != nullptr) return r->ranges;
  return {{0, n_}};
}

std::vector<position_range> epoch_order::remaining_after(std::uint32_t epoch, std::uint64_t taken) const {
  const restriction whole{epoch, {{0, n_}}, {0}, n_, per_rank_};
  const restriction* r = restricted(epoch);
  if (r == nullptr) r = &whole;
  const std::uint64_t total = r->total, per = r->per_rank;
  std::vector<position_range> out;
  auto add = [&](std::uint64_t b, std::uint64_t e) {  // [b, e) of the plan's concatenation
    while (b < e) {
      const auto [i, off] = r->locate(b);
      const std::uint64_t len = std::min(e - b, r->ranges[i].end - r->ranges[i].begin - off);
      const std::uint64_t gb = r->ranges[i].begin + off;
      if (!out.empty() && out.back().end == gb) out.back().end += len;
      else out.push_back({gb, gb + len});
      b += len;
    }
  };
  const std::uint64_t t = std::min(taken, per);
  for (std::uint64_t rank = 0; rank < static_cast<std::uint64_t>(world_); ++rank) {
    const std::uint64_t begin = std::min(rank * per + t, total), end = std::min((rank + 1) * per, total);
    add(begin, end);
  }
  return out;
}

}  // namespace pinfeed
