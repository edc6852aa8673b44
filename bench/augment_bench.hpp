#pragma once
// The augmentation steps' cost (`pinfeed bench augment`): each op's microseconds per 224x224 RGB
// image on one thread, and a training recipe's images/s over the generated JPEG dataset.
// bench/compare/run_augment_compare.sh times torchvision v2 on the same images beside it.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct augment_bench_options {
  std::string data_dir = "build/bench-data";  ///< the generated JPEG dataset (ensure_jpeg_dataset)
  std::string photos_dir = "build/photos";    ///< a photo to cut the 224x224 image from (else made)
  std::int64_t images = 512;
  std::size_t workers = 0;  ///< 0: one per hardware thread
  std::size_t batch = 64;
  int repeats = 5;
  double seconds = 0.2;  ///< timed per op and repeat
  std::vector<std::string> ops;  ///< spellings; empty: every op at a middle magnitude
  std::string recipe =
      "rrc(224),hflip,trivial_augment,normalize(0.485,0.456,0.406,0.229,0.224,0.225),random_erasing(0.25)";
  bool run_recipe = true;
  /// cpu: the host ops one thread, and the recipe on a CPU loader. cuda: the device ops on batches
  /// of `batch` images (augment_batch_device), and the recipe (device_recipe) decoded and augmented
  /// on the GPU against the same recipe on the host, both on CUDA loaders; a row saying it skipped
  /// where no CUDA device is usable.
  std::string device = "cpu";
  std::string device_recipe = "rrc(224),hflip,trivial_augment,normalize(0.485,0.456,0.406,0.229,0.224,0.225)";
};

/// The ops timed by default, each at a middle magnitude (the warps with both interpolations).
[[nodiscard]] std::vector<std::string> default_augment_ops();

/// JSON lines: {bench: augment, op, us_per_image (median of repeats), repeats} per op, then
/// {bench: augment, workload: recipe, transforms, workers, images, images_per_s} (median of epochs).
/// With device cuda: {bench: augment, device: cuda, op, batch, us_per_image} per op with a device
/// form, then {bench: augment, device: cuda, workload: recipe, host_images_per_s,
/// device_images_per_s, speedup, same_checksums}; or {bench: augment, device: cuda, skipped, reason}.
void run_augment_bench(const augment_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
