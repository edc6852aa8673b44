// decode device-inexact without a GPU: what nvJPEG's path does to a window, emulated on the CPU, and
// the files kept from it.
// - The emulation: a whole-image decode (libjpeg's, standing for nvJPEG's), reduced by boxes of the
//   DCT scale the host path decodes the window at (ops::box_downscale_u8, the device resize's
//   box taps), then resized (resize_bilinear_u8). Its distance from the host path over random
//   windows of the test's pictures is what test::kInexact* bound (hybrid_fixtures.hpp); the same
//   bounds hold the GPU case (gpu.jpeg.device_inexact_...) against nvJPEG itself. Without the box
//   reduction (the path before it: the full-size window point-sampled by the bilinear taps) the
//   same windows are far off, and the case says so.
// - The walk (jpeg_scan_intact): a truncated or bit-flipped file that the host decode refuses never
//   goes to nvJPEG, whose hardware backend may report success for it and write garbage.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hybrid_fixtures.hpp"
#include "jpeg_fixtures.hpp"
#include "jpeg_scan.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/ops/resize.hpp"

using namespace pinfeed;

namespace {

struct window_draw {
  loaders::image_region r;
  std::int64_t out;  // the output's side (square)
};

/// Windows as random_resized_crop draws them: 8% to 100% of the area, aspect 3/4 to 4/3, to a square
/// output of 224 or 16 pixels (16: the GPU case's; small outputs take the largest DCT scales).
std::vector<window_draw> random_windows(std::int64_t w, std::int64_t h, std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> area(0.08, 1.0), log_ratio(std::log(3.0 / 4), std::log(4.0 / 3));
  std::vector<window_draw> out;
  while (out.size() < n) {
    const double a = area(gen) * static_cast<double>(w * h), ratio = std::exp(log_ratio(gen));
    const auto ww = static_cast<std::int64_t>(std::lround(std::sqrt(a * ratio)));
    const auto wh = static_cast<std::int64_t>(std::lround(std::sqrt(a / ratio)));
    if (ww < 1 || wh < 1 || ww > w || wh > h) continue;
    const auto x = std::uniform_int_distribution<std::int64_t>(0, w - ww)(gen);
    const auto y = std::uniform_int_distribution<std::int64_t>(0, h - wh)(gen);
    out.push_back({{y, x, wh, ww}, out.size() % 2 == 0 ? 224 : 16});
  }
  return out;
}

/// The host path's output for a window: decode_image_region at its DCT scale, then the resize.
std::vector<std::uint8_t> host_path(const std::vector<std::byte>& file, const window_draw& d) {
  std::vector<std::byte> px;
  const auto spec = loaders::decode_image_region(file, px, {}, d.r, d.out, "emulation");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(d.out * d.out * 3));
  ops::resize_bilinear_u8(reinterpret_cast<const std::uint8_t*>(px.data()), static_cast<std::size_t>(spec.width) * 3, spec.height,
                          spec.width, 3, out.data(), d.out, d.out);
  return out;
}

/// The device-inexact path's output, emulated from the whole image `full` (w x h RGB): with `box`,
/// the window of the 1/denom reduction (as pack_file lays the job out), else the full-size window.
std::vector<std::uint8_t> inexact_path(const std::vector<std::uint8_t>& full, std::int64_t w, std::int64_t h, const window_draw& d,
                                       bool box) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(d.out * d.out * 3));
  const unsigned denom = loaders::region_decode_denom(d.r, d.out);
  if (!box || denom == 1) {
    ops::resize_bilinear_u8(full.data() + (d.r.y * w + d.r.x) * 3, static_cast<std::size_t>(w) * 3, d.r.height, d.r.width, 3,
                            out.data(), d.out, d.out);
    return out;
  }
  const loaders::image_region sw = loaders::scaled_region(d.r, w, h, denom);
  const std::int64_t x0 = sw.x * denom, y0 = sw.y * denom;
  std::vector<std::uint8_t> reduced(static_cast<std::size_t>(sw.width * sw.height * 3));
  ops::box_downscale_u8(full.data() + (y0 * w + x0) * 3, static_cast<std::size_t>(w) * 3, h - y0, w - x0, denom, reduced.data(),
                        sw.height, sw.width);
  ops::resize_bilinear_u8(reduced.data(), static_cast<std::size_t>(sw.width) * 3, sw.height, sw.width, 3, out.data(), d.out, d.out);
  return out;
}

double mean_abs_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::abs(int(a[i]) - int(b[i]));
  return s / static_cast<double>(a.size());
}

}  // namespace

