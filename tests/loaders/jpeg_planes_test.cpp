// The two halves of JPEG decoding on the host: coefficients read from a file, then the planes'
// reference decode, must give the host decode path's pixels bit for bit, for every chroma layout,
// size and coding option; files the device half does not take say why; bad batches are named.
#include <doctest/doctest.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "jpeg_fixtures.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

/// Decodes the batch of `files` with the planes' host reference and compares each image with the
/// host decode path; returns the images that differ (0 when all are exact).
int differing(const std::vector<std::vector<std::byte>>& files, const std::vector<std::string>& names) {
  jpeg_batch batch;
  for (const auto& f : files) {
    const jpeg_read r = read_jpeg_coefficients(f, "test");
    REQUIRE_MESSAGE(r.coefficients.has_value(), r.reason);
    batch.append(*r.coefficients);
  }
  std::vector<std::uint8_t> out(batch.out_bytes, 0xEE), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(batch.view(), out.data(), out.size(), scratch.data(), scratch.size());
  int bad = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto want = test::host_pixels(files[i]);
    const ops::jpeg_image& im = batch.images[i];
    REQUIRE(want.size() == ops::jpeg_output_bytes(im));
    if (std::memcmp(want.data(), out.data() + im.out_offset, want.size()) != 0) {
      std::size_t at = 0;
      while (want[at] == out[im.out_offset + at]) ++at;
      MESSAGE(names[i] << ": first difference at byte " << at << " (pixel " << at / 3 << "): " << int(out[im.out_offset + at])
                       << " against the host path's " << int(want[at]));
      ++bad;
    }
  }
  return bad;
}

/// The images of `files` decoded at 1/denom by the planes' host reference, against libjpeg's
/// decode at that scale; returns the images that differ.
int differing_at_scale(const std::vector<std::vector<std::byte>>& files, const std::vector<std::string>& names, unsigned denom) {
  jpeg_batch batch;
  for (const auto& f : files) {
    const jpeg_read r = read_jpeg_coefficients(f, "test");
    REQUIRE_MESSAGE(r.coefficients.has_value(), r.reason);
    jpeg_coefficients c = *r.coefficients;
    c.image.scale = static_cast<std::uint8_t>(8 / denom);
    ops::jpeg_component_scales(c.image);
    batch.append(c);
  }
  std::vector<std::uint8_t> out(batch.out_bytes, 0xEE), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(batch.view(), out.data(), out.size(), scratch.data(), scratch.size());
  int bad = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto want = test::libjpeg_scaled(files[i], denom);
    const ops::jpeg_image& im = batch.images[i];
    REQUIRE(want.size() == ops::jpeg_output_bytes(im));
    if (std::memcmp(want.data(), out.data() + im.out_offset, want.size()) != 0) {
      std::size_t at = 0;
      while (want[at] == out[im.out_offset + at]) ++at;
      MESSAGE(names[i] << " at 1/" << denom << ": first difference at byte " << at << " (pixel " << at / 3
                       << "): " << int(out[im.out_offset + at]) << " against libjpeg's " << int(want[at]));
      ++bad;
    }
  }
  return bad;
}

}  // namespace

// libjpeg-turbo's C IDCTs (exported by its library, declared in its private jdct.h).
extern "C" {
void jpeg_idct_islow(j_decompress_ptr, jpeg_component_info*, JCOEFPTR, JSAMPARRAY, JDIMENSION);
void jpeg_idct_4x4(j_decompress_ptr, jpeg_component_info*, JCOEFPTR, JSAMPARRAY, JDIMENSION);
void jpeg_idct_2x2(j_decompress_ptr, jpeg_component_info*, JCOEFPTR, JSAMPARRAY, JDIMENSION);
void jpeg_idct_1x1(j_decompress_ptr, jpeg_component_info*, JCOEFPTR, JSAMPARRAY, JDIMENSION);
}

