#pragma once
/// @file remote.hpp
/// Tar shards read over HTTP(S) or from S3-compatible object storage, through libcurl.
///
/// Locations: "http://host/path/train-000000.tar", "https://...", "s3://bucket/key". For s3:// the
/// credentials, region and endpoint come from the standard variables: AWS_ACCESS_KEY_ID,
/// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION (default us-east-1)
/// and AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) for MinIO-style endpoints, which are addressed
/// path-style (endpoint/bucket/key); without an endpoint, https://bucket.s3.REGION.amazonaws.com.
/// Requests are signed with AWS SigV4 by libcurl. Credentials never appear in logs or errors, and
/// neither do a URL's user information or query string.
///
/// Faults: connection errors, timeouts, stalls, HTTP 429/500/502/503/504 and short bodies are
/// retried with exponential backoff and full jitter, up to max_attempts; then a fatal_error names
/// the URL, the last status and the attempt count. HTTP 403/404 (and other 4xx) fail at once. A
/// shard whose size or ETag changes between reads is an error, not silently mixed data.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/remote_counters.hpp"
#include "pinfeed/loaders/shards.hpp"

namespace pinfeed::loaders {

/// The most shards in the window of a remote reader given none (shard_options::window_shards unset).
inline constexpr std::uint32_t kMaxDefaultWindow = 4;
/// The requests in flight of a reader given none (remote_options::requests_in_flight unset): from
/// the first, and the most that range reads adapt to.
inline constexpr std::size_t kMinRequestsInFlight = 64;
inline constexpr std::size_t kMaxRequestsInFlight = 1024;

struct remote_options {
  int max_attempts = 6;               ///< per request, the first one included
  double backoff_initial_ms = 50.0;   ///< the first retry waits a random time up to this, then doubling
  double backoff_max_ms = 2000.0;     ///< the most one wait may be
  double connect_timeout_s = 5.0;     ///< to open a connection
  double stall_timeout_s = 10.0;      ///< a transfer that moves no byte for this long is retried
  /// Requests running at once (1 to 1024), each on a connection of its own. All of a reader's
  /// requests run on one thread of its own (a libcurl multi handle), however many are in flight.
  /// Unset: kMinRequestsInFlight, and in range mode inside a loader as many as the link needs
  /// (Little's law: twice the samples taken per second times a request's latency, up to
  /// kMaxRequestsInFlight, a quarter of the open-file limit, and as many as keep the read-ahead
  /// within 256 MiB of samples of the shards' mean size), measured as the loader reads;
  /// remote_stats() tells how many now.
  std::optional<std::size_t> requests_in_flight{};
  /// Samples of the epoch's order read ahead of the one being read (loaders only), so that the
  /// requests in flight overlap their latency. Unset: twice the requests in flight, 128 at least.
  std::optional<std::size_t> read_ahead{};
  /// Whole-shard mode (the default; shard_options::window_shards unset or >= 1): bytes of shards
  /// held at once (besides a shard that a worker still decodes from after its eviction, one a
  /// worker at most), which also sizes the default window (a third of it, in shards). Shards
  /// are fetched whole along the epoch's order as room frees up; the ones the order has passed are
  /// evicted first, least recently used. A shard larger than the room there is has its samples
  /// range-read one by one instead, so any cap works and nothing waits for space. For reads
  /// without stalls, hold two windows of shards (this one's and the next).
  std::uint64_t cache_bytes = std::uint64_t{1} << 30;
  /// Whole-shard mode: keep the cached shards as files in this directory (created if missing)
  /// instead of in memory. Each file is unlinked as soon as it is made and mapped: its space shows
  /// in `df`, not in a listing, and is freed when the shard is evicted, when the reader goes, or
  /// when the process dies, so nothing is left behind.
  std::string cache_dir{};
  /// Keep the index built for a shard that has no sidecar index in this directory (created if
  /// missing; one small file a shard, kept across runs), so that the next reader of the same
  /// shard asks for its size and ETag (a HEAD request) instead of scanning it again. A shard whose
  /// size or ETag changed, or that has no ETag, is scanned anew. Empty: off.
  std::string index_cache_dir{};
  /// Run the transfer thread (named "pinfeed-fetch") as SCHED_BATCH on Linux: woken by a response,
  /// it waits for the running thread's time slice instead of preempting it, so decoders that keep
  /// every core busy are not interrupted once per response (each time a switch and a cache
  /// refill); it still gets its fair share of CPU, and an idle core runs it at once. The read-ahead
  /// covers the wait. Off: the thread keeps the process's policy.
  bool batch_scheduling = true;
  /// Run the transfer thread on this rank's CPUs near its GPU, as the loader's workers are (the
  /// node plan's rank_cpus, once a loader on a GPU has made the plan: pinfeed::this_node_plan();
  /// nothing changes where the plan has none). Off: where the operating system puts it.
  bool bind_to_plan = true;
};

/// True for locations starting with http://, https:// or s3://.
[[nodiscard]] bool is_remote_location(std::string_view location) noexcept;

/// A location as it may be printed: scheme, host and path, without user information or query.
[[nodiscard]] std::string redact_location(std::string_view location);

/// Expands "https://h/train-{000..127}.tar" (brace ranges, zero padding kept). For s3:// a final
/// path component with * or ? is matched against the objects under its prefix (ListObjectsV2).
/// Throws std::invalid_argument for a malformed pattern or one that matches nothing.
[[nodiscard]] std::vector<std::string> expand_remote_pattern(const std::string& pattern,
                                                             const remote_options& options = {});


/// Reads WebDataset tar shards over HTTP(S) or S3. Each shard is indexed once at construction:
/// from its sidecar index ("<shard>.idx", written by pinfeed pack or write_shard_index) when the
/// server has one made with the same member keys, else in one streaming pass over the shard as
/// it arrives, which holds only its tar headers and labels (with whole shards, also its bytes when
/// the cache has room for them: that copy stays in the cache). Then, two ways to read:
///   - shard.window_shards >= 1, or unset (whole-shard mode, the default): a shuffling loader
///     takes the shard-aware order (groups()), and the reader fetches whole shards ahead along it
///     into a cache of remote.cache_bytes (memory, or remote.cache_dir): each shard once per
///     epoch, one request per shard. Unset, the window is remote.cache_bytes / (3 x the largest
///     shard) shards, from 1 to 4 (with the default 1 GiB cache: 4 for shards of up to 85 MiB, 1
///     from 171 MiB); remote_stats() tells which.
///   - shard.window_shards == 0 (range mode): every sample's image is one range request, for the
///     exact global shuffle, the same order as local shards read with the default options.
///     Inside a loader the reader fetches the next read_ahead samples of the epoch's order ahead
///     of use, requests_in_flight at a time (by default as many as the latency needs), so it
///     works over a high-latency link; but a request per sample costs CPU on both ends and counts
///     against the store's request rate (S3: about 5,500 GETs/s per prefix).
/// The reader's requests run on one transfer thread (plus, in whole-shard mode, one that files
/// the shards that arrive into the cache); a sample a worker waits for is requested past the
/// requests_in_flight cap, so it never queues behind the read-ahead or whole-shard fetches.
/// Fields: image (varies) and "label" int64, as make_shard_reader. Corrupt samples are sample
/// errors (--on-error applies); transport failures after the retries are fatal_error.
[[nodiscard]] std::shared_ptr<image_reader> make_remote_shard_reader(const std::vector<std::string>& locations,
                                                                     shard_options shard = {},
                                                                     remote_options remote = {});

/// The counters of a reader made by make_remote_shard_reader (all zero for any other reader):
/// reader.fetch_counters(), or zeros.
[[nodiscard]] remote_counters remote_stats(const image_reader& reader);

}  // namespace pinfeed::loaders
