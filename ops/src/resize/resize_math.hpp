#pragma once
// pinfeed's bilinear resize (pinfeed/ops/resize.hpp) as functions the host and the device share.
#include <cstdint>

#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD

namespace pinfeed::ops::resize {

/// The largest side resize takes: (2d + 1) in 2^15 stays within 64 bits.
constexpr std::int64_t kMostSide = std::int64_t{1} << 24;

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

}  // namespace pinfeed::ops::resize
