// Device side of normalize.hpp: one thread per pixel, three channel planes written coalesced.
#include <stdexcept>

#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {
namespace {

struct coefficients {
  float a[3], b[3];
};

__global__ void normalize_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                 std::size_t plane, std::size_t total, coefficients k) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = i / plane, p = i % plane;
    const std::uint8_t* px = in + 3 * i;
    float* dst = out + n * plane * 3 + p;
#pragma unroll
    for (int c = 0; c < 3; ++c) dst[c * plane] = __fmaf_rn(static_cast<float>(px[c]), k.a[c], k.b[c]);
  }
}

}  // namespace

void normalize_hwc_to_chw_device(const std::uint8_t* d_in, float* d_out, image_batch_shape shape,
                                 const normalize_params& params, cudaStream_t stream) {
  coefficients k{};
  detail::normalize_coefficients(params, k.a, k.b);
  if (shape.pixels() == 0) return;
  if (d_in == nullptr || d_out == nullptr) throw std::invalid_argument("normalize: null input or output pointer");
  constexpr int kThreads = 256;
  const std::size_t total = shape.pixels();
  const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((total + kThreads - 1) / kThreads, 1u << 20));
  normalize_kernel<<<grid, kThreads, 0, stream>>>(d_in, d_out, shape.height * shape.width, total, k);
  PINFEED_CHECK_LAUNCH();
}

}  // namespace pinfeed::ops
