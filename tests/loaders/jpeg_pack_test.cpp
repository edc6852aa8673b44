// The host half of hybrid decoding: pack_jpeg() walks a baseline scan with pinfeed's Huffman
// decoder straight into the compact form. It must write exactly what packing libjpeg's
// coefficients writes, and a window's blocks must decode to the host decode path's window, bit for
// bit; what it does not take says why.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "jpeg_fixtures.hpp"
#include "jpeg_walk.hpp"  // detail::gain_table, kMostGain
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

/// The host decode path's pixels of `region` of `file` at full scale (libjpeg's crop and skip).
std::vector<std::uint8_t> host_window(const std::vector<std::byte>& file, const image_region& region) {
  std::vector<std::byte> out;
  const image_spec spec = decode_image_region(file, out, {}, region, 0, "test JPEG");
  REQUIRE(spec.height == region.height);
  REQUIRE(spec.width == region.width);
  const auto* p = reinterpret_cast<const std::uint8_t*>(out.data());
  return {p, p + out.size()};
}

/// `packed` through the planes' host reference.
std::vector<std::uint8_t> device_half(const jpeg_packed& packed) {
  jpeg_batch batch;
  batch.append(packed);
  std::vector<std::uint8_t> out(batch.out_bytes, 0xEE), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(batch.view(), out.data(), out.size(), scratch.data(), scratch.size());
  return out;
}

std::string name_of(const test::jpeg_layout& layout, int w, int h, const std::string& what) {
  return std::string(layout.name) + " " + std::to_string(w) + "x" + std::to_string(h) + " " + what;
}

}  // namespace

TEST_CASE("jpeg_pack.the_walker_writes_what_packing_libjpegs_coefficients_writes") {
  const int sizes[][2] = {{1, 1}, {2, 5}, {7, 9}, {17, 33}, {33, 17}, {125, 94}};
  std::uint32_t seed = 100;
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& s : sizes)
      for (int variant = 0; variant < 4; ++variant) {
        jpeg_encode_options o;
        o.quality = variant == 1 ? 100 : 85;  // 100: every step 1, the largest values
        o.restart_interval = variant == 2 ? 2 : 0;
        o.optimize = variant == 3;
        const auto file = test::jpeg_file(s[0], s[1], ++seed, layout, o);
        CAPTURE(name_of(layout, s[0], s[1], std::to_string(variant)));
        jpeg_packed packed;
        const jpeg_pack_result r = pack_jpeg(file, "test", {}, packed);
        REQUIRE_MESSAGE(r.fallback == jpeg_fallback::none, r.reason);
        CHECK(packed.walked);
        const jpeg_read read = read_jpeg_coefficients(file, "test");
        REQUIRE(read.coefficients.has_value());
        std::vector<std::uint8_t> bytes;
        std::vector<std::uint32_t> starts;
        ops::pack_jpeg_blocks(read.coefficients->blocks, bytes, &starts);
        CHECK(packed.bytes == bytes);
        CHECK(packed.starts == starts);
        for (int k = 0; k < packed.image.components; ++k) {
          const auto table = [k](const ops::jpeg_image& im, const std::vector<std::uint16_t>& q) {
            const auto* t = q.data() + std::size_t{im.comp[k].quant} * 64;
            return std::vector<std::uint16_t>(t, t + 64);
          };
          CHECK(table(packed.image, packed.quant) == table(read.coefficients->image, read.coefficients->quant));
          CHECK(packed.image.comp[k].width_in_blocks == read.coefficients->image.comp[k].width_in_blocks);
          CHECK(packed.image.comp[k].height_in_blocks == read.coefficients->image.comp[k].height_in_blocks);
          CHECK(packed.image.comp[k].first_block == read.coefficients->image.comp[k].first_block);
        }
        CHECK(device_half(packed) == test::host_pixels(file));
      }
}

