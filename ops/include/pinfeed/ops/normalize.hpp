#pragma once
/// @file normalize.hpp
/// uint8 HWC images -> float32 CHW, scaled or normalised per channel, over a whole batch.
///
/// Rounding rule (CPU == GPU bit for bit): out = fma(float(x), a[c], b[c]) with a single rounding,
/// where a[c] = scale / std[c] and b[c] = -mean[c] / std[c] are computed once on the host in float.
/// With the defaults (scale 1/255, mean 0, std 1) this is x * (1/255) rounded once.

#include <array>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace pinfeed::ops {

struct normalize_params {
  float scale = 1.0f / 255.0f;            ///< applied to the uint8 value first
  std::array<float, 3> mean{0.f, 0.f, 0.f};  ///< in scaled units (e.g. ImageNet 0.485, 0.456, 0.406)
  std::array<float, 3> std{1.f, 1.f, 1.f};   ///< in scaled units, each > 0
};

/// The shape of a batch of images: [batch, height, width, 3] uint8 in, [batch, 3, height, width] out.
struct image_batch_shape {
  std::size_t batch = 0, height = 0, width = 0;
  [[nodiscard]] std::size_t pixels() const noexcept { return batch * height * width; }
};

/// Host reference, parallel over images with TBB. Throws std::invalid_argument for null pointers
/// with a non-empty shape or a std that is not positive.
void normalize_hwc_to_chw(const std::uint8_t* in, float* out, image_batch_shape shape,
                          const normalize_params& params);

/// The same on the device, asynchronous on `stream` (no host synchronisation, capturable in a graph).
/// Throws std::invalid_argument before launching anything on bad arguments, cuda_error on launch failure.
void normalize_hwc_to_chw_device(const std::uint8_t* d_in, float* d_out, image_batch_shape shape,
                                 const normalize_params& params, cudaStream_t stream);

namespace detail {
/// Per-channel (a, b) of the rounding rule above; validates params.
void normalize_coefficients(const normalize_params& p, float a[3], float b[3]);
}  // namespace detail

}  // namespace pinfeed::ops
