// remote_counters as JSON (remote_counters.hpp); built with or without libcurl.
#include <nlohmann/json.hpp>

#include "pinfeed/loaders/remote.hpp"

namespace pinfeed::loaders {

std::string to_json(const remote_counters& c) {
  const nlohmann::ordered_json j = {
      {"requests", c.requests},           {"retries", c.retries},
      {"bytes", c.bytes},                 {"shard_bytes", c.shard_bytes},
      {"wait_ms", c.wait_ms},             {"read_ahead", c.read_ahead},
      {"shards", c.shards},               {"streamed", c.streamed},
      {"sidecars", c.sidecars},           {"index_cached", c.index_cached},
      {"window_shards", c.window_shards}, {"cache_bytes", c.cache_bytes},
      {"requests_in_flight", c.requests_in_flight}, {"read_ahead_depth", c.read_ahead_depth}};
  return j.dump();
}

remote_counters remote_stats(const image_reader& reader) { return reader.fetch_counters().value_or(remote_counters{}); }

bool is_remote_location(std::string_view l) noexcept {
  return l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0 || l.rfind("s3://", 0) == 0;
}

}  // namespace pinfeed::loaders
