// pinfeed's bilinear resize on the host: every byte as the arithmetic pinfeed/ops/resize.hpp states,
// computed here directly from that statement (a sample at a time, no row reuse), for shrinking,
// growing, single pixels, channels 1 to 4, strided input and flips; bad sizes named. The box
// reduction (decode device-inexact's stand-in for a DCT-scaled decode) likewise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/error.hpp"

using namespace pinfeed;

namespace {

/// The header's statement of one side: the two indices and the second's weight.
void taps(std::int64_t d, std::int64_t in, std::int64_t out, std::int64_t& i0, std::int64_t& i1, std::int64_t& f) {
  const std::int64_t s = (2 * d + 1) * in * 32768 / out - 32768;
  i0 = i1 = f = 0;
  if (s <= 0) return;
  i0 = s >> 16;
  if (i0 >= in - 1) {
    i0 = i1 = in - 1;
    return;
  }
  i1 = i0 + 1;
  f = (s & 0xFFFF) >> 5;
}

std::vector<std::uint8_t> reference(const std::vector<std::uint8_t>& in, std::size_t stride, std::int64_t ih, std::int64_t iw, int ch,
                                    std::int64_t oh, std::int64_t ow, bool flip) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(oh * ow * ch));
  for (std::int64_t y = 0; y < oh; ++y)
    for (std::int64_t x = 0; x < ow; ++x) {
      std::int64_t y0, y1, fy, x0, x1, fx;
      taps(y, ih, oh, y0, y1, fy);
      taps(flip ? ow - 1 - x : x, iw, ow, x0, x1, fx);
      for (int c = 0; c < ch; ++c) {
        const auto at = [&](std::int64_t r, std::int64_t k) { return std::int64_t{in[static_cast<std::size_t>(r) * stride + static_cast<std::size_t>(k * ch + c)]}; };
        const std::int64_t top = at(y0, x0) * (2048 - fx) + at(y0, x1) * fx, bottom = at(y1, x0) * (2048 - fx) + at(y1, x1) * fx;
        out[static_cast<std::size_t>((y * ow + x) * ch + c)] = static_cast<std::uint8_t>((top * (2048 - fy) + bottom * fy + (1 << 21)) >> 22);
      }
    }
  return out;
}

}  // namespace

TEST_CASE("resize.every_byte_as_the_stated_arithmetic") {
  const int sizes[][4] = {{1, 1, 1, 1},   {1, 1, 7, 5},     {7, 5, 1, 1},     {9, 13, 9, 13},  {375, 500, 224, 224},
                          {31, 17, 224, 224}, {224, 224, 31, 17}, {100, 3, 7, 200}, {2, 2, 3, 3},    {64, 48, 32, 24},
                          // Both orders of the host's resize: rows first (shrinking, rows up to 4 outputs wide),
                          // columns first (growing, or rows wider than that).
                          {300, 260, 224, 224}, {1000, 900, 224, 224}};
  std::uint32_t state = 1;
  int cases = 0;
  for (const auto& s : sizes)
    for (int ch : {1, 3, 4})
      for (bool flip : {false, true}) {
        CAPTURE(s[0]);
        CAPTURE(s[1]);
        CAPTURE(s[2]);
        CAPTURE(s[3]);
        CAPTURE(ch);
        CAPTURE(flip);
        const std::size_t stride = static_cast<std::size_t>(s[1] * ch + 5);  // rows with padding after them
        std::vector<std::uint8_t> in(stride * static_cast<std::size_t>(s[0]));
        for (auto& v : in) v = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
        std::vector<std::uint8_t> out(static_cast<std::size_t>(s[2] * s[3] * ch), 0xEE);
        ops::resize_bilinear_u8(in.data(), stride, s[0], s[1], ch, out.data(), s[2], s[3], flip);
        CHECK(out == reference(in, stride, s[0], s[1], ch, s[2], s[3], flip));
        ++cases;
      }
  CHECK(cases == 72);
}

TEST_CASE("resize.same_size_is_a_copy_and_extremes_hold") {
  std::vector<std::uint8_t> in(6 * 4 * 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 37);
  std::vector<std::uint8_t> out(in.size());
  ops::resize_bilinear_u8(in.data(), 4 * 3, 6, 4, 3, out.data(), 6, 4);
  CHECK(out == in);
  std::vector<std::uint8_t> white(10 * 10, 255), grown(33 * 21);
  ops::resize_bilinear_u8(white.data(), 10, 10, 10, 1, grown.data(), 33, 21);
  for (auto v : grown) CHECK(v == 255);  // weights sum to 2048 x 2048: no overflow, no loss
}

TEST_CASE("resize.bad_sizes_and_jobs_are_named") {
  std::vector<std::uint8_t> px(16);
  CHECK_THROWS_WITH_AS(ops::resize_bilinear_u8(px.data(), 4, 0, 4, 1, px.data(), 2, 2), doctest::Contains("resize: input 4x0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::resize_bilinear_u8(px.data(), 4, 4, 4, 1, px.data(), 2, std::int64_t{1} << 25),
                       doctest::Contains("resize: output 33554432x2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::resize_bilinear_u8(px.data(), 4, 4, 4, 5, px.data(), 2, 2), doctest::Contains("5 channels"),
                       std::invalid_argument);
  ops::resize_job j;
  j.in_h = j.in_w = 4;
  j.out_h = j.out_w = 2;
  CHECK_NOTHROW(ops::check_resize_jobs(&j, 1, 48, 12));
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 47, 12), doctest::Contains("job 0: its input [0, +48) is past the 47 bytes"),
                       std::invalid_argument);
  j.out_offset = 1;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 48, 12), doctest::Contains("its output [1, +12)"), std::invalid_argument);
  j.out_offset = 0;
  j.flip = 2;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 48, 12), doctest::Contains("flip 2"), std::invalid_argument);
  j.flip = 0;
  j.in_w = 0;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 48, 12), doctest::Contains("0x4 to 2x2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(nullptr, 2, 48, 12), doctest::Contains("2 jobs but none"), std::invalid_argument);
  // A window of a larger image: rows in_stride bytes apart, its last row ends the input it reads.
  j.in_w = 4;
  j.in_stride = 30;  // rows of a 10-pixel-wide image
  CHECK_NOTHROW(ops::check_resize_jobs(&j, 1, 30 * 3 + 12, 12));
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 30 * 3 + 11, 12), doctest::Contains("its input [0, +102) is past the 101 bytes"),
                       std::invalid_argument);
  j.in_stride = 11;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 200, 12), doctest::Contains("input rows 11 bytes apart, under the 12 of a row"),
                       std::invalid_argument);
}

