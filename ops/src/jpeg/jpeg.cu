// The JPEG planes on the device: one kernel puts every block of a batch through the IDCT into its
// component's plane, a second upsamples and converts every pixel. Image i of the batch is
// blockIdx.y = i (batches of more than 65535 images go in several launches); each kernel strides
// over the image's blocks or pixels, so a grid sized for the largest image covers them all.
#include <algorithm>

#include "jpeg_math.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {

namespace {

constexpr int kThreads = 128;
constexpr std::size_t kMaxImagesPerLaunch = 65535;  // gridDim.y

/// Every block of image blockIdx.y (of `images`, from `first`) into its plane.
__global__ void idct_kernel(const jpeg_image* __restrict__ images, std::size_t first, const std::int16_t* __restrict__ blocks,
                            const std::uint16_t* __restrict__ quant, std::uint8_t* __restrict__ scratch) {
  const jpeg_image im = images[first + blockIdx.y];
  const std::uint64_t total = jpeg::blocks_of(im);
  for (std::uint64_t b = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; b < total;
       b += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    jpeg::decode_block(im, b, blocks, quant, scratch);
}

/// Every pixel of image blockIdx.y: its components upsampled from the planes, converted to RGB.
__global__ void pixel_kernel(const jpeg_image* __restrict__ images, std::size_t first, const std::uint8_t* __restrict__ scratch,
                             std::uint8_t* __restrict__ out) {
  const jpeg_image im = images[first + blockIdx.y];
  const jpeg::planes planes = jpeg::planes_of(im, scratch);
  const jpeg::window w = jpeg::window_of(im);
  const std::uint64_t pixels = std::uint64_t{w.width} * w.height;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < pixels;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t y = static_cast<std::uint32_t>(i / w.width), x = static_cast<std::uint32_t>(i % w.width);
    std::uint8_t rgb[3];
    jpeg::pixel(planes, w.x + x, w.y + y, rgb);
    std::uint8_t* dst = out + im.out_offset + i * 3;
    dst[0] = rgb[0];
    dst[1] = rgb[1];
    dst[2] = rgb[2];
  }
}

/// Block b of the compact form, from starts[b] to where the next starts (the last to `size`).
__global__ void unpack_kernel(const std::uint8_t* __restrict__ bytes, std::uint64_t size, const std::uint32_t* __restrict__ starts,
                              std::uint64_t count, std::int16_t* __restrict__ blocks, std::uint32_t* malformed) {
  for (std::uint64_t b = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; b < count;
       b += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t begin = starts[b], end = b + 1 < count ? starts[b + 1] : size;
    std::int16_t* block = blocks + b * 64;
    if (begin > end || end > size) {  // starts out of order or past the data
      for (int i = 0; i < 64; ++i) block[i] = 0;
      atomicAdd(malformed, 1u);
      continue;
    }
    const jpeg::unpack_result r = jpeg::unpack_block(bytes, begin, end, block);
    if (r.error != jpeg::unpack_error::none || r.at != end) {
      for (int i = 0; i < 64; ++i) block[i] = 0;
      atomicAdd(malformed, 1u);
    }
  }
}

/// Blocks along x for `items` per image: enough for the largest image, at most 4 per SM each.
unsigned grid_x(std::uint64_t items) {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  const std::uint64_t cap = 4 * static_cast<std::uint64_t>(multiprocessor_count(device));
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>((items + kThreads - 1) / kThreads, cap)));
}

}  // namespace

void unpack_jpeg_blocks_device(const std::uint8_t* bytes, std::uint64_t size, const std::uint32_t* starts, std::uint64_t block_count,
                               std::int16_t* blocks, std::uint32_t* malformed, cudaStream_t stream) {
  jpeg::check_unpack_call(bytes, size, starts, block_count, blocks, malformed);
  if (block_count == 0) return;
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  const std::uint64_t cap = 8 * static_cast<std::uint64_t>(multiprocessor_count(device));
  const auto grid = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>((block_count + kThreads - 1) / kThreads, cap)));
  unpack_kernel<<<grid, kThreads, 0, stream>>>(bytes, size, starts, block_count, blocks, malformed);
  PINFEED_CUDA_TRY(cudaGetLastError());
}

void decode_jpeg_batch_device(const jpeg_batch_view& device, const jpeg_image* host_images, std::uint8_t* out,
                              std::uint64_t out_bytes, std::uint8_t* scratch, std::uint64_t scratch_bytes, cudaStream_t stream) {
  jpeg::check_device_call(device, host_images, out_bytes, scratch_bytes);
  if (device.count == 0) return;
  if (out == nullptr || scratch == nullptr || device.images == nullptr || device.blocks == nullptr || device.quant == nullptr)
    throw pinfeed::invalid_argument("jpeg batch: a device pointer is null");
  for (std::size_t first = 0; first < device.count; first += kMaxImagesPerLaunch) {
    const std::size_t n = std::min(kMaxImagesPerLaunch, device.count - first);
    std::uint64_t most_blocks = 0, most_pixels = 0;
    for (std::size_t i = first; i < first + n; ++i) {
      most_blocks = std::max(most_blocks, jpeg::blocks_of(host_images[i]));
      most_pixels = std::max(most_pixels, jpeg_output_bytes(host_images[i]) / 3);
    }
    idct_kernel<<<dim3(grid_x(most_blocks), static_cast<unsigned>(n)), kThreads, 0, stream>>>(device.images, first, device.blocks,
                                                                                             device.quant, scratch);
    PINFEED_CUDA_TRY(cudaGetLastError());
    pixel_kernel<<<dim3(grid_x(most_pixels), static_cast<unsigned>(n)), kThreads, 0, stream>>>(device.images, first, scratch, out);
    PINFEED_CUDA_TRY(cudaGetLastError());
  }
}

}  // namespace pinfeed::ops
