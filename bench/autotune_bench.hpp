#pragma once
// Self-tuning (`pinfeed bench autotune`): workers and prefetch set to auto against every setting
// of a grid (workers x prefetch, and requests in flight for remote shards), side by side in one
// run, on the article's synthetic pipeline, a JPEG folder and remote shards behind added latency.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct autotune_bench_options {
  std::string data_dir = "/tmp/pinfeed-bench-data";  ///< the generated JPEG dataset lives here (kept)
  std::int64_t images = 512;             ///< JPEGs of the folder and the shards
  std::int64_t synthetic_samples = 1024;  ///< 1024x1024 synthetic images per epoch (enough for the tuner to judge windows)
  std::size_t batch = 32;
  int epochs = 2;                        ///< timed epochs per run, after one untimed (the tuner's start)
  int rounds = 3;                        ///< every setting once a round, interleaved; a row's figure is its median
  int latency_ms = 20;                   ///< added to every remote request
  std::vector<std::size_t> workers;      ///< the grid's workers; empty: 1 to the hardware threads
  std::vector<std::size_t> prefetch = {1, 2, 4, 8};
  std::vector<std::size_t> in_flight = {16, 64};  ///< the remote grid's requests in flight
  /// Which workloads: synthetic, jpeg_folder, remote (needs nginx; Debian: nginx-light).
  std::vector<std::string> workloads = {"synthetic", "jpeg_folder", "remote"};
};

/// JSON lines, per workload: one {bench: autotune, workload, setting: "grid", workers, prefetch,
/// requests_in_flight (remote), images_per_s, rounds_images_per_s} per grid setting, one {setting:
/// "auto", chose_workers, chose_prefetch, reason, ...} for auto, and a summary {workload,
/// auto_images_per_s, best_images_per_s, best_setting, auto_over_best (>= 0.95 is the target)},
/// each with the host fields.
void run_autotune(const autotune_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