TEST_CASE("jpeg_planes.every_dct_scale_equals_libjpegs_scaled_decode") {
  // Whole images at 1/2, 1/4 and 1/8: the reduced IDCTs, each component at libjpeg's size for it
  // (4:2:0 chroma at 8x8 in a 1/2 decode, at 4x4 in a 1/4 one), and no filtering at 1/8.
  const int sizes[][2] = {{1, 1}, {2, 5}, {7, 9}, {17, 33}, {33, 17}, {61, 47}, {500, 375}};
  for (unsigned denom : {2u, 4u, 8u}) {
    std::vector<std::vector<std::byte>> files;
    std::vector<std::string> names;
    std::uint32_t seed = 40;
    for (const auto& layout : test::jpeg_layouts())
      for (const auto& s : sizes)
        for (int q : {75, 100}) {
          jpeg_encode_options o;
          o.quality = q;
          files.push_back(test::jpeg_file(s[0], s[1], ++seed, layout, o));
          names.push_back(std::string(layout.name) + " " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + " q" + std::to_string(q));
        }
    CHECK(differing_at_scale(files, names, denom) == 0);
  }
}

TEST_CASE("jpeg_planes.component_scales_are_libjpegs") {
  // libjpeg's own choice (jpeg_calc_output_dimensions) for every layout and scale.
  for (const auto& layout : test::jpeg_layouts()) {
    const auto file = test::jpeg_file(40, 24, 3, layout, {});
    const jpeg_read r = read_jpeg_coefficients(file, "test");
    REQUIRE(r.coefficients.has_value());
    for (unsigned denom : {1u, 2u, 4u, 8u}) {
      CAPTURE(layout.name);
      CAPTURE(denom);
      test::libjpeg_reader reader(file);
      jpeg_decompress_struct& c = reader.c;
      c.scale_num = 1;
      c.scale_denom = denom;
      jpeg_calc_output_dimensions(&c);
      ops::jpeg_image im = r.coefficients->image;
      im.scale = static_cast<std::uint8_t>(8 / denom);
      ops::jpeg_component_scales(im);
      CHECK(im.scale == c.min_DCT_scaled_size);
      CHECK(ops::jpeg_scaled_width(im) == c.output_width);
      CHECK(ops::jpeg_scaled_height(im) == c.output_height);
      for (int k = 0; k < c.num_components; ++k) CHECK(im.comp[k].dct == c.comp_info[k].DCT_scaled_size);
    }
  }
}

TEST_CASE("jpeg_planes.reduced_idcts_equal_libjpegs_c_code_on_any_block") {
  // Blocks of every kind (DC only, random values of every size, values past 16 bits dequantized,
  // samples that wrap in the range limit) through libjpeg-turbo's C IDCTs and through a grey
  // one-block image decoded here at the matching scale: the same samples, bit for bit.
  const auto file = test::jpeg_file(8, 8, 1, test::jpeg_layouts()[5], {});
  test::libjpeg_reader reader(file);
  jpeg_decompress_struct& c = reader.c;
  jpeg_start_decompress(&c);  // sets the range-limit table the IDCTs read
  short table[64];  // libjpeg-turbo's ISLOW_MULT_TYPE (short in its SIMD builds)
  jpeg_component_info comp = c.comp_info[0];
  comp.dct_table = table;
  std::mt19937 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::int16_t coef[64] = {};
    std::uint16_t q[64];
    const int kind = trial % 5;
    for (int i = 0; i < 64; ++i) {
      q[i] = static_cast<std::uint16_t>(kind == 4 ? 1 + rng() % 32767 : 1 + rng() % 64);
      table[i] = static_cast<short>(q[i]);
    }
    const int most = kind == 0 ? 0 : kind == 1 ? 8 : kind == 2 ? 200 : 32767;
    coef[0] = static_cast<std::int16_t>(static_cast<int>(rng() % 4001) - 2000);
    for (int i = 1; i < 64 && most > 0; ++i)
      if (rng() % 3 == 0) coef[i] = static_cast<std::int16_t>(static_cast<int>(rng() % (2 * most + 1)) - most);
    for (unsigned denom : {1u, 2u, 4u, 8u}) {
      const int n = static_cast<int>(8 / denom);
      JSAMPLE rows[8][8];
      JSAMPROW ptrs[8];
      for (int r = 0; r < 8; ++r) ptrs[r] = rows[r];
      JCOEF block[64];
      for (int i = 0; i < 64; ++i) block[i] = coef[i];
      auto* idct = n == 8 ? jpeg_idct_islow : n == 4 ? jpeg_idct_4x4 : n == 2 ? jpeg_idct_2x2 : jpeg_idct_1x1;
      idct(&c, &comp, block, ptrs, 0);
      jpeg_coefficients one;
      one.image.width = one.image.height = 8;
      one.image.components = 1;
      one.image.scale = static_cast<std::uint8_t>(n);
      one.image.comp[0] = {1, 1, 0, 1, 1, 0, static_cast<std::uint8_t>(n)};
      one.blocks.assign(coef, coef + 64);
      one.quant.assign(q, q + 64);
      jpeg_batch b;
      b.append(one);
      std::vector<std::uint8_t> out(b.out_bytes), scratch(b.scratch_bytes);
      ops::decode_jpeg_batch_host(b.view(), out.data(), out.size(), scratch.data(), scratch.size());
      REQUIRE(out.size() == static_cast<std::size_t>(n * n * 3));
      bool same = true;
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) same = same && out[static_cast<std::size_t>(y * n + x) * 3] == rows[y][x];
      if (!same) FAIL_CHECK("trial " << trial << " (kind " << kind << ") at 1/" << denom << " differs from libjpeg's C IDCT");
      ++compared;
    }
  }
  jpeg_abort_decompress(&c);
  CHECK(compared == 12000);
}

