// pinfeed's bilinear resize on the device (pinfeed/ops/resize.hpp): job j of the batch is
// blockIdx.y = j (batches of more than 65535 go in several launches); threads stride over its
// output pixels, each computing its three samples with resize_math.hpp's arithmetic, as the host
// (a box-reduced input: each tap a box mean, as box_downscale_u8 then resize_bilinear_u8 give).
#include <algorithm>

#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/ops/detail/job_launch.hpp"
#include "resize_math.hpp"

namespace pinfeed::ops {

namespace {

constexpr int kThreads = 128;

__global__ void resize_kernel(const resize_job* __restrict__ jobs, std::size_t first, const std::uint8_t* __restrict__ in,
                              std::uint8_t* __restrict__ out) {
  const resize_job j = jobs[first + blockIdx.y];
  const std::uint64_t pixels = std::uint64_t{j.out_h} * j.out_w;
  const std::uint8_t* src = in + j.in_offset;
  const std::uint64_t stride = j.in_stride != 0 ? j.in_stride : std::uint64_t{j.in_w} * 3;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < pixels;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const auto oy = static_cast<std::int64_t>(i / j.out_w), ox = static_cast<std::int64_t>(i % j.out_w);
    const std::int64_t d = j.flip ? j.out_w - 1 - ox : ox;
    const resize::tap tx = resize::tap_at(d, j.in_w, j.out_w), ty = resize::tap_at(oy, j.in_h, j.out_h);
    std::uint8_t* o = out + j.out_offset + i * 3;
    if (j.box > 1) {  // the four taps are box means of the larger image (resize_math.hpp's box_pixel)
      std::uint8_t a[3], b[3], c3[3], d3[3];
      resize::box_pixel(src, stride, j.box, j.box_h, j.box_w, static_cast<std::uint32_t>(tx.i0), static_cast<std::uint32_t>(ty.i0), a);
      resize::box_pixel(src, stride, j.box, j.box_h, j.box_w, static_cast<std::uint32_t>(tx.i1), static_cast<std::uint32_t>(ty.i0), b);
      resize::box_pixel(src, stride, j.box, j.box_h, j.box_w, static_cast<std::uint32_t>(tx.i0), static_cast<std::uint32_t>(ty.i1), c3);
      resize::box_pixel(src, stride, j.box, j.box_h, j.box_w, static_cast<std::uint32_t>(tx.i1), static_cast<std::uint32_t>(ty.i1), d3);
      for (int c = 0; c < 3; ++c)
        o[c] = resize::down(resize::across(a[c], b[c], tx.w1), resize::across(c3[c], d3[c], tx.w1), ty.w1);
      continue;
    }
    const std::uint8_t* r0 = src + std::uint64_t{static_cast<std::uint32_t>(ty.i0)} * stride;
    const std::uint8_t* r1 = src + std::uint64_t{static_cast<std::uint32_t>(ty.i1)} * stride;
    for (int c = 0; c < 3; ++c) {
      const std::int32_t top = resize::across(r0[tx.i0 * 3 + c], r0[tx.i1 * 3 + c], tx.w1);
      const std::int32_t bottom = resize::across(r1[tx.i0 * 3 + c], r1[tx.i1 * 3 + c], tx.w1);
      o[c] = resize::down(top, bottom, ty.w1);
    }
  }
}

}  // namespace

void resize_bilinear_u8_device(const resize_job* device_jobs, const resize_job* host_jobs, std::size_t count, const std::uint8_t* in,
                               std::uint64_t in_bytes, std::uint8_t* out, std::uint64_t out_bytes, cudaStream_t stream) {
  check_resize_jobs(host_jobs, count, in_bytes, out_bytes);
  if (count == 0) return;
  if (device_jobs == nullptr || in == nullptr || out == nullptr) throw pinfeed::invalid_argument("resize batch: a device pointer is null");
  detail::launch_over_jobs(
      "resize_kernel", count, kThreads, [&](std::size_t i) { return std::uint64_t{host_jobs[i].out_h} * host_jobs[i].out_w; },
      [&](dim3 grid, std::size_t first) { resize_kernel<<<grid, kThreads, 0, stream>>>(device_jobs, first, in, out); });
}

}  // namespace pinfeed::ops
