#pragma once
/// @file resize.hpp
/// pinfeed's bilinear resize of 8-bit images: integer arithmetic stated here, so the host (any
/// SIMD level, x86 or aarch64) and the device give the same bytes.
///
/// Output column d of `out` columns from `in` takes the source position of its centre,
/// s = (d + 1/2) in / out - 1/2, in 16.16 fixed point: s16 = floor((2d + 1) in 2^15 / out) - 2^15;
/// s16 <= 0 reads column 0 alone; else the columns i = s16 >> 16 and i + 1 with weights 2048 - f
/// and f, f = (s16 & 0xFFFF) >> 5 (11 bits), where i >= in - 1 reads column in - 1 alone. Rows
/// likewise. A sample is ((a (2048 - fx) + b fx) (2048 - fy) + (c (2048 - fx) + d fx) fy + 2^21) >> 22
/// in 32-bit integers, for the source samples a, b (upper row) and c, d (lower row). The same
/// centre-aligned mapping as OpenCV's INTER_LINEAR, without its platform-dependent rounding.

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::ops {

/// Resizes `in` (in_h x in_w pixels of `channels` 8-bit samples, rows `in_stride` bytes apart) to
/// `out` (out_h x out_w, rows packed), mirrored left to right where `flip`. Sides must be 1 to
/// 2^24; throws std::invalid_argument naming the size otherwise.
void resize_bilinear_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels,
                        std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip = false);

/// One image of a device batch: RGB (3 samples a pixel), output rows packed.
struct resize_job {
  std::uint64_t in_offset = 0;   ///< its first input byte
  std::uint32_t in_h = 0, in_w = 0;
  std::uint64_t out_offset = 0;  ///< its first output byte
  std::uint32_t out_h = 0, out_w = 0;
  std::uint32_t flip = 0;        ///< 1: mirrored left to right
  /// Bytes from one input row to the next: 0 for packed rows (in_w x 3), else at least that (a
  /// window of a larger image).
  std::uint32_t in_stride = 0;
};

/// The checks resize_bilinear_u8_device makes of `jobs` (host memory) before it queues anything:
/// sides 1 to 2^24, inputs and outputs inside the `in_bytes` and `out_bytes` given. Throws
/// std::invalid_argument naming the job and the field.
void check_resize_jobs(const resize_job* jobs, std::size_t count, std::uint64_t in_bytes, std::uint64_t out_bytes);

/// resize_bilinear_u8 for every job of a batch on the device (RGB), the same bytes as the host's;
/// `device_jobs` in device memory, `host_jobs` the same in host memory (checked, and sizing the
/// launch). Asynchronous on `stream`, no host synchronization, capturable. Throws
/// std::invalid_argument on bad jobs, cuda_error when the launch fails.
void resize_bilinear_u8_device(const resize_job* device_jobs, const resize_job* host_jobs, std::size_t count, const std::uint8_t* in,
                               std::uint64_t in_bytes, std::uint8_t* out, std::uint64_t out_bytes, cudaStream_t stream);

}  // namespace pinfeed::ops