TEST_CASE("jpeg_pack.progressive_files_are_read_by_libjpeg_and_decode_the_same") {
  for (const auto& layout : test::jpeg_layouts()) {
    jpeg_encode_options o;
    o.progressive = true;
    const auto file = test::jpeg_file(45, 31, 9, layout, o);
    CAPTURE(layout.name);
    jpeg_packed packed;
    REQUIRE(pack_jpeg(file, "test", {}, packed).fallback == jpeg_fallback::none);
    CHECK_FALSE(packed.walked);
    CHECK(device_half(packed) == test::host_pixels(file));
    jpeg_pack_options windowed;
    windowed.window = image_region{5, 17, 20, 11};
    REQUIRE(pack_jpeg(file, "test", windowed, packed).fallback == jpeg_fallback::none);
    CHECK(device_half(packed) == host_window(file, *windowed.window));
  }
}

TEST_CASE("jpeg_pack.windows_decode_to_the_host_paths_window") {
  // Windows touching each edge, single pixels in the corners, and windows at every offset within
  // an iMCU, so the stored blocks' margin is exercised on every side and phase.
  const int W = 61, H = 47;
  std::vector<image_region> windows = {{0, 0, H, W},      {0, 0, 1, 1},   {H - 1, W - 1, 1, 1}, {0, W - 1, H, 1},
                                       {H - 1, 0, 1, W},  {0, 0, 20, 9},  {30, 40, H - 30, W - 40},
                                       {12, 0, 17, W},    {0, 25, H, 13}};
  for (int phase = 0; phase < 17; ++phase) windows.push_back({phase + 3, phase * 2 + 1, 9, 12});
  std::uint32_t seed = 300;
  for (const auto& layout : test::jpeg_layouts())
    for (int restarts : {0, 1}) {
      jpeg_encode_options o;
      o.quality = 90;
      o.restart_interval = restarts;
      const auto file = test::jpeg_file(W, H, ++seed, layout, o);
      jpeg_packed whole;
      REQUIRE(pack_jpeg(file, "test", {}, whole).fallback == jpeg_fallback::none);
      for (const image_region& w : windows) {
        CAPTURE(name_of(layout, W, H, "restarts " + std::to_string(restarts) + " window " + std::to_string(w.width) + "x" +
                                           std::to_string(w.height) + "+" + std::to_string(w.x) + "+" + std::to_string(w.y)));
        jpeg_pack_options opts;
        opts.window = w;
        jpeg_packed packed;
        const jpeg_pack_result r = pack_jpeg(file, "test", opts, packed);
        REQUIRE_MESSAGE(r.fallback == jpeg_fallback::none, r.reason);
        CHECK(packed.walked);
        CHECK(ops::jpeg_output_bytes(packed.image) == static_cast<std::uint64_t>(w.width * w.height * 3));
        CHECK(packed.bytes.size() <= whole.bytes.size());
        CHECK(device_half(packed) == host_window(file, w));
      }
    }
}

TEST_CASE("jpeg_pack.scaled_windows_decode_to_the_host_paths_scaled_window") {
  // The host path decodes a window at 1/2, 1/4 or 1/8 where its shorter side allows the output's
  // (min_short_side): the host half packs the same window at that scale, and the planes' reference
  // decode of it is the host path's pixels. Windows touching each edge, at odd offsets, and whole.
  const int W = 125, H = 94;
  const std::vector<image_region> windows = {{0, 0, H, W},   {0, 0, 40, 33},      {H - 41, W - 37, 41, 37}, {5, 3, 88, 120},
                                             {30, 0, 33, W}, {0, 61, H, 64},      {17, 23, 50, 51},         {9, 77, 64, 48}};
  std::uint32_t seed = 700;
  int compared = 0;
  for (const auto& layout : test::jpeg_layouts())
    for (int restarts : {0, 2}) {
      jpeg_encode_options o;
      o.quality = 90;
      o.restart_interval = restarts;
      o.progressive = restarts == 2 && layout.h == 2 && layout.v == 2;  // libjpeg's reader, at a scale too
      const auto file = test::jpeg_file(W, H, ++seed, layout, o);
      for (const image_region& w : windows)
        for (unsigned denom : {2u, 4u, 8u}) {
          // A shorter side the host path decodes this window at 1/denom for.
          std::int64_t need = 0;
          for (std::int64_t m = 1; m <= std::min(w.height, w.width) && need == 0; ++m)
            if (region_decode_denom(w, m) == denom) need = m;
          if (need == 0) continue;
          CAPTURE(name_of(layout, W, H, "restarts " + std::to_string(restarts) + " 1/" + std::to_string(denom) + " window " +
                                            std::to_string(w.width) + "x" + std::to_string(w.height) + "+" + std::to_string(w.x) +
                                            "+" + std::to_string(w.y)));
          std::vector<std::byte> host;
          const image_spec spec = decode_image_region(file, host, {}, w, need, "test JPEG");
          jpeg_pack_options opts;
          opts.window = w;
          opts.scale_denom = denom;
          jpeg_packed packed;
          const jpeg_pack_result r = pack_jpeg(file, "test", opts, packed);
          REQUIRE_MESSAGE(r.fallback == jpeg_fallback::none, r.reason);
          CHECK(packed.image.scale == 8 / denom);
          const image_region sw = scaled_region(w, W, H, denom);
          CHECK(spec.height == sw.height);
          CHECK(spec.width == sw.width);
          const auto* p = reinterpret_cast<const std::uint8_t*>(host.data());
          CHECK(device_half(packed) == std::vector<std::uint8_t>(p, p + host.size()));
          ++compared;
        }
    }
  CHECK(compared > 200);
}

