// The device path of decoding, host side (loaders/src/hybrid_decode.cpp): which pipelines it takes,
// what it refuses and why, the counts, and a CPU oracle of the whole path: the slot a CPU loader
// fills is gathered as before the copy, then unpacked from each block's start, decoded, resized and
// flipped with the host twins of the device's kernels, and must equal the host path byte for byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybrid_fixtures.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/ops/resize.hpp"

using namespace pinfeed;
using loaders::decode_place;

namespace {


struct header {
  std::uint64_t images, window_bytes, plane_bytes;
};

/// The images the host path makes, batch by batch (4 samples, in order).
std::vector<std::vector<std::uint8_t>> host_images(const test::hybrid_folder& f) {
  loader l(f.source(decode_place::host), test::cpu_loader(4, 2, 11));
  std::vector<std::vector<std::uint8_t>> out;
  while (auto b = l.next()) {
    const auto v = b->field("image");
    const auto* p = static_cast<const std::uint8_t*>(v.data);
    out.emplace_back(p, p + v.bytes());
  }
  return out;
}

}  // namespace

TEST_CASE("hybrid_decode.places_parse_and_counts_print") {
  CHECK(loaders::parse_decode_place("host") == decode_place::host);
  CHECK(loaders::parse_decode_place("device") == decode_place::device);
  CHECK(loaders::parse_decode_place("auto") == decode_place::automatic);
  CHECK(loaders::parse_decode_place("device-inexact") == decode_place::device_inexact);
  CHECK(std::string(loaders::to_string(decode_place::device_inexact)) == "device-inexact");
  CHECK_THROWS_WITH_AS((void)loaders::parse_decode_place("gpu"),
                       doctest::Contains("decode place 'gpu' is not one of host, device, auto, device-inexact"), std::invalid_argument);
  loaders::decode_counts c{120, 8, {{"corrupt", 3}, {"too_large", 5}}};
  CHECK(c.to_string() == "device 120, host 8 (corrupt 3, too_large 5)");
  CHECK(loaders::decode_counts{0, 4, {}}.to_string() == "device 0, host 4");
  // nvJPEG's samples are marked inexact; where it is not used, the counts are the exact path's.
  loaders::decode_counts nv{120, 8, {{"corrupt", 8}}, 100, "hardware"};
  CHECK(nv.to_string() == "device 120 (nvJPEG hardware: 100 inexact), host 8 (corrupt 8)");
  loaders::decode_counts none{12, 0, {}, 0, "not used: nvJPEG could not be loaded"};
  CHECK(none.to_string() == "device 12, host 0");
}

TEST_CASE("hybrid_decode.pipelines_it_cannot_take_are_refused_by_name") {
  const test::hybrid_folder f;
  const auto files = loaders::make_image_files_reader(f.files);
  loaders::pipeline_source_options device;
  device.decode = decode_place::device;
  const auto refused = [&](std::shared_ptr<loaders::image_reader> reader, const char* steps, const char* why,
                           loaders::pipeline_source_options o) {
    CAPTURE(steps);
    CHECK_THROWS_WITH_AS(loaders::pipeline_source(reader, loaders::parse_pipeline(steps), o), doctest::Contains(why),
                         std::invalid_argument);
    o.decode = decode_place::automatic;  // auto takes the host instead, and says why
    const loaders::pipeline_source s(reader, loaders::parse_pipeline(steps), o);
    CHECK(s.decode_path() == decode_place::host);
    CHECK(s.device_refusal().find(why) != std::string::npos);
    CHECK(s.fields().size() == 2);
  };
  refused(files, "resize(32),center_crop(16)", "its first step, resize(32), does not decode a window", device);
  refused(files, "random_resized_crop(16),hflip,resize(8)", "step resize(8) runs after the window", device);
  // A tail the host would fuse is no obstacle: it runs on the device after the decode there.
  CHECK(loaders::pipeline_source(files, loaders::parse_pipeline("random_resized_crop(16),normalize(0.5,0.5,0.5,0.2,0.2,0.2)"), device)
            .finishes_on_device());
  auto synthetic = loaders::make_reader_from_source(loaders::make_synthetic_source({}));
  refused(synthetic, "random_resized_crop(16)", "does not read encoded files", device);
  loaders::decode_options fast;
  fast.fast_dct = true;
  refused(loaders::make_image_files_reader(f.files, fast), "random_resized_crop(16)", "fast_dct", device);
  // The tail left to the device is no obstacle; the device path adds its four fields.
  device.device_tail = true;
  const loaders::pipeline_source ok(files, loaders::parse_pipeline("random_resized_crop(16),hflip,normalize(0.5,0.5,0.5,0.2,0.2,0.2)"), device);
  CHECK(ok.decode_path() == decode_place::device);
  CHECK(ok.device_refusal().empty());
  const auto fields = ok.fields();
  REQUIRE(fields.size() == 6);
  CHECK(fields[3].name == "jpeg_bytes");
  CHECK(fields[3].variable);
  CHECK(fields[3].shape[0] == 160 * 1024);
  device.device_bytes_per_sample = 100;
  CHECK_THROWS_WITH_AS(loaders::pipeline_source(files, loaders::parse_pipeline("random_resized_crop(16)"), device),
                       doctest::Contains("device_bytes_per_sample must be 1 KiB to 1 GiB, got 100"), std::invalid_argument);
}

