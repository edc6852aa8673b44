// The colour ops of colour.hpp, on the host: the header's statement, sample by sample.
#include "pinfeed/ops/colour.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "../augment/aug_math.hpp"
#include "pinfeed/runtime/detail/clones.hpp"
#include "samples.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {
using samples::check;
using samples::check_factor;
using samples::to_u8;
namespace {

using aug::grey;  // the arithmetic the device's kernels share (aug_math.hpp)

/// The two float factors of blend(x, o, r): f32(r) and f32(1 - r).
struct blend_factors {
  float r, rest;
  PINFEED_INLINE explicit blend_factors(double ratio) : r(static_cast<float>(ratio)), rest(static_cast<float>(1.0 - ratio)) {}
  [[nodiscard]] PINFEED_INLINE std::uint8_t operator()(std::uint8_t x, float other) const { return aug::blend(x, other, r, rest); }
};

}  // namespace

PINFEED_FMA_CLONES void grayscale_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out, int out_channels) {
  check("grayscale", in, pixels, channels, out);
  if (out_channels != 1 && out_channels != 3)
    throw pinfeed::invalid_argument("grayscale: 1 or 3 output channels, not " + std::to_string(out_channels));
  // In place is safe in both directions: pixel i is read before its output is written, and the
  // output of pixel i never reaches past the input of pixel i (3 -> 1) or is written from the end (1 -> 3).
  if (channels == 1 && out_channels == 3) {
    for (std::int64_t i = pixels - 1; i >= 0; --i) {
      const std::uint8_t v = in[i];
      out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = v;
    }
    return;
  }
  for (std::int64_t i = 0; i < pixels; ++i) {
    const std::uint8_t v =
        channels == 1 ? in[i] : static_cast<std::uint8_t>(static_cast<int>(grey(in + 3 * i)));  // trunc, no clamp
    std::uint8_t* o = out + out_channels * i;
    o[0] = v;
    if (out_channels == 3) o[1] = o[2] = v;
  }
}

PINFEED_FMA_CLONES void brightness_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out) {
  check("brightness", in, pixels, channels, out);
  check_factor("brightness", factor);
  const float f = static_cast<float>(factor);
  for (std::int64_t i = 0, n = pixels * channels; i < n; ++i) out[i] = to_u8(static_cast<float>(in[i]) * f);
}

PINFEED_FMA_CLONES void saturation_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out) {
  check("saturation", in, pixels, channels, out);
  check_factor("saturation", factor);
  if (channels == 1) {
    if (out != in) std::memcpy(out, in, static_cast<std::size_t>(pixels));
    return;
  }
  const blend_factors blend(factor);
  // 16 pixels a round: their greys first, spread to the samples, then the blend over 48 samples in
  // one flat loop (vectorised; in place is safe: a round reads its pixels before it writes them).
  constexpr std::int64_t kRun = 16;
  float spread[3 * kRun];
  std::int64_t i = 0;
  for (; i + kRun <= pixels; i += kRun) {
    const std::uint8_t* p = in + 3 * i;
    for (std::int64_t k = 0; k < kRun; ++k) {
      const float g = std::floor(grey(p + 3 * k));
      spread[3 * k] = spread[3 * k + 1] = spread[3 * k + 2] = g;
    }
    std::uint8_t* o = out + 3 * i;
    for (std::int64_t k = 0; k < 3 * kRun; ++k) o[k] = blend(p[k], spread[k]);
  }
  for (; i < pixels; ++i) {
    const float g = std::floor(grey(in + 3 * i));
    for (int c = 0; c < 3; ++c) out[3 * i + c] = blend(in[3 * i + c], g);
  }
}