TEST_CASE("jpeg_pack.a_scaled_window_is_checked_and_stores_fewer_samples") {
  const auto file = test::jpeg_file(320, 240, 5, test::jpeg_layouts()[2], {});  // 4:2:0
  jpeg_pack_options opts;
  opts.window = image_region{100, 100, 64, 64};
  opts.scale_denom = 2;
  jpeg_packed packed;
  REQUIRE(pack_jpeg(file, "test", opts, packed).fallback == jpeg_fallback::none);
  // At 1/2 the image is 160x120 with iMCUs of 8x8 pixels; luma at 4x4 per block, chroma at 8x8
  // (libjpeg spares its upsampling). The window is pixels 50..81 of the scaled decode.
  CHECK(packed.image.scale == 4);
  CHECK(packed.image.comp[0].dct == 4);
  CHECK(packed.image.comp[1].dct == 8);
  CHECK(packed.image.crop_x == 50);
  CHECK(packed.image.crop_width == 32);
  CHECK(packed.image.mcu_x == 6);  // (50 - 2) / 8
  CHECK(ops::jpeg_plane_bytes(packed.image) ==
        packed.image.comp[0].width_in_blocks * packed.image.comp[0].height_in_blocks * 16 +
            2 * packed.image.comp[1].width_in_blocks * packed.image.comp[1].height_in_blocks * 64);
  // 4:1:0 (luma 4x2): at 1/2 libjpeg decodes its chroma 8x8 and still doubles it across, and its
  // crop sizes that row otherwise; such a window goes to the host, named. Whole scale: taken.
  jpeg_encode_options o410;
  o410.h = 4;
  o410.v = 2;
  const auto f410 = encode_jpeg_with(test::jpeg_picture(96, 64, 9), 96, 64, o410);
  jpeg_pack_options s410;
  s410.window = image_region{8, 8, 40, 40};
  s410.scale_denom = 2;
  const jpeg_pack_result refused = pack_jpeg(f410, "410.jpg", s410, packed);
  CHECK(refused.fallback == jpeg_fallback::sampling);
  CHECK(refused.reason.find("upsamples a component of a larger IDCT") != std::string::npos);
  s410.scale_denom = 1;
  CHECK(pack_jpeg(f410, "410.jpg", s410, packed).fallback == jpeg_fallback::none);
  CHECK(device_half(packed) == host_window(f410, *s410.window));
  opts.scale_denom = 3;
  CHECK_THROWS_WITH_AS((void)pack_jpeg(file, "odd.jpg", opts, packed), doctest::Contains("odd.jpg: scale_denom 3 (1, 2, 4 or 8"),
                       std::invalid_argument);
}