TEST_CASE("hybrid_decode.a_cpu_loader_is_refused_and_auto_stays_on_the_host_without_a_gpu") {
  const test::hybrid_folder f;
  CHECK_THROWS_WITH_AS(loader(f.source(decode_place::device), test::cpu_loader(4, 1, 1)),
                       doctest::Contains("decodes JPEGs on the device (decode device), but the loader's batches stay on the cpu"),
                       std::invalid_argument);
  if (cuda_devices().usable) return;  // auto would take the device there
  const auto automatic = f.source(decode_place::automatic);
  CHECK(automatic->decode_path() == decode_place::host);
  loader l(automatic, test::cpu_loader(4, 2, 11));
  while (l.next()) {
  }
  const auto counts = automatic->decoded();
  CHECK(counts.host == f.files.size());
  CHECK(counts.device == 0);
}

TEST_CASE("hybrid_decode.host_half_and_a_cpu_oracle_of_the_device_half_equal_the_host_path") {
  const test::hybrid_folder f;
  const auto want = host_images(f);
  const auto inner = f.source(decode_place::device);
  loader l(std::make_shared<test::any_loader>(inner), test::cpu_loader(4, 2, 11));
  std::size_t batch = 0, compared = 0;
  while (auto b = l.next()) {
    REQUIRE(batch < want.size());
    // The slot as the copy hooks see it.
    const std::size_t n = b->field_count();
    std::vector<std::byte*> host(n);
    std::vector<const std::uint64_t*> extents(n, nullptr);
    std::vector<std::uint64_t> used(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      host[i] = static_cast<std::byte*>(b->field(i).data);
      if (!b->spec(i).variable) continue;
      extents[i] = b->extents(i).data();
      used[i] = static_cast<std::uint64_t>(b->field(i).shape[0]);
    }
    const auto specs = l.fields();
    inner->before_copy(slot_view{specs, host, {}, extents, used, b->size(), b->index(), nullptr, -1});
    header h;
    std::memcpy(&h, host[2], sizeof h);
    const auto* images = reinterpret_cast<const ops::jpeg_image*>(host[2] + 64);
    const auto* jobs = reinterpret_cast<const ops::resize_job*>(host[2] + (64 + h.images * sizeof(ops::jpeg_image) + 7) / 8 * 8);
    // Each block from its start to the next one's (the last to the end), as the device unpacks them.
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(host[3]);
    const auto* starts = reinterpret_cast<const std::uint32_t*>(host[4]);
    std::vector<std::int16_t> blocks(used[4] * 64);
    for (std::uint64_t k = 0; k < used[4]; ++k) {
      const std::uint64_t end = k + 1 < used[4] ? starts[k + 1] : used[3];
      REQUIRE(starts[k] <= end);
      ops::unpack_jpeg_blocks({bytes + starts[k], end - starts[k]}, 1, blocks.data() + k * 64);
    }
    std::vector<std::uint8_t> window(h.window_bytes), planes(h.plane_bytes);
    const ops::jpeg_batch_view view{images, h.images, blocks.data(), used[4], reinterpret_cast<const std::uint16_t*>(host[5]),
                                    used[5] / 64};
    ops::decode_jpeg_batch_host(view, window.data(), window.size(), planes.data(), planes.size());
    const auto* image = reinterpret_cast<const std::uint8_t*>(host[0]);
    const std::size_t image_bytes = 16 * 16 * 3;
    std::vector<bool> on_device(b->size(), false);
    for (std::uint64_t k = 0; k < h.images; ++k) {
      const auto& j = jobs[k];
      const std::size_t at = j.out_offset / image_bytes;
      CAPTURE(b->indices()[at]);
      on_device[at] = true;
      std::vector<std::uint8_t> out(image_bytes);
      ops::resize_bilinear_u8(window.data() + j.in_offset, std::size_t{j.in_w} * 3, j.in_h, j.in_w, 3, out.data(), j.out_h, j.out_w,
                              j.flip != 0);
      CHECK(std::equal(out.begin(), out.end(), want[batch].begin() + static_cast<std::ptrdiff_t>(j.out_offset)));
      ++compared;
    }
    for (std::size_t s = 0; s < b->size(); ++s) {  // the host's samples are in the slot already
      if (on_device[s]) continue;
      CAPTURE(b->indices()[s]);
      CHECK(std::equal(image + s * image_bytes, image + (s + 1) * image_bytes, want[batch].begin() + static_cast<std::ptrdiff_t>(s * image_bytes)));
    }
    ++batch;
  }
  CHECK(batch == want.size());
  const auto counts = inner->decoded();
  CHECK(counts.device == compared);
  CHECK(counts.device + counts.host == f.files.size());
  // All but the arithmetic-coded file; two windows at least 32 pixels on their shorter side (the
  // 400x300 photo's, and one other) decode at 1/2 for an output of 16, on the device as on the host.
  CHECK(counts.to_string() == "device 11, host 1 (arithmetic 1)");
}

