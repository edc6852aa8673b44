#include "remote/shard_cache.hpp"

namespace pinfeed::loaders::remote {

shard_cache::shard_cache(std::vector<std::uint64_t> sizes, std::vector<std::uint32_t> shard_of, std::uint64_t cap,
                         std::uint64_t lookahead)
    : sizes_(std::move(sizes)), shard_of_(std::move(shard_of)), cap_(cap), lookahead_(lookahead), slots_(sizes_.size()) {}

void shard_cache::adopt(std::uint32_t s, std::shared_ptr<const blob> data) {
  slot& c = slots_.at(s);
  used_ += data->bytes().size();
  c.reserved = data->bytes().size();
  c.data = std::move(data);
  c.last_use = ++clock_;
}

void shard_cache::restart_walk(const order_view& o) {
  epoch_ = o.epoch;
  pass_ = o.pass;
  epoch_size_ = o.epoch_size;
  start_ = frontier_ = o.position;
  next_frontier_ = 0;
  wanted_.clear();
  for (auto& c : slots_) {
    c.pending = 0;
    c.queued = false;
    c.next_epoch = false;
  }
}

void shard_cache::want(std::uint32_t sh) {
  slot& c = slots_[sh];
  if (!c.data && !c.fetching && !c.queued) {
    wanted_.push_back(sh);
    c.queued = true;
  }
}

std::optional<std::uint32_t> shard_cache::walk(const order_view& o) {
  const std::uint64_t pos = o.position;
  // A new epoch, the same one restricted anew, a new pass over it, or restarted far from where
  // the walk is: nothing counted so far holds.
  const bool restarted = pos + 4 * lookahead_ + 4096 < start_ || pos > frontier_ + 4 * lookahead_ + 4096;
  if (o.epoch != epoch_ || o.epoch_size != epoch_size_ || o.pass != pass_ || restarted) restart_walk(o);
  while (frontier_ < pos + lookahead_) {
    const auto next = o.index_at(o.epoch, frontier_);
    if (!next || *next >= shard_of_.size()) break;
    const std::uint32_t sh = shard_of_[*next];
    ++slots_[sh].pending;
    want(sh);
    ++frontier_;
  }
  // Near the end of the epoch, on into the next one's first positions: its first window is then
  // on its way before the epoch turns (most trainers start the next epoch next).
  if (frontier_ >= o.epoch_size && o.epoch != ~0u) {
    while (o.epoch_size + next_frontier_ < pos + lookahead_) {
      const auto next = o.index_at(o.epoch + 1, next_frontier_);
      if (!next || *next >= shard_of_.size()) break;
      slots_[shard_of_[*next]].next_epoch = true;  // resident ones too: kept until that epoch starts
      want(shard_of_[*next]);
      ++next_frontier_;
    }
  }
  if (pos < start_ || pos >= frontier_) return std::nullopt;
  const auto mine = o.index_at(o.epoch, pos);
  if (!mine || *mine >= shard_of_.size()) return std::nullopt;
  return shard_of_[*mine];
}

std::vector<std::uint32_t> shard_cache::take_fetches() {
  std::vector<std::uint32_t> out;
  while (!wanted_.empty()) {
    const std::uint32_t sh = wanted_.front();
    slot& c = slots_[sh];
    const bool pointless = sizes_[sh] > cap_ || (c.pending == 0 && !c.next_epoch);
    if (!c.data && !c.fetching && !pointless) {
      if (!reserve(sh)) break;  // no room yet: the order of need is kept
      c.fetching = true;
      out.push_back(sh);
    }
    c.queued = false;
    wanted_.pop_front();
  }
  return out;
}

bool shard_cache::reserve(std::uint32_t sh) {
  const std::uint64_t need = sizes_[sh];
  if (need > cap_) return false;
  while (used_ + need > cap_) {
    std::optional<std::size_t> victim;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const slot& c = slots_[i];
      if (!c.data || c.pending > 0 || c.next_epoch) continue;  // absent, or still to be read
      if (!victim || c.last_use < slots_[*victim].last_use) victim = i;
    }
    if (!victim) return false;
    slot& v = slots_[*victim];
    v.data.reset();
    used_ -= v.reserved;
    v.reserved = 0;
  }
  used_ += need;
  slots_[sh].reserved = need;
  return true;
}

void shard_cache::arrived(std::uint32_t sh, std::shared_ptr<const blob> data) {
  slot& c = slots_[sh];
  c.fetching = false;
  if (data) {
    c.data = std::move(data);
    c.last_use = ++clock_;
  } else {
    release(sh);
  }
}

void shard_cache::release(std::uint32_t sh) noexcept {
  slot& c = slots_[sh];
  used_ -= c.reserved;
  c.reserved = 0;
}

void shard_cache::taken(std::optional<std::uint32_t> counted) noexcept {
  // The count is the one the read's position holds, which is not the sample's own shard when the
  // sample is a stand-in for a bad one.
  if (counted && slots_[*counted].pending > 0) --slots_[*counted].pending;
}

std::shared_ptr<const blob> shard_cache::use(std::uint32_t sh) {
  slot& c = slots_[sh];
  if (c.data) c.last_use = ++clock_;
  return c.data;
}

void shard_cache::clear() noexcept {
  for (auto& c : slots_) c.data.reset();
}

}  // namespace pinfeed::loaders::remote
