#pragma once
// pinfeed's bilinear resize (pinfeed/ops/resize.hpp) as functions the host and the device share.
#include <cstdint>

#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD

namespace pinfeed::ops::resize {

/// The largest side resize takes: (2d + 1) in 2^15 stays within 64 bits.
constexpr std::int64_t kMostSide = std::int64_t{1} << 24;
/// The largest box of a box reduction: libjpeg's smallest DCT scale is 1/8. A box of 8 sums 64
/// samples (at most 16,320: 32 bits hold it), and box x side stays within 2^27.
constexpr std::uint64_t kMostBox = 8;

/// Where output index d of `out` reads from a side of `in`: i0, i1 and i1's weight (of 2048).
struct tap {
  std::int32_t i0, i1, w1;
};
PINFEED_HD tap tap_at(std::int64_t d, std::int64_t in, std::int64_t out) {
  const std::int64_t s = ((2 * d + 1) * in * 32768) / out - 32768;
  if (s <= 0) return {0, 0, 0};
  const auto i = static_cast<std::int32_t>(s >> 16);
  if (i >= in - 1) return {static_cast<std::int32_t>(in - 1), static_cast<std::int32_t>(in - 1), 0};
  return {i, i + 1, static_cast<std::int32_t>((s & 0xFFFF) >> 5)};
}

/// Two samples weighed: a (2048 - fx) + b fx (two columns of a row, or two rows of a column).
PINFEED_HD std::int32_t across(std::int32_t a, std::int32_t b, std::int32_t fx) { return a * (2048 - fx) + b * fx; }

/// Two weighed values weighed again and rounded: (top (2048 - fy) + bottom fy + 2^21) >> 22. The
/// exact sum of the four products, whichever side was weighed first.
PINFEED_HD std::uint8_t down(std::int32_t top, std::int32_t bottom, std::int32_t fy) {
  return static_cast<std::uint8_t>((top * (2048 - fy) + bottom * fy + (1 << 21)) >> 22);
}

/// One pixel of a box reduction (pinfeed/ops/resize.hpp): the mean of the `box` x `box` pixels of
/// `src` (RGB, rows `stride` bytes apart) from (x box, y box), clipped to box_w x box_h, each
/// sample (sum + n / 2) / n. Boxes are at most kMostBox (checked by the callers).
PINFEED_HD void box_pixel(const std::uint8_t* src, std::uint64_t stride, std::uint32_t box, std::uint32_t box_h,
                          std::uint32_t box_w, std::uint32_t x, std::uint32_t y, std::uint8_t* px) {
  const std::uint32_t x0 = x * box, y0 = y * box;
  const std::uint32_t x1 = x0 + box < box_w ? x0 + box : box_w, y1 = y0 + box < box_h ? y0 + box : box_h;
  std::uint32_t sum[3] = {0, 0, 0};
  for (std::uint32_t yy = y0; yy < y1; ++yy) {
    const std::uint8_t* row = src + std::uint64_t{yy} * stride;
    for (std::uint32_t xx = x0; xx < x1; ++xx)
      for (int c = 0; c < 3; ++c) sum[c] += row[std::uint64_t{xx} * 3 + static_cast<std::uint32_t>(c)];
  }
  const std::uint32_t n = (x1 - x0) * (y1 - y0);
  for (int c = 0; c < 3; ++c) px[c] = static_cast<std::uint8_t>((sum[c] + n / 2) / n);
}

}  // namespace pinfeed::ops::resize