TEST_CASE("hybrid_decode.every_way_to_the_host_is_counted") {
  // Files the device path leaves to the host, each for its reason, through the CPU twin of a
  // device loader (the copy hooks are not needed to count). Bad files are skipped by the host path
  // after it fails on them too.
  test::temp_dir dir;
  std::vector<loaders::image_file> files;
  const auto put = [&](const std::string& name, const std::vector<std::byte>& bytes) {
    const auto path = dir.path / name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    files.push_back({path.string(), static_cast<std::int64_t>(files.size())});
  };
  loaders::jpeg_encode_options q100;
  q100.quality = 100;
  const auto big = test::jpeg_file(64, 64, 901, test::jpeg_layouts()[0], q100);  // 4:4:4, noise: past 1 KiB packed
  put("big.jpg", big);
  loaders::jpeg_encode_options q60;
  q60.quality = 60;
  const auto small_file = test::jpeg_file(24, 24, 903, test::jpeg_layouts()[5], q60);  // grey: well under 1 KiB
  put("truncated.jpg", {small_file.begin(), small_file.begin() + static_cast<std::ptrdiff_t>(small_file.size() * 2 / 3)});
  std::string ppm = "P6\n12 10\n255\n";
  ppm.append(12 * 10 * 3, '\x7f');
  const auto* p = reinterpret_cast<const std::byte*>(ppm.data());
  put("grey.ppm", {p, p + ppm.size()});
  loaders::jpeg_encode_options arithmetic;
  arithmetic.arithmetic = true;
  put("arith.jpg", test::jpeg_file(20, 20, 902, test::jpeg_layouts()[2], arithmetic));
  loaders::pipeline_source_options o;
  o.decode = decode_place::device;
  o.device_bytes_per_sample = 1024;
  o.on_error = loaders::error_policy::skip;
  // An output of 48: no window of these files decodes at a DCT scale.
  const auto inner = std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files),
                                                                loaders::parse_pipeline("random_resized_crop(48),hflip"), o);
  {
    loader l(std::make_shared<test::any_loader>(inner), test::cpu_loader(2, 1, 5));
    while (l.next()) {
    }
  }
  const auto counts = inner->decoded();
  CAPTURE(counts.to_string());
  const auto count_of = [&](const char* reason) {
    for (const auto& [r, n] : counts.host_by_reason)
      if (r == reason) return n;
    return std::uint64_t{0};
  };
  CHECK(counts.device == 0);
  CHECK(count_of("too_large") >= 1);   // big.jpg: more packed bytes than the slot's 1 KiB a sample
  CHECK(count_of("corrupt") >= 1);     // truncated.jpg
  CHECK(count_of("not_jpeg") >= 1);    // grey.ppm
  CHECK(count_of("arithmetic") >= 1);  // arith.jpg
  std::uint64_t by_reason = 0;
  for (const auto& [r, n] : counts.host_by_reason) by_reason += n;
  CHECK(by_reason == counts.host);  // every sample the host decoded has its reason
  // A crop larger than the image plans no window: the host takes it (and fails on it, as always).
  std::vector<loaders::image_file> small{files[0]};
  const test::hybrid_folder f;
  small[0] = f.files.back();  // 7 x 9
  loaders::pipeline_source_options c = o;
  c.device_bytes_per_sample = 160 * 1024;
  c.on_error = loaders::error_policy::fail;
  const auto cropped = std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(small),
                                                                  loaders::parse_pipeline("crop(8)"), c);
  loader l(std::make_shared<test::any_loader>(cropped), test::cpu_loader(1, 1, 5));
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("smaller than the crop"), sample_error);
  CHECK(cropped->decoded().to_string() == "device 0, host 1 (no_window 1)");
}
