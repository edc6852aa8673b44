#include "pipeline_bench.hpp"

#include "bench_rows.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace fs = std::filesystem;

namespace pinfeed::bench {
namespace {

/// Seconds for one epoch of `src`, median of `repeats` (one warm-up epoch first).
double epoch_seconds(const std::shared_ptr<source>& src, std::size_t workers, std::size_t batch, int repeats) {
  loader_options o;
  o.batch_size = batch;
  o.workers = workers;
  o.prefetch = 4;
  o.device = "cpu";
  loader l(src, o);
  std::vector<double> t;
  for (int r = 0; r <= repeats; ++r) {
    l.start_epoch(static_cast<std::uint32_t>(r));
    const auto t0 = std::chrono::steady_clock::now();
    while (auto b = l.next()) {
    }
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_of(t);
}

void emit(std::ostream& out, const std::string& workload, std::size_t workers, std::int64_t images, double seconds) {
  out << with_host({{"bench", "pipeline"},
                     {"workload", workload},
                     {"workers", workers},
                     {"images", images},
                     {"median_s", seconds},
                     {"images_per_s", images / seconds},
                     {"images_per_s_per_worker", images / seconds / static_cast<double>(workers)}})
             .dump()
      << std::endl;
}

}  // namespace

void ensure_jpeg_dataset(const std::string& dir, std::int64_t images) {
  const fs::path root = fs::path(dir) / "jpeg";
  const fs::path marker = fs::path(dir) / ("ready-" + std::to_string(images));
  if (fs::exists(marker)) return;
  fs::remove_all(dir);
  constexpr int kClasses = 10;
  for (int c = 0; c < kClasses; ++c) fs::create_directories(root / ("class_" + std::to_string(c)));
  philox_stream rng(7, 0, 0);
  for (std::int64_t i = 0; i < images; ++i) {
    // Photo-like content at ImageNet-like sizes: smooth gradients, shapes and a little noise.
    const int h = 360 + static_cast<int>(rng.below(31)), w = 480 + static_cast<int>(rng.below(41));
    cv::Mat m(h, w, CV_8UC3);
    const int a = static_cast<int>(rng.below(256)), b = static_cast<int>(rng.below(256));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const int n = static_cast<int>(rng.below(24));
        m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x * 255 / w + a + n) & 255),
                                          static_cast<uchar>((y * 255 / h + b + n) & 255),
                                          static_cast<uchar>(((x ^ y) + n) & 255));
      }
    cv::circle(m, {w / 2, h / 2}, 40 + static_cast<int>(rng.below(100)), cv::Scalar(20, 200, 90), -1);
    const fs::path p = root / ("class_" + std::to_string(i % kClasses)) / (std::to_string(i) + ".jpg");
    const auto jpeg = loaders::encode_jpeg({m.data, m.total() * 3}, w, h, 90);
    std::ofstream f(p, std::ios::binary);
    if (!f.write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size())))
      throw std::runtime_error("bench pipeline: cannot write '" + p.string() + "'");
  }
  fs::create_directories(fs::path(dir) / "shards");
  (void)loaders::write_shards(loaders::list_image_folder(root.string()).files, (fs::path(dir) / "shards" / "train").string(),
                              64u << 20);
  std::ofstream(marker) << images << "\n";
}

namespace {

/// Every workload once, at the SIMD level in use.
void run_pipeline_once(const pipeline_bench_options& o, std::ostream& out) {
  const std::size_t workers = o.workers ? o.workers : std::max(1u, std::thread::hardware_concurrency());

  // (a) the article's synthetic pipeline (host tail: float CHW out, as a CPU-only run produces it)
  auto synthetic = std::make_shared<loaders::pipeline_source>(
      loaders::make_synthetic_source({static_cast<std::uint64_t>(o.synthetic_samples), 1024, 1024, 1000}),
      loaders::parse_pipeline("crop(256),mask(0.25),ycbcr,scale"));
  emit(out, "synthetic_article", workers, o.synthetic_samples, epoch_seconds(synthetic, workers, o.batch, o.repeats));

  // (b) JPEG folder and (c) the same JPEGs in shards, RandomResizedCrop(224) + flip, uint8 out
  const auto files = loaders::list_image_folder((fs::path(o.data_dir) / "jpeg").string()).files;
  const auto steps = loaders::parse_pipeline("rrc(224),hflip");
  auto folder = std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files), steps);
  const auto shard_paths = loaders::expand_shard_pattern((fs::path(o.data_dir) / "shards" / "train-*.tar").string());
  auto shards = std::make_shared<loaders::pipeline_source>(loaders::make_shard_reader(shard_paths), steps);
  const auto n = static_cast<std::int64_t>(files.size());
  emit(out, "jpeg_folder_rrc_flip", workers, n, epoch_seconds(folder, workers, o.batch, o.repeats));
  emit(out, "jpeg_shards_rrc_flip", workers, n, epoch_seconds(shards, workers, o.batch, o.repeats));

  // Per core: the pipeline on one worker vs a bare full-size decode of the same bytes.
  const double one = epoch_seconds(folder, 1, o.batch, o.repeats);
  emit(out, "jpeg_folder_rrc_flip_1worker", 1, n, one);
  // The same with libjpeg-turbo's own Huffman decoder in place of pinfeed's.
  loaders::decode_options libjpeg_huffman;
  libjpeg_huffman.huffman = loaders::decode_options::huffman_decoder::libjpeg;
  auto folder_libjpeg =
      std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files, libjpeg_huffman), steps);
  const double one_libjpeg = epoch_seconds(folder_libjpeg, 1, o.batch, o.repeats);
  emit(out, "jpeg_folder_rrc_flip_1worker_libjpeg_huffman", 1, n, one_libjpeg);
  out << with_host({{"bench", "pipeline"}, {"workload", "pinfeed_huffman_over_libjpeg_huffman"}, {"ratio", one_libjpeg / one}}).dump()
      << std::endl;
  std::vector<std::vector<std::byte>> encoded(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) loaders::read_file(files[i].path, encoded[i]);
  std::vector<std::byte> pixels;
  const auto bare_decode = [&](const loaders::decode_options& d) {
    std::vector<double> t;
    for (int r = 0; r <= o.repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& e : encoded) (void)loaders::decode_image(e, pixels, d, "bench");
      if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return median_of(t);
  };
  // The per-core reference: TurboJPEG's tjDecompress2 (libjpeg-turbo's Huffman decoder).
  const double bare = bare_decode(libjpeg_huffman);
  emit(out, "bare_decode_full", 1, n, bare);
  emit(out, "bare_decode_full_pinfeed_huffman", 1, n, bare_decode({}));
  out << with_host({{"bench", "pipeline"}, {"workload", "rrc_flip_per_core_over_bare_decode"}, {"ratio", bare / one}}).dump()
      << std::endl;
}

}  // namespace

void run_pipeline(const pipeline_bench_options& o, std::ostream& out) {
  const auto levels = simd_levels(o.simd);
  ensure_jpeg_dataset(o.data_dir, o.images);
  for_each_simd_level(levels, [&] { run_pipeline_once(o, out); });
}

}  // namespace pinfeed::bench
