// Device side of normalize.hpp and encode.hpp: the GPU finishing ops, one thread per output pixel
// or row, coalesced writes.
#include <stdexcept>

#include "encode_checks.hpp"
#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/mix.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {


namespace {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `items`: one per kThreads items, at most eight per SM of the
/// current device (about what stays resident), so large inputs take several passes of the loop.
unsigned grid_for(std::size_t items) {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  const std::size_t cap = 8 * static_cast<std::size_t>(multiprocessor_count(device));
  return static_cast<unsigned>(std::min<std::size_t>((items + kThreads - 1) / kThreads, cap));
}

struct coefficients {
  float a[3], b[3];
};

template <class Out>
__global__ void normalize_kernel(const std::uint8_t* __restrict__ in, Out* __restrict__ out, std::size_t h,
                                 std::size_t w, std::size_t total, coefficients k, bool ycbcr, bool hflip, int mode) {
  const std::size_t plane = h * w;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = i / plane, p = i % plane, y = p / w, x = p % w;
    const std::uint8_t* px = in + 3 * (n * plane + y * w + (hflip ? w - 1 - x : x));
    float v[3] = {static_cast<float>(px[0]), static_cast<float>(px[1]), static_cast<float>(px[2])};
    if (ycbcr) {
      float t[3];
#pragma unroll
      for (int c = 0; c < 3; ++c)
        t[c] = __fmaf_rn(detail::ycbcr_matrix(c, 0), v[0],
                         __fmaf_rn(detail::ycbcr_matrix(c, 1), v[1], __fmaf_rn(detail::ycbcr_matrix(c, 2), v[2], detail::ycbcr_offset(c))));
      v[0] = t[0];
      v[1] = t[1];
      v[2] = t[2];
    }
    Out* dst = out + n * plane * 3 + p;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const float r = __fmaf_rn(v[c], k.a[c], k.b[c]);
      if constexpr (sizeof(Out) == 4) dst[c * plane] = r;
      else dst[c * plane] = mode == 1 ? float_to_half(r) : float_to_bfloat16(r);
    }
  }
}

template <class L>
__global__ void one_hot_kernel(const L* labels, std::size_t count, std::int64_t classes, std::byte* out,
                               std::size_t esize, std::uint32_t one) {
  // One thread per output element: every byte is written (zeros included), coalesced.
  const std::size_t total = count * static_cast<std::size_t>(classes);
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = e / static_cast<std::size_t>(classes);
    const auto c = static_cast<std::int64_t>(e % static_cast<std::size_t>(classes));
    const std::uint32_t v = static_cast<std::int64_t>(labels[i]) == c ? one : 0u;
    std::byte* dst = out + e * esize;
    if (esize == 1) *reinterpret_cast<std::uint8_t*>(dst) = static_cast<std::uint8_t>(v);
    else if (esize == 2) *reinterpret_cast<std::uint16_t*>(dst) = static_cast<std::uint16_t>(v);
    else *reinterpret_cast<std::uint32_t*>(dst) = v;
  }
}

__global__ void unpack_kernel(const std::uint8_t* packed, std::uint8_t* planes, std::size_t pixels, std::size_t total) {
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = e / (8 * pixels), r = e % (8 * pixels), b = r / pixels, p = r % pixels;
    planes[e] = (packed[n * pixels + p] >> b) & 1u;
  }
}

__global__ void pack_kernel(const std::uint8_t* planes, std::uint8_t* packed, std::size_t pixels, std::size_t total) {
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = e / pixels, p = e % pixels;
    std::uint8_t v = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) v |= static_cast<std::uint8_t>((planes[(n * 8 + b) * pixels + p] != 0) << b);
    packed[e] = v;
  }
}

/// MixUp over `n` values a sample (mix.hpp): thread e owns position e of every sample and walks the
/// batch in order, carrying the previous sample's original value (the last sample's for sample 0):
/// in place, and no two threads touch one value.
__global__ void mix_kernel(float* __restrict__ data, std::size_t count, std::size_t n, mix_weights w) {
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float prev = data[(count - 1) * n + e];
    for (std::size_t i = 0; i < count; ++i) {
      const float cur = data[i * n + e];
      data[i * n + e] = mix_value(cur, prev, w);
      prev = cur;
    }
  }
}

/// CutMix's paste (mix.hpp): thread e owns position e of the box in every sample, as mix_kernel.
__global__ void paste_kernel(float* __restrict__ data, std::size_t count, std::size_t per, std::size_t height, std::size_t width,
                             std::size_t channels, std::size_t x1, std::size_t y1, std::size_t box_w, std::size_t box_h,
                             bool chw) {
  const std::size_t total = box_w * box_h * channels;
  for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t at;
    if (chw) {
      const std::size_t c = e / (box_h * box_w), r = e % (box_h * box_w);
      at = (c * height + y1 + r / box_w) * width + x1 + r % box_w;
    } else {
      const std::size_t y = e / (box_w * channels), r = e % (box_w * channels);
      at = ((y1 + y) * width + x1 + r / channels) * channels + r % channels;
    }
    float prev = data[(count - 1) * per + at];
    for (std::size_t i = 0; i < count; ++i) {
      const float cur = data[i * per + at];
      data[i * per + at] = prev;
      prev = cur;
    }
  }
}

}  // namespace