TEST_CASE("jpeg_planes.every_layout_and_size_equals_the_host_decode_in_one_batch") {
  // One batch mixing every layout with sizes from 1x1 up: 2 and 3 wide (chroma of 1 and 2 samples,
  // where libjpeg replicates instead of filtering), odd sizes that cut blocks and MCUs, a photo size.
  const int sizes[][2] = {{1, 1}, {2, 5}, {3, 5}, {4, 4}, {7, 9}, {17, 33}, {33, 17}, {500, 375}};
  std::vector<std::vector<std::byte>> files;
  std::vector<std::string> names;
  std::uint32_t seed = 0;
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& s : sizes)
      for (int q : {75, 100}) {  // 100: every quantization step 1
        jpeg_encode_options o;
        o.quality = q;
        files.push_back(test::jpeg_file(s[0], s[1], ++seed, layout, o));
        names.push_back(std::string(layout.name) + " " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + " q" + std::to_string(q));
      }
  CHECK(differing(files, names) == 0);
}

TEST_CASE("jpeg_planes.coding_options_change_nothing_after_the_entropy_decoder") {
  // Restart intervals, optimized Huffman tables and progressive files (all scans read) give the
  // coefficients the host decode's pixels come from.
  std::vector<std::vector<std::byte>> files;
  std::vector<std::string> names;
  for (const auto& layout : test::jpeg_layouts()) {
    for (int variant = 0; variant < 3; ++variant) {
      jpeg_encode_options o;
      o.quality = 90;
      o.restart_interval = variant == 0 ? 3 : 0;
      o.optimize = variant == 1;
      o.progressive = variant == 2;
      files.push_back(test::jpeg_file(45, 31, 7 + static_cast<std::uint32_t>(variant), layout, o));
      names.push_back(std::string(layout.name) + (variant == 0 ? " restarts" : variant == 1 ? " optimized" : " progressive"));
    }
  }
  CHECK(differing(files, names) == 0);
}

TEST_CASE("jpeg_planes.the_range_limit_wraps_as_libjpegs_c_code") {
  // A grey 8x8 image of one block with only a DC coefficient: every sample is
  // range_limit((4 DC + 16) >> 5), the 10 low bits of it looked up. 2000 -> 250 (255: past 127),
  // 4096 -> 512 (wraps to 0, as -512 does), -2000 -> -250 (0), -4096 -> -512 (0), 4084 -> 511 (255),
  // 8180 -> 1023 (wraps to 127), 8188 -> 1024 (wraps to 128). libjpeg-turbo's SIMD IDCTs saturate
  // instead (255 for the large ones, 0 for the negative): pinfeed follows the C code, the same on
  // every host and on the device.
  const std::pair<int, int> dc_expect[] = {{2000, 255}, {4096, 0}, {-2000, 0}, {-4096, 0},
                                           {4084, 255}, {8180, 127}, {8188, 128}, {0, 128}};
  for (const auto& [dc, expect] : dc_expect) {
    CAPTURE(dc);
    jpeg_coefficients c;
    c.image.width = c.image.height = 8;
    c.image.components = 1;
    c.image.comp[0] = {1, 1, 0, 1, 1, 0};
    c.blocks.assign(64, 0);
    c.blocks[0] = static_cast<std::int16_t>(dc / 4);  // DC 4x: step 4 in the table
    c.quant.assign(64, 4);
    jpeg_batch b;
    b.append(c);
    std::vector<std::uint8_t> out(b.out_bytes), scratch(b.scratch_bytes);
    ops::decode_jpeg_batch_host(b.view(), out.data(), out.size(), scratch.data(), scratch.size());
    for (auto v : out) CHECK(int(v) == expect);
  }
}

