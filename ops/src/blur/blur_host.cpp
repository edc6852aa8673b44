// The Gaussian blur of blur.hpp, on the host: two passes in float32 over a per-thread scratch
// image (grown, never shrunk: no allocation per image once a worker has seen its largest).
#include "pinfeed/ops/blur.hpp"

#include "../augment/blur_math.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "pinfeed/runtime/detail/clones.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {
namespace {

void check_kernel(int size, double sigma) {
  if (size < 1 || size % 2 == 0)
    throw pinfeed::invalid_argument("gaussian_blur: the kernel size must be odd and at least 1, not " + std::to_string(size));
  // computed as a float32: one that rounds to 0 or past float's range is refused too
  if (!(static_cast<float>(sigma) > 0.0f) || !std::isfinite(static_cast<float>(sigma)))
    throw pinfeed::invalid_argument("gaussian_blur: sigma must be finite and greater than 0 as a float32, not " + std::to_string(sigma) +
                                    (std::isfinite(sigma) && sigma > 0.0 ? " (" + std::string(sigma < 1.0 ? "0" : "inf") + " as a float32)" : ""));
}

using aug::reflect;

/// The kernel of blur.hpp into v[0, size) (checked by the caller): blur_math.hpp's taps, which
/// the device's blur jobs compute alike.
void fill_kernel1d(int size, double sigma, float* v) { aug::blur_taps(size, static_cast<float>(sigma), v); }

}  // namespace

std::vector<float> gaussian_kernel1d(int size, double sigma) {
  check_kernel(size, sigma);
  std::vector<float> v(static_cast<std::size_t>(size));
  fill_kernel1d(size, sigma, v.data());
  return v;
}

PINFEED_FMA_CLONES void gaussian_blur_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, int kx, int ky,
                      double sx, double sy, std::uint8_t* out) {
  check_kernel(kx, sx);
  check_kernel(ky, sy);
  if (channels != 1 && channels != 3)
    throw pinfeed::invalid_argument("gaussian_blur: images of 1 or 3 channels, not " + std::to_string(channels));
  if (height < 0 || width < 0)
    throw pinfeed::invalid_argument("gaussian_blur: a negative size " + std::to_string(height) + "x" + std::to_string(width));
  if (height * width == 0) return;
  if (in == nullptr || out == nullptr) throw pinfeed::invalid_argument("gaussian_blur: a null image");
  const int rx = kx / 2, ry = ky / 2;
  if (rx >= width || ry >= height)
    throw pinfeed::invalid_argument("gaussian_blur: a " + std::to_string(kx) + "x" + std::to_string(ky) +
                                    " kernel reflects " + std::to_string(rx) + " columns and " + std::to_string(ry) +
                                    " rows: the image must be wider and taller than that, not " +
                                    std::to_string(width) + "x" + std::to_string(height));
  const std::int64_t c = channels, row = width * c;
  // Scratch, grown once a worker: the two kernels, the rows pass's result (height x row floats),
  // one padded source row, one output row.
  thread_local std::vector<float> scratch;
  const std::size_t need = static_cast<std::size_t>(kx + ky + height * row + (width + 2 * rx) * c + row);
  if (scratch.size() < need) scratch.resize(need);
  float* wx = scratch.data();
  float* wy = wx + kx;
  fill_kernel1d(kx, sx, wx);
  fill_kernel1d(ky, sy, wy);
  float* across = wy + ky;
  float* padded = across + height * row;
  float* acc = padded + (width + 2 * rx) * c;
  for (std::int64_t y = 0; y < height; ++y) {
    const std::uint8_t* src = in + y * row;
    for (std::int64_t p = -rx; p < width + rx; ++p)
      for (std::int64_t k = 0; k < c; ++k) padded[(p + rx) * c + k] = static_cast<float>(src[reflect(p, width) * c + k]);
    float* dst = across + y * row;
    std::fill(dst, dst + row, 0.0f);
    for (int j = 0; j < kx; ++j) {
      const float w = wx[j];
      const float* from = padded + static_cast<std::int64_t>(j) * c;
      for (std::int64_t k = 0; k < row; ++k) dst[k] += w * from[k];
    }
  }
  // Columns: every input row is in `across` before the first output row is written, so `out`
  // may be `in`.
  for (std::int64_t y = 0; y < height; ++y) {
    std::fill(acc, acc + row, 0.0f);
    for (int i = 0; i < ky; ++i) {
      const float w = wy[i];
      const float* from = across + reflect(y + i - ry, height) * row;
      for (std::int64_t k = 0; k < row; ++k) acc[k] += w * from[k];
    }
    std::uint8_t* dst = out + y * row;
    for (std::int64_t k = 0; k < row; ++k)
      dst[k] = static_cast<std::uint8_t>(static_cast<int>(std::clamp(std::nearbyint(acc[k]), 0.0f, 255.0f)));
  }
}

}  // namespace pinfeed::ops
