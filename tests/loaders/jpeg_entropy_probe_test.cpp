// The entropy decoder's own figures (jpeg_entropy_probe, `pinfeed bench decode`): the walk it times
// is pack_jpeg()'s, and the symbols and bits it counts are the file's, checked against a count
// made from libjpeg's coefficients (what a baseline encoder writes for them) and the scan's length.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "jpeg_fixtures.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/runtime/error.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

/// The Huffman symbols a baseline encoder writes for a block (natural order): its DC difference,
/// a ZRL for each 16 zeros before a nonzero value, the value, and an end of block unless
/// coefficient 63 is nonzero.
/// How many blocks held a run of 16 zeros or more (ZRL) and how many a nonzero coefficient 63 (no
/// end of block): the fixtures must hold both, or the count would not test them.
struct symbol_kinds {
  std::uint64_t zrl = 0, full = 0;
};

std::uint64_t symbols_of(const std::int16_t* block, symbol_kinds& kinds) {
  static const int zigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
                                 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
                                 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  std::uint64_t n = 1;
  int zeros = 0;
  for (int k = 1; k < 64; ++k) {
    if (block[zigzag[k]] == 0) {
      ++zeros;
      continue;
    }
    n += static_cast<std::uint64_t>(zeros / 16) + 1;
    kinds.zrl += zeros >= 16 ? 1 : 0;
    zeros = 0;
  }
  kinds.full += zeros == 0 ? 1 : 0;
  return n + (zeros > 0 ? 1 : 0);
}

/// The entropy-coded bytes of a file's only scan: from the end of its SOS segment to the EOI marker.
std::uint64_t scan_bytes(const std::vector<std::byte>& file) {
  for (std::size_t i = 2; i + 3 < file.size();) {
    REQUIRE(file[i] == std::byte{0xFF});
    const auto marker = static_cast<int>(file[i + 1]);
    const std::size_t length = (static_cast<std::size_t>(file[i + 2]) << 8) | static_cast<std::size_t>(file[i + 3]);
    if (marker == 0xDA) return file.size() - 2 - (i + 2 + length);
    i += 2 + length;
  }
  FAIL("no SOS marker");
  return 0;
}

}  // namespace

TEST_CASE("jpeg_entropy.the_probe_counts_the_symbols_and_bits_the_encoder_wrote") {
  const int sizes[][2] = {{7, 9}, {33, 17}, {125, 94}};
  std::uint32_t seed = 500;
  symbol_kinds kinds;
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& s : sizes)
      for (int variant = 0; variant < 3; ++variant) {
        jpeg_encode_options o;
        o.quality = variant == 1 ? 100 : 90;
        o.restart_interval = variant == 2 ? 3 : 0;
        const auto file = test::jpeg_file(s[0], s[1], ++seed, layout, o);
        CAPTURE(std::string(layout.name) + " " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + " variant " + std::to_string(variant));
        const jpeg_read read = read_jpeg_coefficients(file, "test");
        REQUIRE(read.coefficients.has_value());
        const auto& blocks = read.coefficients->blocks;
        std::uint64_t symbols = 0;
        for (std::size_t b = 0; b < blocks.size(); b += 64) symbols += symbols_of(blocks.data() + b, kinds);
        const std::uint64_t real = blocks.size() / 64;

        jpeg_entropy_probe probe(file, "test", {});
        const jpeg_entropy_counts n = probe.count();
        // The MCUs' blocks past the image's edge (interleaved scans) hold a DC difference and an
        // end of block each.
        REQUIRE(n.blocks >= real);
        if (layout.h == 1 && layout.v == 1) CHECK(n.blocks == real);
        CHECK(n.symbols == symbols + 2 * (n.blocks - real));
        // Every bit of the scan but the last byte's padding (and, with restarts, each interval's
        // padding and marker, which the scan's length holds too).
        const std::uint64_t bytes = scan_bytes(file);
        CHECK(n.bits <= bytes * 8);
        CHECK(n.bits > bytes * 8 - 8);
        probe.decode();  // the walk runs again and again on the same file
        probe.decode();
        CHECK(probe.count().symbols == n.symbols);
      }
  CHECK(kinds.zrl > 0);
  CHECK(kinds.full > 0);
}

TEST_CASE("jpeg_entropy.a_window_counts_the_rows_pack_jpeg_walks") {
  // 4:2:0, 125x94: 8 MCUs of 6 blocks a row, 6 rows. A window in the first MCU row is walked down
  // to the row after the one its upsampling reads (rows 0..2); one at the bottom, every row.
  const auto file = test::jpeg_file(125, 94, 77, test::jpeg_layouts()[2]);
  jpeg_pack_options top;
  top.window = image_region{0, 0, 16, 40};
  CHECK(jpeg_entropy_probe(file, "test", top).count().blocks == 3 * 8 * 6);
  jpeg_pack_options bottom;
  bottom.window = image_region{80, 10, 14, 40};
  CHECK(jpeg_entropy_probe(file, "test", bottom).count().blocks == 6 * 8 * 6);
}

TEST_CASE("jpeg_entropy.files_the_walk_does_not_take_are_refused_with_the_reason") {
  const auto& layout = test::jpeg_layouts()[2];
  jpeg_encode_options progressive;
  progressive.progressive = true;
  CHECK_THROWS_WITH_AS(jpeg_entropy_probe(test::jpeg_file(40, 30, 3, layout, progressive), "photo.jpg", {}),
                       doctest::Contains("photo.jpg: not one baseline scan"), pinfeed::runtime_error);
  auto cut = test::jpeg_file(40, 30, 3, layout);
  cut.resize(cut.size() / 2);
  CHECK_THROWS_WITH_AS(jpeg_entropy_probe(cut, "cut.jpg", {}), doctest::Contains("cut.jpg: the host half does not walk it (truncated or corrupt"),
                       pinfeed::runtime_error);
  jpeg_pack_options outside;
  outside.window = image_region{20, 0, 20, 40};
  CHECK_THROWS_WITH_AS(jpeg_entropy_probe(test::jpeg_file(40, 30, 3, layout), "w.jpg", outside), doctest::Contains("w.jpg: window"),
                       pinfeed::invalid_argument);
}
