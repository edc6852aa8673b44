#pragma once
// Pipeline throughput (`pinfeed bench pipeline`): the article's synthetic pipeline, a JPEG folder and
// the same JPEGs in tar shards through RandomResizedCrop(224) + flip, and a bare full-size decode
// of the same files for the per-core comparison.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct pipeline_bench_options {
  std::string data_dir = "/tmp/pinfeed-bench-data";  ///< the generated JPEG dataset lives here (kept)
  std::int64_t images = 512;             ///< JPEGs of about 500x375 at quality 90
  std::int64_t synthetic_samples = 256;  ///< 1024x1024 synthetic images per epoch
  std::size_t workers = 0;               ///< 0: one per hardware thread
  std::size_t batch = 64;
  int repeats = 3;
  /// SIMD levels to measure at, one after another (scalar, avx2, avx512, all); empty: the level in
  /// use. Rows carry the level as "simd".
  std::vector<std::string> simd;
};

/// JSON lines {bench, workload, workers, images, median_s, images_per_s, images_per_s_per_worker};
/// workloads: synthetic_article, jpeg_folder_rrc_flip, jpeg_shards_rrc_flip, and per core (1
/// worker): jpeg_folder_rrc_flip_1worker and bare_decode_full (TurboJPEG, files in memory), plus
/// their ratio.
void run_pipeline(const pipeline_bench_options& options, std::ostream& out);

/// Creates (or reuses) the JPEG dataset: <dir>/jpeg/class_<k>/<i>.jpg and <dir>/shards/train-*.tar.
void ensure_jpeg_dataset(const std::string& dir, std::int64_t images);

}  // namespace pinfeed::bench
