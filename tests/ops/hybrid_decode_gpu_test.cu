// The device path of decoding in a loader (pipeline_source with decode device): packed on the
// workers, copied with the slot, unpacked, decoded, resized and flipped on the copy stream. Every
// batch's images equal the host path's, byte for byte, for files of every chroma layout, restart
// intervals, optimized tables, quality 100, a progressive file, 1x1 and 7x9 images and windows
// decoded at 1/2 (reduced IDCTs), mixed in batches with a sample the host decodes (arithmetic-coded).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "hybrid_fixtures.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"

using namespace pinfeed;
using loaders::decode_place;

namespace {

loader_options on_gpu(std::size_t batch) {
  loader_options o;
  o.batch_size = batch;
  o.workers = 2;
  o.prefetch = 2;
  o.device = "cuda";
  o.seed = 11;
  return o;
}

/// Each batch's image field, copied back, and its labels; and its checksum line.
std::vector<std::vector<std::uint8_t>> images_of(loader& l, std::vector<std::string>& lines) {
  std::vector<std::vector<std::uint8_t>> out;
  while (auto b = l.next()) {
    lines.push_back(checksum_line(*b));
    const auto v = b->field("image");
    std::vector<std::uint8_t> px(v.bytes());
    PINFEED_CUDA_TRY(cudaMemcpyAsync(px.data(), v.data, px.size(), cudaMemcpyDeviceToHost, b->stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(b->stream()));
    for (const auto i : b->indices()) px.push_back(static_cast<std::uint8_t>(i));
    out.push_back(std::move(px));
  }
  return out;
}

}  // namespace

TEST_CASE("gpu.jpeg.loader_decodes_on_the_device_as_the_host_path" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG decoding on the device in a loader")) return;
  const test::hybrid_folder f;
  for (const std::size_t batch : {4, 12}) {
    CAPTURE(batch);
    std::vector<std::string> host_lines, device_lines;
    loader host(f.source(decode_place::host), on_gpu(batch));
    const auto want = images_of(host, host_lines);
    const auto src = f.source(decode_place::device);
    loader device(src, on_gpu(batch));
    const auto got = images_of(device, device_lines);
    CHECK(device_lines == host_lines);  // the packed fields are the source's scratch: not in the lines
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      CHECK(got[k] == want[k]);
    }
    CHECK(src->decoded().to_string() == "device 11, host 1 (arithmetic 1)");
  }
}

TEST_CASE("gpu.jpeg.auto_decodes_on_the_device_where_a_gpu_is" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("decode auto")) return;
  const test::hybrid_folder f;
  const auto src = f.source(decode_place::automatic);
  CHECK(src->decode_path() == decode_place::device);
  loader l(src, on_gpu(6));
  std::size_t n = 0;
  while (auto b = l.next()) {
    n += b->size();
    CHECK(b->spec(3).name == "jpeg_bytes");
    CHECK(b->spec(3).scratch);
  }
  CHECK(n == f.files.size());
  CHECK(src->decoded().device == 11);
}

TEST_CASE("gpu.jpeg.device_inexact_is_nvjpeg_near_the_host_path_or_the_exact_path" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("decode device-inexact")) return;
  // With nvJPEG (a GPU runner with libnvjpeg): its images are near the host path's, within the
  // tolerance stated here, and counted inexact. Without it (the simulator, a runner without the
  // library): a warning names why, and the exact device path's images are the host path's.
  const test::hybrid_folder f;
  std::vector<std::string> host_lines, lines;
  loader host(f.source(decode_place::host), on_gpu(4));
  const auto want = images_of(host, host_lines);
  std::vector<std::string> warnings;
  const auto previous = set_log_sink([&](log_level level, std::string_view m) {
    if (level == log_level::warn) warnings.emplace_back(m);
  });
  const auto src = f.source(decode_place::device_inexact);
  std::vector<std::vector<std::uint8_t>> got;
  {
    loader device(src, on_gpu(4));
    got = images_of(device, lines);
  }
  set_log_sink(previous);
  const auto d = src->decoded();
  MESSAGE("device-inexact: " << d.to_string() << "; nvJPEG: " << d.nvjpeg);
  REQUIRE(got.size() == want.size());
  if (!d.nvjpeg_used()) {
    CHECK(d.inexact == 0);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("nvJPEG is not used") != std::string::npos);
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == want[k]);
    return;
  }
  CHECK(d.inexact > 0);
  CHECK(d.device + d.host == f.files.size());
  // nvJPEG's IDCT and chroma upsampling are its own, and it decodes at full size, reduced by boxes
  // where the host path decodes at a DCT scale: the bounds of hybrid_fixtures.hpp (the CPU
  // emulation's, plus nvJPEG's allowance) hold for each image and over all; the indices (appended
  // to each batch's bytes) are the same.
  double total = 0;
  std::size_t samples = 0;
  const std::size_t image = 16 * 16 * 3;
  for (std::size_t k = 0; k < got.size(); ++k) {
    REQUIRE(got[k].size() == want[k].size());
    const std::size_t images = got[k].size() / (image + 1);
    for (std::size_t i = 0; i < images; ++i) {
      double one = 0;
      for (std::size_t b = i * image; b < (i + 1) * image; ++b) one += std::abs(int(got[k][b]) - int(want[k][b]));
      CHECK(one / image <= test::kInexactImageBound);
      total += one;
      samples += image;
    }
    CHECK(std::equal(got[k].end() - static_cast<std::ptrdiff_t>(images), got[k].end(), want[k].end() - static_cast<std::ptrdiff_t>(images)));
  }
  MESSAGE("mean absolute difference from the host path: " << total / static_cast<double>(samples));
  CHECK(total / static_cast<double>(samples) <= test::kInexactMeanBound);
}

