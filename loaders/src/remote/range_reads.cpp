#include "remote/range_reads.hpp"

#include <algorithm>
#include <chrono>

#include <sys/resource.h>

#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::loaders::remote {

std::size_t open_file_share() noexcept {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return kMaxRequestsInFlight;
  return std::clamp<std::size_t>(static_cast<std::size_t>(files.rlim_cur / 4), kMinRequestsInFlight, kMaxRequestsInFlight);
}

std::size_t in_flight_most(std::uint64_t mean_image_bytes, std::optional<std::size_t> read_ahead,
                           std::size_t open_files) noexcept {
  std::uint64_t most = std::clamp<std::uint64_t>(kReadAheadBytes / (2 * std::max<std::uint64_t>(1, mean_image_bytes)),
                                                 kMinRequestsInFlight, std::max(kMinRequestsInFlight, open_files));
  if (read_ahead) most = std::min<std::uint64_t>(most, std::max(kMinRequestsInFlight, *read_ahead));
  return static_cast<std::size_t>(most);
}

namespace {

std::uint64_t mean_image_bytes(const std::vector<detail::shard_sample>& entries) {
  std::uint64_t bytes = 0;
  for (const auto& e : entries) bytes += e.image.size;
  return std::max<std::uint64_t>(1, bytes / entries.size());
}

}  // namespace

range_reads::range_reads(shard_set& set, const remote_options& o)
    : set_(set), o_(o), mean_image_bytes_(mean_image_bytes(set.entries())) {
  set_depth(set_.loop().cap());
  if (o_.requests_in_flight) return;
  adapt_.emplace(in_flight_most(mean_image_bytes_, o_.read_ahead, open_file_share()));
}

std::span<const std::byte> range_reads::fetch(sample& s, const detail::shard_sample&, std::vector<std::byte>& storage,
                                              std::shared_ptr<const void>&) {
  const std::optional<order_cursor> order = s.order();
  std::future<std::vector<std::byte>> bytes = take(s.epoch(), s.index(), order ? order->pass() : 0);  // first: it may jump the queue
  if (order) read_ahead(*order);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
    std::vector<std::byte> spent = std::move(storage);  // the last sample's, done with
    storage = bytes.get();
    set_.loop().recycle(std::move(spent));
  } catch (const cancelled&) {
    throw destroyed_while_reading(s.origin());
  }
  set_.counters().wait_ns.fetch_add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
  return storage;
}

void range_reads::read_ahead(const order_cursor& order) {
  std::lock_guard lock(m_);
  if (adapt_) {
    transfer_loop& loop = set_.loop();
    if (const auto cap = adapt_->on_read(std::chrono::steady_clock::now(), loop.range_latency_s(), loop.cap(),
                                         [&loop] { return loop.take_held_back(); }))
      apply_cap(*cap);
  }
  const std::size_t depth = depth_.load(std::memory_order_relaxed);
  if (depth == 0) return;
  if (pending_.size() >= max_pending_) drop_other_epochs(pending_, order.epoch());  // restarts leave other epochs' reads behind
  walk_.step(order, depth, max_pending_, pending_.size(), [&](std::uint32_t epoch, std::uint64_t index) {
    const std::uint64_t id = key(epoch, index);
    if (index >= set_.entries().size() || pending_.count(id) != 0 || taken_.contains(id)) return false;
    pending_.emplace(id, pending{epoch, set_.load(index, /*urgent=*/false)});
    set_.counters().read_ahead.fetch_add(1, std::memory_order_relaxed);
    return true;
  });
}

std::size_t range_reads::depth_for(std::size_t in_flight) const {
  return o_.read_ahead.value_or(std::max<std::size_t>(2 * in_flight, 2 * kMinRequestsInFlight));
}

void range_reads::set_depth(std::size_t in_flight) {
  const std::size_t depth = depth_for(in_flight);
  depth_.store(depth, std::memory_order_relaxed);
  max_pending_ = pending_for(depth);
}

void range_reads::apply_cap(std::size_t n) {
  set_.loop().set_cap(n);  // (within in_flight_most(): the controller takes no more)
  set_depth(n);
}

std::future<std::vector<std::byte>> range_reads::take(std::uint32_t epoch, std::uint64_t index, std::uint64_t pass) {
  const std::uint64_t id = key(epoch, index);
  std::lock_guard lock(m_);
  taken_.remember(id, pass, 4 * max_pending_);
  const auto it = pending_.find(id);
  if (it != pending_.end()) {
    auto f = std::move(it->second.bytes);
    pending_.erase(it);
    return f;
  }
  return set_.load(index, /*urgent=*/true);
}

void taken_samples::remember(std::uint64_t id, std::uint64_t pass, std::size_t most) {
  if (pass != pass_) {
    ids_.clear();
    order_.clear();
    pass_ = pass;
  }
  if (!ids_.insert(id).second) return;
  order_.push_back(id);
  while (order_.size() > most) {
    ids_.erase(order_.front());
    order_.pop_front();
  }
}

void range_reads::limit_memory(std::uint64_t bytes) {
  std::lock_guard lock(m_);
  if (!adapt_ || o_.read_ahead) return;  // fixed requests in flight, or a fixed read-ahead: nothing adapts
  // The most requests in flight whose read-ahead (memory(): its pending answers) fits.
  const std::uint64_t samples = bytes / mean_image_bytes_;
  std::size_t most = adapt_->most();
  while (most > kMinRequestsInFlight && pending_for(depth_for(most)) > samples) --most;
  if (const auto cap = adapt_->limit(most, set_.loop().cap())) apply_cap(*cap);
}

memory_use range_reads::memory() const {
  // The answers pending at once: up to four read-aheads of the deepest read-ahead (with the
  // requests in flight adapting: kReadAheadBytes of samples at most), of the shards' mean sample.
  const std::size_t in_flight = adapt_ ? adapt_->most() : set_.loop().cap();
  return {"read-ahead (remote shards, range reads)", pending_for(depth_for(in_flight)) * mean_image_bytes_};
}

void range_reads::add_counters(remote_counters& c) const {
  c.read_ahead_depth = depth_.load(std::memory_order_relaxed);
}

}  // namespace pinfeed::loaders::remote