TEST_CASE("jpeg_planes.files_the_device_half_does_not_take_say_why") {
  const auto picture = test::jpeg_picture(16, 16, 1);
  jpeg_encode_options arith;
  arith.arithmetic = true;
  const jpeg_read a = read_jpeg_coefficients(encode_jpeg_with(picture, 16, 16, arith), "arith.jpg");
  CHECK(a.fallback == jpeg_fallback::arithmetic);
  CHECK_FALSE(a.coefficients.has_value());
  std::vector<std::byte> png{std::byte{0x89}, std::byte{'P'}, std::byte{'N'}, std::byte{'G'}};
  CHECK(read_jpeg_coefficients(png, "x.png").fallback == jpeg_fallback::not_jpeg);
  auto cut = encode_jpeg_with(picture, 16, 16, {});
  cut.resize(cut.size() / 2);  // truncated: libjpeg's warning is an error here, as on the host path
  const jpeg_read t = read_jpeg_coefficients(cut, "cut.jpg");
  CHECK(t.fallback == jpeg_fallback::corrupt);
  CHECK(!t.reason.empty());
  CHECK(std::string(to_string(jpeg_fallback::colour)) == "colour space");
  CHECK_THROWS_WITH_AS((void)read_jpeg_coefficients(encode_jpeg_with(picture, 16, 16, {}), "big.jpg", 100),
                       doctest::Contains("big.jpg: 16x16 pixels, more than the limit of 100"), std::runtime_error);
}

