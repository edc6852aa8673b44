#pragma once
/// @file remote_counters.hpp
/// What the remote reads of a reader have cost so far (image_reader::fetch_counters()).

#include <cstdint>
#include <string>

namespace pinfeed::loaders {

struct remote_counters {
  std::uint64_t requests = 0;     ///< requests answered (every attempt counts)
  std::uint64_t retries = 0;      ///< attempts after a retryable failure
  std::uint64_t bytes = 0;        ///< body bytes received
  double wait_ms = 0.0;           ///< time readers spent waiting for a sample's bytes
  std::uint64_t read_ahead = 0;   ///< samples (range mode) or shards (whole-shard mode) queued ahead of use
  std::uint64_t shards = 0;       ///< whole-shard fetches (whole-shard mode)
  std::uint64_t streamed = 0;     ///< samples range-read because the cache had no room for their shard
  std::uint64_t sidecars = 0;     ///< shards indexed from their sidecar index instead of fetched whole
  std::uint64_t index_cached = 0; ///< shards indexed from remote_options::index_cache_dir
  std::uint64_t shard_bytes = 0;  ///< the shards' total size
  std::uint64_t cache_bytes = 0;  ///< the cache's cap (whole-shard mode; 0 in range mode)
  std::uint32_t window_shards = 0;
  std::uint64_t requests_in_flight = 0;  ///< the cap on requests at once, now (adapted unless given)
  std::uint64_t read_ahead_depth = 0;    ///< samples read ahead of the one read, now (range mode)
};

/// The counters as one JSON object, every member under its own name (the tool's and the doctor's
/// reports, the benches' rows).
[[nodiscard]] std::string to_json(const remote_counters& c);

}  // namespace pinfeed::loaders
