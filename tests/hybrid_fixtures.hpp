#pragma once
// A folder of JPEGs for the device path of decoding (tests/loaders/hybrid_decode_test.cpp on the
// host, tests/ops/hybrid_decode_gpu_test.cu on the device): every chroma layout, restart intervals,
// optimized tables, quality 100, a progressive file, a 1x1 image, a photo whose windows decode at
// a DCT scale (1/2: reduced IDCTs), and a file the device path leaves to the host (arithmetic-
// coded). Small outputs keep the simulator's instruction counts low.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "jpeg_fixtures.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

namespace pinfeed::test {

/// decode device-inexact against the host path, in mean absolute difference per sample (of 255).
/// Emulated on the CPU (tests/loaders/nvjpeg_emulation_test.cpp: libjpeg's whole decode, the box
/// reduction where the host path decodes at a DCT scale, the resize) over 500 random windows of
/// photo-sized test pictures in five layouts: on 2026-12-06 a window's mean was at most 5.6 and all
/// windows' 0.43 (without the box reduction, point-sampled: 12.6 over all, 241 windows past 12).
/// The bounds leave a margin over those. What the emulation cannot show is nvJPEG's own decode
/// against libjpeg's whole decode (its IDCT rounding and chroma upsampling): the GPU case's bounds
/// add a stated allowance for it, which the GPU runner checks.
/// A source on the device paths without their refusal of a CPU loader, so that their host half can
/// be checked on the CPU (nothing on the CPU path calls the copy hooks: the tests do).
class any_loader final : public source {
 public:
  explicit any_loader(std::shared_ptr<loaders::pipeline_source> inner) : inner_(std::move(inner)) {}
  std::uint64_t size() const override { return inner_->size(); }
  /// The inner source's fields, a device_only one as a host field (the CPU oracle makes it).
  std::vector<field_spec> fields() const override {
    auto f = inner_->fields();
    for (auto& x : f) x.device_only = false;
    return f;
  }
  void produce(sample& s) override { inner_->produce(s); }

 private:
  std::shared_ptr<loaders::pipeline_source> inner_;
};

inline constexpr double kInexactEmulatedImageBound = 8.0;
inline constexpr double kInexactEmulatedMeanBound = 1.0;
inline constexpr double kNvjpegImageAllowance = 4.0, kNvjpegMeanAllowance = 2.0;
inline constexpr double kInexactImageBound = kInexactEmulatedImageBound + kNvjpegImageAllowance;  // 12
inline constexpr double kInexactMeanBound = kInexactEmulatedMeanBound + kNvjpegMeanAllowance;     // 3

struct hybrid_folder {
  temp_dir dir;
  std::vector<loaders::image_file> files;

  hybrid_folder() {
    struct spec {
      int w, h, layout;
      loaders::jpeg_encode_options o;
    };
    loaders::jpeg_encode_options restart, optimized, q100, progressive, arithmetic;
    restart.restart_interval = 2;
    optimized.optimize = true;
    q100.quality = 100;
    progressive.progressive = true;
    arithmetic.arithmetic = true;
    const spec specs[] = {{41, 29, 2, {}},         {33, 17, 0, {}},          {50, 40, 1, restart}, {23, 31, 3, optimized},
                          {64, 24, 4, {}},         {17, 33, 5, {}},          {40, 30, 2, progressive},
                          {30, 20, 2, arithmetic}, {1, 1, 2, {}},            {400, 300, 2, {}},   {26, 26, 2, q100},
                          {7, 9, 0, {}}};
    std::uint32_t seed = 300;
    for (const auto& s : specs) {
      const auto bytes = jpeg_file(s.w, s.h, ++seed, jpeg_layouts()[static_cast<std::size_t>(s.layout)], s.o);
      const auto path = dir.path / ("img" + std::to_string(files.size()) + ".jpg");
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
      files.push_back({path.string(), static_cast<std::int64_t>(files.size())});
    }
  }

  /// A pipeline source over the folder: random_resized_crop(16) then a coin-flip mirror.
  [[nodiscard]] std::shared_ptr<loaders::pipeline_source> source(loaders::decode_place place) const {
    return source(place, "random_resized_crop(16),hflip");
  }
  /// A pipeline source over the folder with `steps`, the steps after the decode where `augment_on` says.
  [[nodiscard]] std::shared_ptr<loaders::pipeline_source> source(
      loaders::decode_place place, const std::string& steps,
      loaders::augment_place augment_on = loaders::augment_place::automatic, bool device_tail = true) const {
    loaders::pipeline_source_options o;
    o.decode = place;
    o.augment_on = augment_on;
    o.device_tail = device_tail;
    return std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files), loaders::parse_pipeline(steps), o);
  }
};

}  // namespace pinfeed::test