TEST_CASE("jpeg_planes.bad_batches_are_named") {
  jpeg_coefficients c;
  c.image.width = 16;
  c.image.height = 8;
  c.image.components = 1;
  c.image.comp[0] = {1, 1, 0, 2, 1, 0};
  c.blocks.assign(2 * 64, 0);
  c.quant.assign(64, 1);
  jpeg_batch b;
  b.append(c);
  std::vector<std::uint8_t> out(b.out_bytes), scratch(b.scratch_bytes);
  CHECK_NOTHROW(ops::decode_jpeg_batch_host(b.view(), out.data(), out.size(), scratch.data(), scratch.size()));
  CHECK_THROWS_WITH_AS(ops::decode_jpeg_batch_host(b.view(), out.data(), out.size() - 1, scratch.data(), scratch.size()),
                       doctest::Contains("image 0: its output ends at byte 384, past the 383 given"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::decode_jpeg_batch_host(b.view(), out.data(), out.size(), scratch.data(), scratch.size() - 1),
                       doctest::Contains("past the 127 of scratch given"), std::invalid_argument);
  jpeg_batch few = b;
  few.images[0].comp[0].width_in_blocks = 1;  // 8 samples for 16 pixels
  CHECK_THROWS_WITH_AS(ops::check_jpeg_batch(few.view(), out.size(), scratch.size()),
                       doctest::Contains("component 0 stores samples [0, 8) x [0, 8), not all of the [0, 16) x [0, 8) its window of 16x8 pixels reads"), std::invalid_argument);
  jpeg_batch fractional = b;
  fractional.images[0].max_h = 3;
  fractional.images[0].comp[0].h = 2;
  CHECK_THROWS_WITH_AS(ops::check_jpeg_batch(fractional.view(), out.size(), scratch.size()),
                       doctest::Contains("sampling factors 2x1 against 3x1"), std::invalid_argument);
  jpeg_batch zero = b;
  zero.quant[5] = 0;
  CHECK_THROWS_WITH_AS(ops::check_jpeg_batch(zero.view(), out.size(), scratch.size()),
                       doctest::Contains("quantization table 0 has step 0 at 5"), std::invalid_argument);
  jpeg_batch past = b;
  past.images[0].comp[0].first_block = 1;  // its two blocks would end past the batch's two
  CHECK_THROWS_WITH_AS(ops::check_jpeg_batch(past.view(), out.size(), scratch.size()),
                       doctest::Contains("component 0's blocks [1, +2) are past the batch's 2"), std::invalid_argument);
}

TEST_CASE("jpeg_planes.the_device_call_checks_before_it_queues_anything") {
  // Its geometry is read from the host copy and refused before any CUDA call: here, without a GPU,
  // the refusal is what reaches the caller, not a CUDA error.
  jpeg_coefficients c;
  c.image.width = c.image.height = 8;
  c.image.components = 1;
  c.image.comp[0] = {1, 1, 0, 1, 1, 0};
  c.blocks.assign(64, 0);
  c.quant.assign(64, 1);
  jpeg_batch b;
  b.append(c);
  CHECK_THROWS_WITH_AS(ops::decode_jpeg_batch_device(b.view(), nullptr, nullptr, b.out_bytes, nullptr, b.scratch_bytes, nullptr),
                       doctest::Contains("no host copy of their geometry"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::decode_jpeg_batch_device(b.view(), b.images.data(), nullptr, b.out_bytes - 3, nullptr, b.scratch_bytes, nullptr),
                       doctest::Contains("image 0: its output ends at byte 192, past the 189 given"), std::invalid_argument);
  ops::jpeg_batch_view no_tables = b.view();
  no_tables.quant_count = 0;
  CHECK_THROWS_WITH_AS(ops::decode_jpeg_batch_device(no_tables, b.images.data(), nullptr, b.out_bytes, nullptr, b.scratch_bytes, nullptr),
                       doctest::Contains("quantization table 0 is past the batch's 0"), std::invalid_argument);
  // An empty batch is nothing to do, with or without a device.
  CHECK_NOTHROW(ops::decode_jpeg_batch_device({}, nullptr, nullptr, 0, nullptr, 0, nullptr));
}

TEST_CASE("jpeg_planes.packed_blocks_round_trip_and_are_a_fraction_of_the_dense_ones") {
  // Files at quality 90: their blocks packed and back are the same, and smaller than the dense
  // int16 blocks: a noisy picture's (gradients, edges and noise in every pixel) to under half, a
  // smooth one's (gradients: most of its bytes are DC values and end bytes) to under an eighth;
  // blocks of extremes (every coefficient, 2-byte values, long zero runs) too. (The inputs are fixed: the sizes are too.)
  const jpeg_read r = read_jpeg_coefficients(test::jpeg_file(200, 150, 3, test::jpeg_layouts()[2], {}), "noisy");
  REQUIRE(r.coefficients.has_value());
  std::vector<std::uint8_t> noisy;
  ops::pack_jpeg_blocks(r.coefficients->blocks, noisy);
  const std::size_t dense = r.coefficients->blocks.size() * 2;
  MESSAGE("noisy q90, " << dense / 128 << " blocks: " << noisy.size() << " bytes packed, " << dense << " dense");
  CHECK(noisy.size() * 10 < dense * 5);
  std::vector<std::uint8_t> smooth_rgb(200 * 150 * 3);
  for (std::size_t i = 0; i < smooth_rgb.size(); ++i) smooth_rgb[i] = static_cast<std::uint8_t>((i / 3 % 200 + i / 600 + (i % 3) * 40) % 256);
  const jpeg_read sm = read_jpeg_coefficients(encode_jpeg_with(smooth_rgb, 200, 150, {}), "smooth");
  REQUIRE(sm.coefficients.has_value());
  std::vector<std::uint8_t> smooth;
  ops::pack_jpeg_blocks(sm.coefficients->blocks, smooth);
  MESSAGE("smooth q90: " << smooth.size() << " bytes packed, " << sm.coefficients->blocks.size() * 2 << " dense");
  CHECK(smooth.size() * 8 < sm.coefficients->blocks.size() * 2);
  std::vector<std::int16_t> blocks = r.coefficients->blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<std::int16_t>(i % 2 ? -2047 + i : 127 + i));  // wide values
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<std::int16_t>(i % 3 == 0 ? 0 : i % 3 == 1 ? -8 : 7));  // nibble edges
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<std::int16_t>(i == 63 || i == 17 ? -7 : 0));  // runs of 16 and more
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<std::int16_t>(i == 0 ? 8 : 0));
  std::vector<std::uint8_t> packed;
  ops::pack_jpeg_blocks(blocks, packed);
  std::vector<std::int16_t> back(blocks.size(), 99);
  ops::unpack_jpeg_blocks(packed, blocks.size() / 64, back.data());
  CHECK(back == blocks);
  std::vector<std::uint8_t> empty;
  ops::pack_jpeg_blocks(std::vector<std::int16_t>(64, 0), empty);
  CHECK(empty == std::vector<std::uint8_t>{0x08});  // a block of zeros is its end byte
  std::vector<std::int16_t> one(64, 0);
  one[0] = -3;     // zigzag 0: run 0, nibble 13
  one[1] = 100;    // zigzag 1: run 0, 2 bytes
  one[63] = 1;     // zigzag 63: 61 zeros = 16 x 3 + 13
  std::vector<std::uint8_t> bytes;
  ops::pack_jpeg_blocks(one, bytes);
  CHECK(bytes == std::vector<std::uint8_t>{0x0D, 0x00, 100, 0, 0xF8, 0xF8, 0xF8, 0xD1, 0x08});
}

