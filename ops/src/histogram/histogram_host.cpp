// The histogram ops of histogram.hpp, on the host: per channel, a table of 256 entries from the
// channel's extremes (autocontrast) or its histogram (equalize), then a lookup.
#include "pinfeed/ops/histogram.hpp"

#include <array>
#include <cstring>

#include "../augment/aug_math.hpp"
#include "../colour/samples.hpp"

namespace pinfeed::ops {
using samples::check;

namespace {
/// out = lut[channel][in] for every sample; RGB a pixel at a time with the channel known.
void apply_luts(const std::uint8_t* in, std::int64_t pixels, int channels, const std::array<std::array<std::uint8_t, 256>, 3>& lut,
                std::uint8_t* out) {
  if (channels == 3) {
    for (std::int64_t i = 0; i < pixels; ++i, in += 3, out += 3) {
      const std::uint8_t r = lut[0][in[0]], g = lut[1][in[1]], b = lut[2][in[2]];
      out[0] = r;
      out[1] = g;
      out[2] = b;
    }
    return;
  }
  for (std::int64_t i = 0; i < pixels; ++i) out[i] = lut[0][in[i]];
}
}  // namespace

PINFEED_FMA_CLONES void autocontrast_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out) {
  check("autocontrast", in, pixels, channels, out);
  std::array<std::uint8_t, 3> lo{255, 255, 255}, hi{0, 0, 0};
  std::int64_t i = 0;
  if (channels == 3) {
    // 16 pixels a round as three vectors of 16 samples (GCC's and Clang's vector types); a lane
    // always holds the same channel, since 48 samples are whole pixels.
    using bytes16 = std::uint8_t __attribute__((vector_size(16)));
    bytes16 lo_v[3], hi_v[3];
    for (int q = 0; q < 3; ++q) {
      lo_v[q] = bytes16{} + 255;
      hi_v[q] = bytes16{};
    }
    for (; i + 16 <= pixels; i += 16)
      for (int q = 0; q < 3; ++q) {
        bytes16 v;
        std::memcpy(&v, in + 3 * i + 16 * q, sizeof v);
        lo_v[q] = v < lo_v[q] ? v : lo_v[q];
        hi_v[q] = v > hi_v[q] ? v : hi_v[q];
      }
    for (int q = 0; q < 3; ++q)
      for (int j = 0; j < 16; ++j) {
        const int c = (16 * q + j) % 3;
        lo[c] = std::min(lo[c], static_cast<std::uint8_t>(lo_v[q][j]));
        hi[c] = std::max(hi[c], static_cast<std::uint8_t>(hi_v[q][j]));
      }
  }
  for (; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) {
      lo[c] = std::min(lo[c], in[channels * i + c]);
      hi[c] = std::max(hi[c], in[channels * i + c]);
    }
  std::array<std::array<std::uint8_t, 256>, 3> lut{};
  for (int c = 0; c < channels; ++c)
    for (int x = 0; x < 256; ++x) lut[c][x] = aug::autocontrast_entry(x, lo[c], hi[c]);
  apply_luts(in, pixels, channels, lut, out);
}

void equalize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out) {
  check("equalize", in, pixels, channels, out);
  std::array<std::array<std::int64_t, 256>, 3> hist{};
  if (channels == 3) {
    // Two counts a channel, for even and odd pixels, so that neighbours of the same value do not
    // wait on one another's increment; summed after. Each count stays under 2^32 (pixels < 2^33).
    std::array<std::array<std::uint32_t, 256>, 6> part{};
    std::int64_t i = 0;
    for (; i + 2 <= pixels; i += 2) {
      const std::uint8_t* p = in + 3 * i;
      ++part[0][p[0]];
      ++part[1][p[1]];
      ++part[2][p[2]];
      ++part[3][p[3]];
      ++part[4][p[4]];
      ++part[5][p[5]];
    }
    for (; i < pixels; ++i)
      for (int c = 0; c < 3; ++c) ++part[static_cast<std::size_t>(c)][in[3 * i + c]];
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t x = 0; x < 256; ++x) hist[c][x] = std::int64_t{part[c][x]} + std::int64_t{part[c + 3][x]};
  } else {
    for (std::int64_t i = 0; i < pixels; ++i) ++hist[0][in[i]];
  }
  std::array<std::array<std::uint8_t, 256>, 3> lut{};
  for (int c = 0; c < channels; ++c) aug::equalize_table(hist[c].data(), static_cast<std::uint64_t>(pixels), lut[c].data());
  apply_luts(in, pixels, channels, lut, out);
}

}  // namespace pinfeed::ops
