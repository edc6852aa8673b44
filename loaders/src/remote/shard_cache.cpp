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

void shard_cache::restart_walk(std::uint32_t epoch, std::uint64_t pass, std::uint64_t epoch_size, std::uint64_t position) {
  epoch_ = epoch;
  pass_ = pass;
  epoch_size_ = epoch_size;
  start_ = frontier_ = position;
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
