#pragma once
// Remote shards (`pinfeed bench remote`): the JPEG shard workload (RandomResizedCrop(224) + flip,
// the exact global shuffle) read from local files, from nginx on loopback, and through a proxy
// that adds latency to every request, side by side in one run.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace pinfeed::bench {

struct remote_bench_options {
  std::string data_dir = "/tmp/pinfeed-bench-data";  ///< the generated JPEG dataset lives here (kept)
  std::int64_t images = 512;
  double shard_mb = 4.0;             ///< target shard size
  std::size_t workers = 0;           ///< 0: one per hardware thread
  std::size_t batch = 64;
  int repeats = 3;                   ///< timed epochs (median), after one warm-up epoch
  int latency_ms = 20;               ///< added by the proxy to every request
  std::size_t requests_in_flight = 0;  ///< 0: the reader's default
  std::size_t read_ahead = 0;          ///< 0: the reader's default
};

/// JSON lines {bench: remote, mode: local | loopback | latency, images, median_s, images_per_s,
/// ratio_to_local, bytes_per_image (fetched per image in a timed epoch), shard_bytes_per_image,
/// index_bytes (the one indexing pass), requests_per_image, retries, requests_in_flight,
/// read_ahead, latency_ms} with the host fields. Needs nginx (Debian: nginx-light); without it the
/// remote rows say skipped.
void run_remote(const remote_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