TEST_CASE("resize.box_reduction_is_its_statement_and_bad_boxes_are_named") {
  // The header's statement, a sample at a time: the mean of the box's pixels clipped to the input,
  // (sum + n / 2) / n. Sizes that leave partial boxes on the right and at the bottom, every box.
  std::uint32_t state = 11;
  for (const std::uint32_t box : {1u, 2u, 3u, 4u, 8u}) {
    for (const auto [h, w] : {std::pair<std::int64_t, std::int64_t>{17, 23}, {8, 8}, {1, 1}, {9, 40}}) {
      CAPTURE(box);
      CAPTURE(w);
      CAPTURE(h);
      const std::size_t stride = static_cast<std::size_t>(w) * 3 + 5;  // rows apart by more than a row
      std::vector<std::uint8_t> in(stride * static_cast<std::size_t>(h));
      for (auto& v : in) v = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
      const std::int64_t oh = (h + box - 1) / box, ow = (w + box - 1) / box;
      std::vector<std::uint8_t> got(static_cast<std::size_t>(oh * ow * 3));
      ops::box_downscale_u8(in.data(), stride, h, w, box, got.data(), oh, ow);
      bool same = true;
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t x = 0; x < ow; ++x)
          for (int c = 0; c < 3; ++c) {
            std::uint32_t sum = 0, n = 0;
            for (std::int64_t yy = y * box; yy < std::min<std::int64_t>((y + 1) * box, h); ++yy)
              for (std::int64_t xx = x * box; xx < std::min<std::int64_t>((x + 1) * box, w); ++xx, ++n)
                sum += in[static_cast<std::size_t>(yy) * stride + static_cast<std::size_t>(xx * 3 + c)];
            same = same && got[static_cast<std::size_t>((y * ow + x) * 3 + c)] == (sum + n / 2) / n;
          }
      CHECK(same);
      if (box == 1) CHECK(std::equal(got.begin(), got.begin() + w * 3, in.begin()));  // a box of 1 is a copy
    }
  }
  // A half rounds up: the 2x2 box 1, 2 / 2, 5 has the mean 2.5, and (10 + 2) / 4 = 3.
  const std::vector<std::uint8_t> four{1, 1, 1, 2, 2, 2, 2, 2, 2, 5, 5, 5};
  std::uint8_t one[3];
  ops::box_downscale_u8(four.data(), 6, 2, 2, 2, one, 1, 1);
  CHECK(one[0] == 3);
  std::vector<std::uint8_t> px(300), out(300);
  CHECK_THROWS_WITH_AS(ops::box_downscale_u8(px.data(), 30, 10, 10, 0, out.data(), 1, 1), doctest::Contains("box 0 (1 to 8)"),
                       std::invalid_argument);
  // Past 8 (libjpeg's smallest scale), a box's sum and its pixel count could overflow.
  CHECK_THROWS_WITH_AS(ops::box_downscale_u8(px.data(), 30, 10, 10, 65536, out.data(), 1, 1), doctest::Contains("box 65536 (1 to 8)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::box_downscale_u8(px.data(), 30, 10, 10, 4, out.data(), 3, 4),
                       doctest::Contains("4x3 boxes of 4 do not all cover a pixel of the 10x10 input"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::box_downscale_u8(px.data(), 29, 10, 10, 2, out.data(), 5, 5),
                       doctest::Contains("input rows 29 bytes apart, under the 30 of a row"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::box_downscale_u8(px.data(), 30, 0, 10, 2, out.data(), 5, 5), doctest::Contains("10x0 to 5x5"),
                       std::invalid_argument);
  // A device job of a box reduction: its boxes cover its box_h x box_w, which lie inside the input.
  ops::resize_job j;
  j.in_h = 3;
  j.in_w = 5;  // the reduced window
  j.out_h = j.out_w = 2;
  j.box = 4;
  j.box_h = 10;
  j.box_w = 20;
  j.in_stride = 60;
  CHECK_NOTHROW(ops::check_resize_jobs(&j, 1, 60 * 9 + 60, 12));
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 60 * 9 + 59, 12), doctest::Contains("its input [0, +600) is past the 599 bytes"),
                       std::invalid_argument);
  j.box_w = 16;  // the fifth column of boxes starts at 16: past the input
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 6000, 12), doctest::Contains("5x3 boxes of 4 do not all cover a pixel of the 16x10"),
                       std::invalid_argument);
  j.box = 9;
  j.box_w = 20;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 6000, 12), doctest::Contains("box 9 (1 to 8)"), std::invalid_argument);
  j.box = 4;
  j.in_stride = 0;
  CHECK_THROWS_WITH_AS(ops::check_resize_jobs(&j, 1, 6000, 12), doctest::Contains("a box reduction needs its input's in_stride"),
                       std::invalid_argument);
}
