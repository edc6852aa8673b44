#pragma once
// JPEG decoding, host path vs the host half of hybrid decoding (`pinfeed bench decode`).

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct decode_bench_options {
  /// Photos (PNG or JPEG; scripts/fetch-photos.sh puts the scikit-image sample photos there),
  /// cut into images of 500x375 (or 375x500) and encoded at each quality, 4:2:0 baseline.
  std::string photos_dir = "build/photos";
  std::size_t images = 200;
  std::vector<int> qualities{75, 90, 95};
  int repeats = 5;  ///< passes over the images, host path and host half in turn (medians reported)
};

/// One JSON line per quality: the CPU time per image (one thread) of the host path (the window
/// of rrc(224) decoded as the loader decodes it, resized to 224x224 and flipped as hflip draws)
/// and of the host half (pack_jpeg of the same window; the images it leaves to the host are
/// charged the host path's time), their ratio, the bytes each image puts into a slot (mean and
/// most), and how many images took each path. Where a GPU is usable, the device half's images/s
/// (unpack, IDCT, upsampling, colour) for a batch of all the images. And the entropy decoder's own
/// figures (loaders::jpeg_entropy_probe: the host half's walk, storing nothing): nanoseconds and,
/// where the CPU's cycle counter is readable, cycles per Huffman symbol, bits per symbol, symbols
/// per image, and the share of the host half spent outside the entropy decoder. Throws std::runtime_error when
/// the photos folder holds no photo big enough.
void run_decode_bench(const decode_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