TEST_CASE("jpeg_pack.a_small_window_stores_only_its_blocks") {
  const auto file = test::jpeg_file(320, 240, 5, test::jpeg_layouts()[2], {});  // 4:2:0: iMCUs of 16x16
  jpeg_pack_options opts;
  opts.window = image_region{100, 100, 32, 32};
  jpeg_packed packed;
  REQUIRE(pack_jpeg(file, "test", opts, packed).fallback == jpeg_fallback::none);
  // x: pixels 100..131 need chroma 49..66, iMCUs 6..8 (x0 = (100 - 2) / 16 = 6, x1 = (131 + 2) / 16 + 1 = 9).
  CHECK(packed.image.mcu_x == 6);
  CHECK(packed.image.mcu_y == 6);
  CHECK(packed.image.comp[0].width_in_blocks == 6);
  CHECK(packed.image.comp[0].height_in_blocks == 6);
  CHECK(packed.image.comp[1].width_in_blocks == 3);
  CHECK(packed.starts.size() == 6 * 6 + 2 * 3 * 3);
  CHECK(device_half(packed) == host_window(file, *opts.window));
}

TEST_CASE("jpeg_pack.files_it_does_not_take_say_why") {
  const auto picture = test::jpeg_picture(16, 16, 1);
  jpeg_packed packed;
  jpeg_encode_options arith;
  arith.arithmetic = true;
  CHECK(pack_jpeg(encode_jpeg_with(picture, 16, 16, arith), "a.jpg", {}, packed).fallback == jpeg_fallback::arithmetic);
  const std::vector<std::byte> png{std::byte{0x89}, std::byte{'P'}, std::byte{'N'}, std::byte{'G'}};
  CHECK(pack_jpeg(png, "x.png", {}, packed).fallback == jpeg_fallback::not_jpeg);
  const auto good = encode_jpeg_with(picture, 16, 16, {});
  for (std::size_t keep : {good.size() / 2, good.size() - 4, std::size_t{3}}) {
    CAPTURE(keep);
    const std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(keep));
    const jpeg_pack_result r = pack_jpeg(cut, "cut.jpg", {}, packed);
    CHECK(r.fallback == jpeg_fallback::corrupt);
    CHECK_FALSE(r.reason.empty());
  }
  jpeg_pack_options small;
  small.max_bytes = 100;
  const jpeg_pack_result big = pack_jpeg(good, "big.jpg", small, packed);
  CHECK(big.fallback == jpeg_fallback::too_large);
  CHECK(big.reason.find("100") != std::string::npos);
  CHECK(std::string(to_string(jpeg_fallback::too_large)) == "too large for its slot");
  small.max_bytes = 1 << 20;
  CHECK(pack_jpeg(good, "big.jpg", small, packed).fallback == jpeg_fallback::none);
  jpeg_pack_options few;
  few.max_pixels = 100;
  CHECK_THROWS_WITH_AS((void)pack_jpeg(good, "big.jpg", few, packed), doctest::Contains("big.jpg: 16x16 pixels, more than the limit of 100"),
                       std::runtime_error);
  for (const image_region& w : {image_region{0, 0, 0, 4}, image_region{0, 10, 4, 7}, image_region{-1, 0, 4, 4}}) {
    jpeg_pack_options bad;
    bad.window = w;
    CHECK_THROWS_WITH_AS((void)pack_jpeg(good, "w.jpg", bad, packed), doctest::Contains("w.jpg: window"), std::invalid_argument);
  }
}

TEST_CASE("jpeg_pack.corrupt_streams_fall_back_or_decode_as_the_host_path") {
  // Bit flips and truncations in the entropy-coded data: where the host decode path refuses the
  // file, the walker must refuse it too (the loader then decodes it on the host, which names the
  // error); where both take it, the pixels must be the same. For windows as for whole images.
  const auto good = test::jpeg_file(160, 120, 77, test::jpeg_layouts()[2], {});
  const std::optional<image_region> windows[] = {std::nullopt, image_region{0, 0, 40, 50}, image_region{37, 61, 50, 70}};
  std::mt19937 rng(5);
  int both_failed = 0, both_decoded = 0, only_walker_failed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto bad = good;
    if (trial % 4 == 0) {
      bad.resize(700 + rng() % (good.size() - 700));
    } else {
      for (int flips = 1 + trial % 3; flips > 0; --flips)
        bad[700 + rng() % (bad.size() - 702)] ^= static_cast<std::byte>(1u << (rng() % 8));
    }
    for (const auto& w : windows) {
      CAPTURE(trial);
      CAPTURE(w.has_value());
      jpeg_pack_options opts;
      opts.window = w;
      jpeg_packed packed;
      const jpeg_pack_result r = pack_jpeg(bad, "bad.jpg", opts, packed);
      std::vector<std::uint8_t> host;
      bool host_ok = true;
      try {
        host = w ? host_window(bad, *w) : test::host_pixels(bad);
      } catch (const std::runtime_error&) {
        host_ok = false;
      }
      if (r.fallback == jpeg_fallback::none) {
        CHECK(host_ok);
        if (host_ok) CHECK(device_half(packed) == host);
        both_decoded += host_ok ? 1 : 0;
      } else {
        CHECK((r.fallback == jpeg_fallback::corrupt || r.fallback == jpeg_fallback::range));
        (host_ok ? only_walker_failed : both_failed) += 1;
      }
    }
  }
  MESSAGE("both failed " << both_failed << ", both decoded " << both_decoded << ", only the walker failed " << only_walker_failed);
  CHECK(both_failed > 50);
  CHECK(both_decoded > 20);
}