PINFEED_FMA_CLONES void contrast_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out) {
  check("contrast", in, pixels, channels, out);
  check_factor("contrast", factor);
  if (pixels == 0) return;
  // floor(grey) is 0 to 254: summed through int32 in parts of 2^20 pixels (under 2^28 each), which
  // the vectoriser takes (a 64-bit sum it does not).
  std::uint64_t sum = 0;
  for (std::int64_t i0 = 0; i0 < pixels; i0 += std::int64_t{1} << 20) {
    const std::int64_t n = std::min(pixels - i0, std::int64_t{1} << 20);
    const std::uint8_t* p = in + i0 * channels;
    std::int32_t part = 0;
    if (channels == 1)
      for (std::int64_t i = 0; i < n; ++i) part += p[i];
    else
      for (std::int64_t i = 0; i < n; ++i) part += static_cast<std::int32_t>(std::floor(grey(p + 3 * i)));
    sum += static_cast<std::uint64_t>(part);
  }
  const float mean = static_cast<float>(sum) / static_cast<float>(pixels);
  const blend_factors blend(factor);
  for (std::int64_t i = 0, n = pixels * channels; i < n; ++i) out[i] = blend(in[i], mean);
}

void posterize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, int bits, std::uint8_t* out) {
  check("posterize", in, pixels, channels, out);
  if (bits < 1 || bits > 8) throw pinfeed::invalid_argument("posterize: bits must be 1 to 8, not " + std::to_string(bits));
  const auto mask = static_cast<std::uint8_t>(((1u << bits) - 1u) << (8 - bits));
  for (std::int64_t i = 0, n = pixels * channels; i < n; ++i) out[i] = in[i] & mask;
}

PINFEED_FMA_CLONES void solarize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double threshold, std::uint8_t* out) {
  check("solarize", in, pixels, channels, out);
  if (!(threshold >= 0.0 && threshold <= 255.0))
    throw pinfeed::invalid_argument("solarize: the threshold must be in [0, 255], not " + std::to_string(threshold));
  const float t = static_cast<float>(threshold);
  for (std::int64_t i = 0, n = pixels * channels; i < n; ++i)
    out[i] = static_cast<float>(in[i]) >= t ? static_cast<std::uint8_t>(255 - in[i]) : in[i];
}

void invert_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out) {
  check("invert", in, pixels, channels, out);
  for (std::int64_t i = 0, n = pixels * channels; i < n; ++i) out[i] = static_cast<std::uint8_t>(255 - in[i]);
}

PINFEED_FMA_CLONES void hue_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out) {
  check("hue", in, pixels, channels, out);
  if (channels != 3) throw pinfeed::invalid_argument("hue: images of 3 channels (a grey image has no hue)");
  if (!(factor >= -0.5 && factor <= 0.5))
    throw pinfeed::invalid_argument("hue: the factor must be in [-0.5, 0.5], not " + std::to_string(factor));
  const float shift = static_cast<float>(factor);
  for (std::int64_t i = 0; i < pixels; ++i) aug::hue_pixel(in + 3 * i, shift, out + 3 * i);
}

PINFEED_FMA_CLONES void sharpness_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                  std::uint8_t* out) {
  if (height < 0 || width < 0)
    throw pinfeed::invalid_argument("sharpness: a negative size " + std::to_string(height) + "x" + std::to_string(width));
  check("sharpness", in, height * width, channels, out);
  check_factor("sharpness", factor);
  if (height * width == 0) return;
  if (in == out) throw pinfeed::invalid_argument("sharpness: the output must not be the input");
  const std::size_t row = static_cast<std::size_t>(width) * channels;
  std::memcpy(out, in, row * static_cast<std::size_t>(height));  // the border (and images of 2 or fewer)
  if (height <= 2 || width <= 2) return;
  const float rest = static_cast<float>(1.0 - factor);
  for (std::int64_t y = 1; y + 1 < height; ++y) {
    const std::uint8_t* up = in + (y - 1) * row;
    const std::uint8_t* mid = up + row;
    const std::uint8_t* down = mid + row;
    std::uint8_t* o = out + y * row;
    for (std::int64_t k = channels, end = static_cast<std::int64_t>(row) - channels; k < end; ++k) {
      const int s = up[k - channels] + up[k] + up[k + channels] + mid[k - channels] + 5 * mid[k] + mid[k + channels] +
                    down[k - channels] + down[k] + down[k + channels];
      o[k] = aug::sharpen(s, mid[k], rest);
    }
  }
}

}  // namespace pinfeed::ops
