#pragma once
// Internal (not installed): writing the compact form of coefficient blocks (pinfeed/ops/jpeg_planes.hpp),
// shared by the host's packer, the device's unpack (its bytes) and the host half's scan walker
// (loaders), so that all write the one form.
#include <cstdint>

#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD

namespace pinfeed::ops::jpeg {

/// The compact form's bytes (jpeg_planes.hpp).
constexpr std::uint8_t kEndOfBlock = 0x08, kSixteenZeros = 0xF8;

/// Writes coefficient `v` (nonzero) at zigzag index k, the one before it at `last` (-1: none), in
/// the compact form at `p`; returns the byte after. The host's packer and the walker share it.
PINFEED_HD std::uint8_t* pack_coefficient(std::uint8_t* p, std::int32_t last, std::int32_t k, std::int16_t v) {
  std::int32_t run = k - last - 1;
  for (; run >= 16; run -= 16) *p++ = kSixteenZeros;
  if (v >= -7 && v <= 7) {
    *p++ = static_cast<std::uint8_t>((run << 4) | (v & 15));
  } else {
    const auto u = static_cast<std::uint16_t>(v);
    p[0] = static_cast<std::uint8_t>(run << 4);
    p[1] = static_cast<std::uint8_t>(u & 0xFF);
    p[2] = static_cast<std::uint8_t>(u >> 8);
    p += 3;
  }
  return p;
}

}  // namespace pinfeed::ops::jpeg
