#pragma once
// Indexing remote shards, once per reader: from each shard's sidecar index when the server has one
// made with the same member keys (all asked for at once), else from the index cache when its
// entry still holds (one HEAD request), else by scanning the shard as it arrives (only its tar
// headers and labels are held; with whole shards, also its bytes while the cache has room: that
// copy is kept for the cache, so the first epoch need not fetch it again).

#include <cstdint>
#include <memory>
#include <vector>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "remote/blob.hpp"
#include "remote/location.hpp"
#include "remote/shard_set.hpp"
#include "remote/transfer_loop.hpp"

namespace pinfeed::loaders::remote {

struct s3_credentials;

struct indexed_shards {
  std::vector<remote_shard> shards;               ///< where, size and ETag of each
  std::vector<detail::shard_sample> entries;      ///< every sample, in shard order
  std::vector<std::uint64_t> samples;             ///< samples per shard
  std::vector<std::shared_ptr<const blob>> kept;  ///< whole-shard copies made while scanning (null where none)
  std::uint64_t shard_bytes = 0;                  ///< the shards' total size
};

/// Indexes the shards at `locations` (resolved to `where`) with the requests of `loop`. `keep_bytes`: how many bytes of
/// scanned shards may be kept whole for the cache (0: none; range reads). Throws
/// std::invalid_argument for shards without samples, fatal_error for a transport failure.
[[nodiscard]] indexed_shards index_shards(transfer_loop& loop, const std::vector<location>& locations,
                                          std::vector<endpoint> where,
                                          const std::shared_ptr<const s3_credentials>& creds, const shard_options& so,
                                          const remote_options& ro, std::uint64_t keep_bytes, request_counters& counters);

}  // namespace pinfeed::loaders::remote
