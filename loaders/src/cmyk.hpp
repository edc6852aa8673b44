#pragma once
// CMYK to RGB as Pillow converts it (its cmyk2rgb): (255 - k) - c (255 - k) / 255 for each channel,
// rounded as its MULDIV255. One formula for the JPEG path (jpeg_window.cpp, which inverts Adobe's
// samples first) and the TIFF path (the codec module).
#include <algorithm>
#include <cstdint>

namespace pinfeed::loaders::detail {

inline void pillow_cmyk_to_rgb(const std::uint8_t cmyk[4], std::uint8_t rgb[3]) {
  const int nk = 255 - cmyk[3];
  for (int c = 0; c < 3; ++c) {
    const int t = cmyk[c] * nk + 128;
    rgb[c] = static_cast<std::uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
  }
}

}  // namespace pinfeed::loaders::detail
