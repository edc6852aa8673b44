#pragma once
// Whole-shard reads (the default): shards fetched whole ahead of use, along the epoch's order, into
// a cache of remote_options::cache_bytes (memory, or files of cache_dir); a sample is a view into
// its cached shard. A shard that has no room is range-read sample by sample: nothing waits for
// space. The answers are filed on a thread of their own, never on the transfer loop.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "remote/shard_cache.hpp"
#include "remote/shard_set.hpp"
#include "remote/task_thread.hpp"

namespace pinfeed::loaders::remote {

class whole_shards final : public fetch_strategy {
 public:
  /// `window`: the shards a shuffling loader mixes at once; `lookahead`: the positions of the
  /// order walked past a read; `kept`: copies of shards made while indexing (null where none),
  /// within the cap, made resident.
  whole_shards(shard_set& set, const remote_options& o, std::uint32_t window, std::uint64_t lookahead,
               std::vector<std::shared_ptr<const blob>> kept);
  ~whole_shards() override;

  std::span<const std::byte> fetch(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                   std::shared_ptr<const void>& held) override;
  void add_counters(remote_counters& c) const override;
  [[nodiscard]] memory_use memory() const override {
    return {"shard cache (remote shards, remote_options::cache_bytes)", o_.cache_bytes};
  }
  void stop() noexcept override;

 private:
  /// Shard sh resident (fetched now when neither resident nor on its way), or null when the cache
  /// has no room for it. Rethrows the failure that stopped the reader. Under m_.
  std::shared_ptr<const blob> acquire(std::uint32_t sh, std::unique_lock<std::mutex>& lock);
  /// Fetches shard sh whole; its bytes are reserved. Under m_.
  void start_fetch(std::uint32_t sh, bool urgent);
  /// The end of a fetch, on completions_: resident, or its room free again; waiting reads woken.
  void arrived(std::uint32_t sh, response&& r, std::exception_ptr failure) noexcept;

  shard_set& set_;
  remote_options o_;
  std::uint32_t window_;
  std::mutex m_;
  std::condition_variable cv_;
  shard_cache cache_;  ///< under m_
  task_thread completions_{"pinfeed-cache"};
};

}  // namespace pinfeed::loaders::remote
