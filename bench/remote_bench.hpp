#pragma once
// Remote shards (`pinfeed bench remote`): the JPEG shard workload (RandomResizedCrop(224) + flip)
// read from local files, from nginx on loopback, and through a proxy that adds latency to every
// request, side by side in one run; each with per-sample range reads (the exact global shuffle)
// and with whole shards through the cache (the shard-aware shuffle).

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
  /// Whole-shard rows: the shard-aware shuffle's window (0: the remote reader's default, a third
  /// of the cache in shards, at most 4).
  std::uint32_t window_shards = 0;
  /// Whole-shard rows: the cache (0: three windows of 4 shards, or of window_shards: far less than
  /// the dataset, as for a real one, so that every epoch fetches every shard again; the default
  /// 1 GiB would hold the whole bench dataset after the first epoch).
  double cache_mb = 0;
  /// nginx and the proxy run SCHED_BATCH: they stand for servers on other hosts, which take no
  /// CPU from the loader, so here they take their share but do not preempt a decoder per request.
  /// (nginx also keeps its files open, open_file_cache, as a production server does.)
  bool batch_servers = true;
  bool batch_fetch = true;             ///< the remote readers' remote_options::batch_scheduling
};

/// JSON lines {bench: remote, mode: local | loopback | latency, read: range | whole (per-sample
/// range reads with the exact global shuffle, or whole shards through the cache with the
/// shard-aware shuffle), default_read (true for whole: the remote readers' default), images, median_s, images_per_s, ratio_to_local (the median of
/// ratios_to_local: each round's local epoch of the same order over this row's epoch; the rows'
/// epochs run interleaved, one of each a round), bytes_per_image (fetched per image in a timed
/// epoch), shard_bytes_per_image, bytes_ratio (the two divided), index_bytes (indexing, from the
/// sidecar indexes), requests_per_image, retries, fetch_wait_ms_per_image, requests_in_flight and
/// read_ahead (range rows: samples read ahead) as the readers had them at the end,
/// adaptive_in_flight (no --requests-in-flight: range reads adapt it), window_shards (as the readers took it), cache_bytes, streamed, latency_ms, batch_fetch, batch_servers} with the host fields. Needs nginx (Debian: nginx-light); without it the
/// remote rows say skipped.
void run_remote(const remote_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
