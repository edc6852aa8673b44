#include "remote/whole_shards.hpp"

#include <chrono>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/stats.hpp"
#include "remote/retry.hpp"

namespace pinfeed::loaders::remote {
namespace {

std::vector<std::uint64_t> sizes_of(const shard_set& set) {
  std::vector<std::uint64_t> out;
  for (const auto& sh : set.shards()) out.push_back(sh.size);
  return out;
}

std::vector<std::uint32_t> shards_of(const shard_set& set) {
  std::vector<std::uint32_t> out;
  for (const auto& e : set.entries()) out.push_back(e.shard);
  return out;
}

}  // namespace

whole_shards::whole_shards(shard_set& set, const remote_options& o, std::uint32_t window, std::uint64_t lookahead,
                           std::vector<std::shared_ptr<const blob>> kept)
    : set_(set), o_(o), window_(window), cache_(sizes_of(set), shards_of(set), o.cache_bytes, lookahead) {
  for (std::uint32_t s = 0; s < kept.size(); ++s)
    if (kept[s]) cache_.adopt(s, std::move(kept[s]));
}

whole_shards::~whole_shards() {
  completions_.shutdown();  // every answer handed over is filed (the transfer loop stopped before)
  std::lock_guard lock(m_);
  cache_.clear();  // a directory cache's files go with their shards
}

void whole_shards::stop() noexcept {
  {
    std::lock_guard lock(m_);  // wakes reads waiting for a shard (none in a loader's life)
  }
  cv_.notify_all();
}

std::span<const std::byte> whole_shards::fetch(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                               std::shared_ptr<const void>& held) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const blob> data;
  {
    const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
    std::unique_lock lock(m_);
    try {
      std::optional<std::uint32_t> counted;
      if (const auto order = s.order()) {
        counted = cache_.walk(*order);
        for (const std::uint32_t sh : cache_.take_fetches()) {
          start_fetch(sh, /*urgent=*/false);
          set_.counters().read_ahead.fetch_add(1, std::memory_order_relaxed);
        }
      }
      data = acquire(e.shard, lock);
      cache_.taken(counted);  // once no sample is pending, the shard may go
    } catch (const cancelled&) {  // a fetch could not be queued: the reader is going
      throw destroyed_while_reading(s.origin());
    }
  }
  std::span<const std::byte> bytes;
  if (data) {
    bytes = data->bytes().subspan(e.image.offset, e.image.size);
    held = std::move(data);
  } else {
    set_.counters().streamed.fetch_add(1, std::memory_order_relaxed);
    const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
    try {
      storage = set_.load(s.index(), /*urgent=*/true).get();
    } catch (const cancelled&) {
      throw destroyed_while_reading(s.origin());
    }
    bytes = storage;
  }
  set_.counters().wait_ns.fetch_add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
  return bytes;
}

std::shared_ptr<const blob> whole_shards::acquire(std::uint32_t sh, std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (set_.stopping()) throw fatal_error("remote shards: the reader was destroyed while a shard was read");
    set_.rethrow_failure();
    if (auto data = cache_.use(sh)) return data;
    if (cache_.at(sh).fetching) {
      cv_.wait(lock, [&] { return !cache_.at(sh).fetching || set_.stopping(); });
      continue;
    }
    if (!cache_.reserve(sh)) return nullptr;
    cache_.begin_fetch(sh);
    start_fetch(sh, /*urgent=*/true);
  }
}

void whole_shards::start_fetch(std::uint32_t sh, bool urgent) {
  try {
    const remote_shard& d = set_.shards()[sh];
    request q;
    q.expect_total = d.size;
    q.expect_etag = set_.expected_etag(sh);
    // The answer is filed on completions_, not on the transfer loop: writing a shard to the cache
    // directory (or waiting for m_) must not hold up the other transfers.
    set_.loop().submit(d.where, q, [this, sh](response&& r, std::exception_ptr error) {
      std::shared_ptr<response> answer;
      try {
        answer = std::make_shared<response>(std::move(r));
        completions_.post([this, sh, answer, error] { arrived(sh, std::move(*answer), error); });
      } catch (...) {  // no memory to hand it over: here, then
        arrived(sh, answer ? std::move(*answer) : std::move(r), error);
      }
    }, urgent);
  } catch (...) {  // not queued: the room is free again
    cache_.arrived(sh, nullptr);
    throw;
  }
  set_.counters().shards.fetch_add(1, std::memory_order_relaxed);
}

void whole_shards::arrived(std::uint32_t sh, response&& r, std::exception_ptr failure) noexcept {
  std::shared_ptr<const blob> data;
  std::exception_ptr error;
  try {
    if (failure) std::rethrow_exception(failure);
    const remote_shard& d = set_.shards()[sh];
    if (r.body.size() != d.size)
      throw fatal_error(changed_message(d.where, "size " + std::to_string(d.size) + " then " +
                                                     std::to_string(r.body.size()) + " bytes"));
    set_.note_etag(sh, r.etag);
    data = std::make_shared<const blob>(std::move(r.body), o_.cache_dir, sh);
  } catch (const cancelled&) {
  } catch (const fatal_error&) {
    error = std::current_exception();
  } catch (const std::exception& ex) {  // the cache directory, memory: not the shard's fault, but fatal
    error = std::current_exception();
    try {
      error = std::make_exception_ptr(fatal_error(std::string("remote shards: ") + ex.what()));
    } catch (...) {
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (error) set_.record_failure(error);
  {
    std::lock_guard lock(m_);
    cache_.arrived(sh, std::move(data));
  }
  cv_.notify_all();
}

void whole_shards::add_counters(remote_counters& c) const {
  c.cache_bytes = o_.cache_bytes;
  c.window_shards = window_;
}

}  // namespace pinfeed::loaders::remote
