// The histogram ops of histogram.hpp, on the host: per channel, a table of 256 entries from the
// channel's extremes (autocontrast) or its histogram (equalize), then a lookup.
#include "pinfeed/ops/histogram.hpp"

#include <array>

#include "../colour/samples.hpp"

namespace pinfeed::ops {
using samples::check;
using samples::to_u8;

PINFEED_FMA_CLONES void autocontrast_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out) {
  check("autocontrast", in, pixels, channels, out);
  std::array<std::uint8_t, 3> lo{255, 255, 255}, hi{0, 0, 0};
  for (std::int64_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) {
      lo[c] = std::min(lo[c], in[channels * i + c]);
      hi[c] = std::max(hi[c], in[channels * i + c]);
    }
  std::array<std::array<std::uint8_t, 256>, 3> lut{};
  for (int c = 0; c < channels; ++c)
    for (int x = 0; x < 256; ++x) {
      if (lo[c] >= hi[c]) {
        lut[c][x] = static_cast<std::uint8_t>(x);
        continue;
      }
      const float inv = static_cast<float>(hi[c] - lo[c]) * static_cast<float>(1.0 / 255.0);
      lut[c][x] = to_u8((static_cast<float>(x) - static_cast<float>(lo[c])) / inv);
    }
  for (std::int64_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) out[channels * i + c] = lut[c][in[channels * i + c]];
}

void equalize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out) {
  check("equalize", in, pixels, channels, out);
  std::array<std::array<std::int64_t, 256>, 3> hist{};
  for (std::int64_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) ++hist[c][in[channels * i + c]];
  std::array<std::array<std::uint8_t, 256>, 3> lut{};
  for (int c = 0; c < channels; ++c) {
    int top = 255;
    while (top > 0 && hist[c][top] == 0) --top;
    const std::int64_t step = (pixels - hist[c][top]) / 255;
    std::int64_t cum = 0;
    for (int x = 0; x < 256; ++x) {
      if (step == 0) {
        lut[c][x] = static_cast<std::uint8_t>(x);
        continue;
      }
      lut[c][x] = static_cast<std::uint8_t>(x == 0 ? 0 : std::min<std::int64_t>(255, (cum + step / 2) / step));
      cum += hist[c][x];
    }
  }
  for (std::int64_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) out[channels * i + c] = lut[c][in[channels * i + c]];
}

}  // namespace pinfeed::ops
