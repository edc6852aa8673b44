// pinfeed's bilinear resize on the host: every byte as the arithmetic pinfeed/ops/resize.hpp states,
// computed here directly from that statement (a sample at a time, no row reuse), for shrinking,
// growing, single pixels, channels 1 to 4, strided input and flips; bad sizes named.
#include <doctest/doctest.h>

#include <cstdint>
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
                          {31, 17, 224, 224}, {224, 224, 31, 17}, {100, 3, 7, 200}, {2, 2, 3, 3},    {64, 48, 32, 24}};
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
  CHECK(cases == 60);
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