TEST_CASE("nvjpeg.emulated_inexact_path_stays_within_the_stated_bounds_of_the_host_path") {
  struct picture {
    int w, h, layout;
  };
  // The GPU case's largest image (400x300 4:2:0) and photo-sized ones in every layout nvJPEG's
  // engines take.
  const picture pictures[] = {{400, 300, 2}, {500, 375, 0}, {500, 375, 1}, {375, 500, 3}, {640, 480, 5}};
  double box_total = 0, point_total = 0, box_most = 0;
  std::size_t windows = 0, point_over = 0;
  for (const picture& p : pictures) {
    const auto& layout = test::jpeg_layouts()[static_cast<std::size_t>(p.layout)];
    CAPTURE(layout.name);
    const auto file = test::jpeg_file(p.w, p.h, 900 + static_cast<std::uint32_t>(p.layout), layout);
    const auto full = test::host_pixels(file);
    REQUIRE(full.size() == static_cast<std::size_t>(p.w * p.h * 3));
    for (const window_draw& d : random_windows(p.w, p.h, 100, 7 + static_cast<std::uint32_t>(p.layout))) {
      CAPTURE(d.r.x);
      CAPTURE(d.r.y);
      CAPTURE(d.r.width);
      CAPTURE(d.r.height);
      CAPTURE(d.out);
      const auto want = host_path(file, d);
      const double boxed = mean_abs_diff(inexact_path(full, p.w, p.h, d, true), want);
      const double point = mean_abs_diff(inexact_path(full, p.w, p.h, d, false), want);
      if (loaders::region_decode_denom(d.r, d.out) == 1) CHECK(boxed == 0.0);  // the same decode, the same window
      CHECK(boxed <= test::kInexactEmulatedImageBound);
      box_total += boxed;
      point_total += point;
      box_most = std::max(box_most, boxed);
      point_over += point > test::kInexactEmulatedImageBound ? 1 : 0;
      ++windows;
    }
  }
  const double box_mean = box_total / static_cast<double>(windows), point_mean = point_total / static_cast<double>(windows);
  MESSAGE("emulated device-inexact over " << windows << " windows: box-reduced mean " << box_mean << ", most " << box_most
                                          << " (of 255); point-sampled mean " << point_mean << ", " << point_over
                                          << " windows past the image bound");
  CHECK(box_mean <= test::kInexactEmulatedMeanBound);
  // Point sampling (the path without the reduction) is what the bounds keep out.
  CHECK(point_mean > test::kInexactEmulatedMeanBound);
  CHECK(point_over > windows / 4);
}

TEST_CASE("nvjpeg.files_whose_entropy_data_does_not_decode_are_kept_from_it") {
  loaders::jpeg_encode_options restart, progressive;
  restart.restart_interval = 3;
  progressive.progressive = true;
  const auto& layouts = test::jpeg_layouts();
  const std::vector<std::vector<std::byte>> files = {
      test::jpeg_file(64, 48, 11, layouts[2]), test::jpeg_file(40, 30, 12, layouts[0]), test::jpeg_file(48, 40, 13, layouts[5]),
      test::jpeg_file(64, 48, 14, layouts[2], restart), test::jpeg_file(64, 48, 15, layouts[1], progressive)};
  std::mt19937 gen(5);
  std::size_t refused_by_host = 0, kept = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    CAPTURE(f);
    const auto& file = files[f];
    std::string why;
    CHECK(loaders::detail::jpeg_scan_intact(file, why));
    CHECK(why.empty());
    // The entropy-coded data: from the first start-of-scan's payload to the end-of-image marker.
    std::size_t sos = 0;
    for (std::size_t i = 0; i + 3 < file.size(); ++i)
      if (file[i] == std::byte{0xFF} && file[i + 1] == std::byte{0xDA}) {
        sos = i + 2 + ((std::to_integer<std::size_t>(file[i + 2]) << 8) | std::to_integer<std::size_t>(file[i + 3]));
        break;
      }
    REQUIRE(sos > 0);
    REQUIRE(sos + 16 < file.size());
    const auto host_accepts = [](const std::vector<std::byte>& bytes) {
      std::vector<std::byte> px;
      try {
        (void)loaders::decode_image(bytes, px, {}, "walk");
        return true;
      } catch (const std::exception&) {
        return false;
      }
    };
    // Cut short inside the scan: the host decode refuses it, and so does the walk, naming why.
    for (const std::size_t keep : {sos + 1, sos + (file.size() - sos) / 3, file.size() - 6}) {
      CAPTURE(keep);
      const std::vector<std::byte> cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(keep));
      std::string reason;
      CHECK_FALSE(host_accepts(cut));
      CHECK_FALSE(loaders::detail::jpeg_scan_intact(cut, reason));
      CHECK_FALSE(reason.empty());
    }
    // Bits flipped in the scan: whatever the host decode refuses, the walk refuses too (pinfeed's
    // Huffman decoder is the stricter of the two on corrupt data).
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<std::byte> bad = file;
      const auto at = std::uniform_int_distribution<std::size_t>(sos, file.size() - 3)(gen);
      bad[at] ^= std::byte{static_cast<unsigned char>(1u << (trial % 8))};
      std::string reason;
      const bool walks = loaders::detail::jpeg_scan_intact(bad, reason);
      if (!host_accepts(bad)) {
        ++refused_by_host;
        CHECK_FALSE(walks);
      }
      kept += walks ? 0 : 1;
    }
  }
  MESSAGE(refused_by_host << " bit-flipped files the host decode refuses; " << kept << " kept from nvJPEG by the walk");
  CHECK(refused_by_host > 0);
}
