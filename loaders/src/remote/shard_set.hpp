#pragma once
// What both ways of reading remote shards share: the shards as indexed (where, size, ETag), their
// samples, the transfer loop that requests their bytes, the counters, and the first failure that
// stops the reader. The read-aheads walk a sample's order_cursor (sample::order()), or in tests
// any type with its members: epoch(), pass(), position(), epoch_size(), index_at(epoch, position).

#include <atomic>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/source.hpp"
#include "remote/http.hpp"
#include "remote/transfer_loop.hpp"

namespace pinfeed::loaders::remote {

struct remote_shard {
  endpoint where;
  std::uint64_t size = 0;
  std::string etag;  ///< as first seen (under the set's lock once reading starts)
};

class shard_set {
 public:
  /// `entries` (every sample, in shard order) must outlive the set.
  shard_set(std::vector<remote_shard> shards, const std::vector<detail::shard_sample>& entries, transfer_loop& loop,
            request_counters& counters);

  [[nodiscard]] const std::vector<remote_shard>& shards() const noexcept { return shards_; }
  [[nodiscard]] const std::vector<detail::shard_sample>& entries() const noexcept { return entries_; }
  [[nodiscard]] transfer_loop& loop() noexcept { return loop_; }
  [[nodiscard]] request_counters& counters() noexcept { return counters_; }

  /// The image bytes of sample `index`, checked against its shard as indexed (`urgent`: before the
  /// read-ahead). Once one request has failed for good, later ones fail with its error.
  [[nodiscard]] std::future<std::vector<std::byte>> load(std::uint64_t index, bool urgent);
  /// The ETag a shard had when first seen; a later response with another one is an error.
  [[nodiscard]] std::string expected_etag(std::uint32_t s);
  void note_etag(std::uint32_t s, const std::string& etag);
  /// The first request that failed for good stops the reader: every later read rethrows it, and
  /// the requests not yet running end with it.
  void record_failure(std::exception_ptr error) noexcept;
  void rethrow_failure();
  /// The reader is going: failures from now on are its own doing, not recorded.
  void stop() noexcept { stopping_.store(true); }
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(); }

 private:
  std::vector<remote_shard> shards_;
  const std::vector<detail::shard_sample>& entries_;
  transfer_loop& loop_;
  request_counters& counters_;
  std::mutex etag_m_;
  std::mutex failed_m_;
  std::exception_ptr failed_;  ///< under failed_m_
  std::atomic<bool> failed_flag_{false};
  std::atomic<bool> stopping_{false};
};

/// How a sample's bytes are got: whole shards into a cache, or a range request per sample.
class fetch_strategy {
 public:
  virtual ~fetch_strategy() = default;
  /// Sample s's (entry e's) image bytes: a view into `storage`, or into memory that `held` keeps.
  /// Throws fatal_error when the reader stopped (a failure, or its destruction).
  virtual std::span<const std::byte> fetch(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                           std::shared_ptr<const void>& held) = 0;
  /// Its share of the counters (cache size, window, requests in flight, read-ahead depth).
  virtual void add_counters(remote_counters& c) const = 0;
  /// The most memory it holds (the shard cache, or the read-ahead's answers), named.
  [[nodiscard]] virtual memory_use memory() const = 0;
  /// Keeps within `bytes` where it adapts (see source::limit_memory). Default: it does not.
  virtual void limit_memory(std::uint64_t bytes) { (void)bytes; }
  /// The reader is going: wake every read that waits. The transfer loop stops after this.
  virtual void stop() noexcept = 0;
};

/// "remote shards: the reader was destroyed while <origin> was read".
[[nodiscard]] fatal_error destroyed_while_reading(const std::string& origin);

}  // namespace pinfeed::loaders::remote