TEST_CASE("jpeg_planes.malformed_packed_blocks_are_named") {
  std::vector<std::int16_t> out(128);
  const auto fails = [&](std::vector<std::uint8_t> bytes, std::uint64_t blocks, const char* what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(ops::unpack_jpeg_blocks(bytes, blocks, out.data()), doctest::Contains(what), std::invalid_argument);
  };
  fails({}, 1, "block 0, byte 0: the data ends inside the block (no end byte)");
  fails({0x01, 0x21}, 1, "block 0, byte 2: the data ends inside the block");
  fails({0x18}, 1, "block 0, byte 0: byte 24 is neither the end nor 16 zeros");
  fails({0xF8, 0xF8, 0xF8, 0xF8}, 1, "block 0, byte 3: zigzag index 64 is past 63");
  fails({0xF8, 0xF8, 0xF8, 0xF1, 0x01, 0x08}, 1, "block 0, byte 4: zigzag index 64 is past 63");
  fails({0x01, 0xF8, 0x08}, 1, "block 0, byte 2: 16 zeros right before the end");
  fails({0x00, 5, 0, 0x08}, 1, "value 5 written in 2 bytes fits in 4 bits");
  fails({0x00, 0, 0, 0x08}, 1, "value 0 written in 2 bytes fits in 4 bits");
  fails({0x00, 9}, 1, "the data ends inside a 2-byte value");
  fails({0x08, 0x08, 0x08}, 2, "block 2, byte 2: 1 bytes left after the last block");
  fails({0x08}, 2, "block 1, byte 1: the data ends inside the block");
  CHECK_THROWS_WITH_AS(ops::pack_jpeg_blocks(std::vector<std::int16_t>(65), *std::make_unique<std::vector<std::uint8_t>>()),
                       doctest::Contains("65 coefficients, not whole blocks of 64"), std::invalid_argument);
}

TEST_CASE("jpeg_planes.the_device_unpack_checks_its_pointers_first") {
  std::uint32_t starts[1] = {0};
  std::int16_t blocks[64];
  CHECK_THROWS_WITH_AS(ops::unpack_jpeg_blocks_device(nullptr, 0, starts, 1, blocks, nullptr, nullptr),
                       doctest::Contains("1 blocks but a null pointer"), std::invalid_argument);
  CHECK_NOTHROW(ops::unpack_jpeg_blocks_device(nullptr, 0, nullptr, 0, nullptr, nullptr, nullptr));  // nothing to do
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> at;
  ops::pack_jpeg_blocks(std::vector<std::int16_t>(128, 1), bytes, &at);
  CHECK(at == std::vector<std::uint32_t>{0, static_cast<std::uint32_t>(bytes.size() / 2)});
}