TEST_CASE("gpu.augment.loader_runs_the_steps_after_the_decode_on_the_device_as_the_host_and_keeps_its_contracts" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("augmentations on the device in a loader")) return;
  // decode device with a policy, the counting ops and a blur after the window and flip (auto moves them to
  // the GPU), and decode host with augment device: the same checksum lines and images as the host
  // pipeline's. The rounds run on the copy stream after the decode, with no host synchronisation.
  // Then the contracts: resume, and the scratch in the memory budget.
  const test::hybrid_folder f;
  const std::string steps =
      "random_resized_crop(16),hflip,trivial_augment(interpolation=bilinear,fill=77),equalize,contrast(0.6),random_gaussian_blur(5,0.1,2)";
  std::vector<std::string> host_lines;
  loader host(f.source(decode_place::host, steps, loaders::augment_place::host), on_gpu(6));
  const auto want = images_of(host, host_lines);
  for (const auto d : {decode_place::device, decode_place::host}) {
    CAPTURE(static_cast<int>(d));
    const auto src = f.source(d, steps, d == decode_place::host ? loaders::augment_place::device : loaders::augment_place::automatic);
    REQUIRE(src->augment_path() == loaders::augment_place::device);
    std::vector<std::string> lines;
    {
      loader l(src, on_gpu(6));
      const auto got = images_of(l, lines);
      CHECK(lines == host_lines);
      CHECK(got == want);
    }
    if (d != decode_place::device) continue;
    // Resume: a loader that took one batch, its state resumed by another, gives the rest of the
    // batches (the jobs come from the samples' streams, not the loader's). One loader at a time:
    // the simulator takes launches from one loader's threads at once.
    std::string state;
    {
      loader first(src, on_gpu(6));
      REQUIRE(first.next());
      state = first.state();
    }
    std::vector<std::string> rest;
    loader second(src, on_gpu(6));
    second.resume(state);
    (void)images_of(second, rest);
    REQUIRE(rest.size() + 1 == host_lines.size());
    CHECK(std::equal(rest.begin(), rest.end(), host_lines.begin() + 1));
    // The second image field and the counts are named in a too-small budget's refusal.
    auto small = on_gpu(6);
    small.memory_budget = 64 * 1024;
    CHECK_THROWS_WITH_AS(loader(src, small), doctest::Contains("device augmentation scratch (a second image field, the counts)"),
                         std::invalid_argument);
    CHECK(src->device_memory(6).at(0).bytes == 6 * 16 * 16 * 3 + ops::aug_scratch_bytes(6));
  }
}


TEST_CASE("gpu.augment.the_tail_and_the_batch_op_run_on_the_device_after_the_decode_as_on_the_host" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("the tail and a batch op on the device in a loader")) return;
  // decode device, the steps, erasing's noise, the fused tail, erasing on its floats and
  // MixUp/CutMix all on the GPU
  // (the image field made there, device_only), and the tail left to the consumer with augment
  // device (the CLI's way): the host pipeline's checksum lines, images and soft labels alike.
  const test::hybrid_folder f;
  const std::string steps = "random_resized_crop(16),hflip,trivial_augment,random_erasing(0.8,value=random),"
                            "normalize(0.485,0.456,0.406,0.229,0.224,0.225),random_erasing(0.7,value=random),"
                            "mixup_cutmix(0.8,1,num_classes=12)";
  // One worker: its thread fills and launches every batch's work (the simulator analyses a kernel
  // at each launch, and two threads launching the same kernel at once crash it).
  auto one = on_gpu(6);
  one.workers = 1;
  std::vector<std::string> host_lines;
  {
    loader host(f.source(decode_place::host, steps, loaders::augment_place::host, false), one);
    (void)images_of(host, host_lines);
  }
  REQUIRE(host_lines.size() == 2);
  for (const auto d : {decode_place::device, decode_place::host}) {
    CAPTURE(static_cast<int>(d));
    const auto src = f.source(d, steps, d == decode_place::host ? loaders::augment_place::device : loaders::augment_place::automatic,
                              d == decode_place::host);
    REQUIRE(src->finishes_on_device());
    std::vector<std::string> lines;
    loader l(src, one);
    CHECK(l.device_slot_bytes() > l.slot_bytes());  // the float images live on the device alone
    (void)images_of(l, lines);
    CHECK(lines == host_lines);
  }
}