void normalize_hwc_to_chw_device(const normalize_args& args, const normalize_params& params, cudaStream_t stream) {
  coefficients k{};
  if (!detail::validate_normalize(args.in, args.out, args.shape, params, k.a, k.b)) return;
  const std::uint8_t* d_in = args.in;
  void* d_out = args.out;
  const image_batch_shape shape = args.shape;
  const std::size_t total = shape.pixels();
  if (params.out == dtype::f32)
    normalize_kernel<float><<<grid_for(total), kThreads, 0, stream>>>(d_in, static_cast<float*>(d_out), shape.height,
                                                                      shape.width, total, k, params.ycbcr, params.hflip, 0);
  else
    normalize_kernel<std::uint16_t><<<grid_for(total), kThreads, 0, stream>>>(
        d_in, static_cast<std::uint16_t*>(d_out), shape.height, shape.width, total, k, params.ycbcr, params.hflip,
        params.out == dtype::f16 ? 1 : 2);
  PINFEED_CHECK_LAUNCH();
}

void one_hot_device(const one_hot_args& a, cudaStream_t stream) {
  detail::validate_one_hot(a);
  if (a.count == 0) return;
  const std::uint32_t one = a.out_type == dtype::u8 ? 1u : a.out_type == dtype::f16 ? 0x3C00u
                            : a.out_type == dtype::bf16 ? 0x3F80u : 0x3F800000u;
  const std::size_t total = a.count * static_cast<std::size_t>(a.classes);
  if (a.label_type == dtype::i64)
    one_hot_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<const std::int64_t*>(a.labels), a.count,
                                                             a.classes, static_cast<std::byte*>(a.out),
                                                             dtype_size(a.out_type), one);
  else
    one_hot_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<const std::int32_t*>(a.labels), a.count,
                                                             a.classes, static_cast<std::byte*>(a.out),
                                                             dtype_size(a.out_type), one);
  PINFEED_CHECK_LAUNCH();
}

void unpack_bits_device(const bit_planes_args& a, cudaStream_t stream) {
  detail::validate_bits(a.in, a.out, a.shape, "unpack_bits");
  const std::size_t total = a.shape.count * 8 * a.shape.pixels;
  if (total == 0) return;
  unpack_kernel<<<grid_for(total), kThreads, 0, stream>>>(a.in, a.out, a.shape.pixels, total);
  PINFEED_CHECK_LAUNCH();
}

void pack_bits_device(const bit_planes_args& a, cudaStream_t stream) {
  detail::validate_bits(a.in, a.out, a.shape, "pack_bits");
  const std::size_t total = a.shape.count * a.shape.pixels;
  if (total == 0) return;
  pack_kernel<<<grid_for(total), kThreads, 0, stream>>>(a.in, a.out, a.shape.pixels, total);
  PINFEED_CHECK_LAUNCH();
}

void mix_batch_device(const mix_batch_args& a, const mix_params& p, cudaStream_t stream) {
  check_mix_batch(a, p);
  if (a.count == 0) return;
  const auto H = static_cast<std::size_t>(a.height), W = static_cast<std::size_t>(a.width), C = static_cast<std::size_t>(a.channels);
  const std::size_t per = H * W * C;
  if (p.op == mix_op::mixup) {
    mix_kernel<<<grid_for(per), kThreads, 0, stream>>>(a.images, a.count, per, weights_of(p.lambda));
    PINFEED_CHECK_LAUNCH();
  } else if (p.x1 < p.x2 && p.y1 < p.y2) {
    const auto box_w = static_cast<std::size_t>(p.x2 - p.x1), box_h = static_cast<std::size_t>(p.y2 - p.y1);
    paste_kernel<<<grid_for(box_w * box_h * C), kThreads, 0, stream>>>(a.images, a.count, per, H, W, C, static_cast<std::size_t>(p.x1),
                                                                        static_cast<std::size_t>(p.y1), box_w, box_h,
                                                                        a.layout == mix_layout::chw);
    PINFEED_CHECK_LAUNCH();
  }
  if (a.classes > 0) {
    const auto k = static_cast<std::size_t>(a.classes);
    mix_kernel<<<grid_for(k), kThreads, 0, stream>>>(a.labels, a.count, k, weights_of(p.label_lambda));
    PINFEED_CHECK_LAUNCH();
  }
}

}  // namespace pinfeed::ops