TEST_CASE("jpeg_pack.blocks_past_the_idct_range_are_found") {
  // A DC-only block's samples are its dequantized DC / 8 before the range limit: within
  // [-512, 511] every host agrees, past it libjpeg-turbo's SIMD saturates where its C code wraps.
  std::int16_t coef[64] = {};
  std::uint16_t q[64];
  for (auto& s : q) s = 4;
  for (const auto& [dc, same] : {std::pair{2000, true}, std::pair{4084, true}, std::pair{4096, false}, std::pair{-4096, true},
                                 std::pair{-4200, false}, std::pair{0, true}}) {
    CAPTURE(dc);
    coef[0] = static_cast<std::int16_t>(dc / 4);
    CHECK(ops::jpeg_block_same_on_every_host(coef, q) == same);
  }
  coef[0] = 0;
  coef[9] = 20000;  // dequantized 80000: past 16 bits
  CHECK_FALSE(ops::jpeg_block_same_on_every_host(coef, q));
}

TEST_CASE("jpeg_pack.the_range_bound_weighs_every_coefficient_by_its_step_and_idct_gain") {
  // Contract: a block goes to the whole check (ops::jpeg_block_same_on_every_host) whenever its
  // samples may leave [-500, 500], whichever coefficients carry it: the bound weighs each zigzag
  // position by its step times the largest magnitude its basis function reaches in the 8 x 8 IDCT
  // (in 1/4096ths, rounded up). A table that left a position out (the last one, say) would let a
  // block whose energy sits there through to the device unchecked.
  JQUANT_TBL q{};
  for (int n = 0; n < 64; ++n) q.quantval[n] = static_cast<UINT16>(1 + (n * 37) % 255);
  std::int64_t gain[64];
  std::fill(std::begin(gain), std::end(gain), std::int64_t{-1});
  loaders::detail::gain_table(q, gain);
  const double pi = 3.14159265358979323846;
  for (int z = 0; z < 64; ++z) {
    const int n = loaders::detail::entropy::kNatural[static_cast<std::size_t>(z)];
    const int u = n / 8, v = n % 8;
    double most = 0;  // the basis function's largest sample, found by evaluating all 64
    for (int x = 0; x < 8; ++x)
      for (int y = 0; y < 8; ++y) {
        const double cu = u == 0 ? 1 / std::sqrt(2.0) : 1.0, cv = v == 0 ? 1 / std::sqrt(2.0) : 1.0;
        most = std::max(most, std::fabs(cu * cv / 4 * std::cos((2 * x + 1) * u * pi / 16) * std::cos((2 * y + 1) * v * pi / 16)));
      }
    CAPTURE(z);
    const double exact = q.quantval[n] * most * 4096;
    CHECK(static_cast<double>(gain[z]) >= exact - 1e-6);
    CHECK(static_cast<double>(gain[z]) <= exact + q.quantval[n]);
  }
  // The last coefficient alone, 20 at a step of 255, reaches about 1228 in magnitude: past the bound.
  q.quantval[63] = 255;
  loaders::detail::gain_table(q, gain);
  CHECK(20 * gain[63] > loaders::detail::kMostGain);
}
