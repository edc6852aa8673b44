#include "pinfeed/ops/normalize.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/parallel.hpp"

namespace pinfeed::ops {

namespace detail {
void normalize_coefficients(const normalize_params& p, float a[3], float b[3]) {
  for (int c = 0; c < 3; ++c) {
    if (!(p.std[c] > 0.0f) || !std::isfinite(p.std[c]))
      throw std::invalid_argument("normalize: std[" + std::to_string(c) + "] = " + std::to_string(p.std[c]) +
                                  " must be a positive finite number");
    if (!std::isfinite(p.mean[c]) || !std::isfinite(p.scale))
      throw std::invalid_argument("normalize: mean and scale must be finite");
    a[c] = p.scale / p.std[c];
    b[c] = -p.mean[c] / p.std[c];
  }
}
}  // namespace detail

void normalize_hwc_to_chw(const std::uint8_t* in, float* out, image_batch_shape shape,
                          const normalize_params& params) {
  float a[3], b[3];
  detail::normalize_coefficients(params, a, b);
  if (shape.pixels() == 0) return;
  if (in == nullptr || out == nullptr) throw std::invalid_argument("normalize: null input or output pointer");
  const std::size_t plane = shape.height * shape.width;
  pinfeed::parallel_for(0, shape.batch, [&](std::size_t n) {
    const std::uint8_t* src = in + n * plane * 3;
    float* dst = out + n * plane * 3;
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < 3; ++c) dst[c * plane + p] = std::fma(static_cast<float>(src[3 * p + c]), a[c], b[c]);
  });
}

}  // namespace pinfeed::ops
