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
///
/// A box-reduced input (resize_job::box = b > 1, box_downscale_u8): input pixel (x, y) is the
/// mean of the b x b pixels of a larger image from (x b, y b), clipped to the box_w x box_h pixels
/// that image has from there (a partial box at its right or bottom edge averages what it covers):
/// per sample (sum + n / 2) / n over the n pixels, in integers. It stands for libjpeg's decode at
/// 1/b DCT scale, whose pixel (x, y) comes from the same b x b pixels of the whole image, where a
/// decoder gives the whole image only (nvJPEG): a window the host path decodes at 1/b is then
/// reduced as that decode would be, not point-sampled by the bilinear taps.

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::ops {

/// Resizes `in` (in_h x in_w pixels of `channels` 8-bit samples, rows `in_stride` bytes apart) to
/// `out` (out_h x out_w, rows packed), mirrored left to right where `flip`. Sides must be 1 to
/// 2^24; throws std::invalid_argument naming the size otherwise.
void resize_bilinear_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels,
                        std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip = false);

/// The box reduction of the header's statement: `out` (out_h x out_w RGB pixels, rows packed) from
/// the box_h x box_w RGB pixels of `in` (rows `in_stride` bytes apart), each output pixel the mean
/// of a `box` x `box` square (clipped at the edges). Needs 1 <= box <= 8, (out_w - 1) box < box_w and
/// (out_h - 1) box < box_h (every output pixel covers one input pixel at least), in_stride >=
/// 3 box_w; throws std::invalid_argument naming the value otherwise.
void box_downscale_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t box_h, std::int64_t box_w, std::uint32_t box,
                      std::uint8_t* out, std::int64_t out_h, std::int64_t out_w);

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
  /// 0 or 1: the input is in_h x in_w pixels as they are. b > 1 (at most 8): it is the box
  /// reduction (the header's statement) of the box_h x box_w pixels from in_offset, rows in_stride
  /// apart, by b.
  std::uint32_t box = 0;
  std::uint32_t box_h = 0, box_w = 0;
};

/// The checks resize_bilinear_u8_device makes of `jobs` (host memory) before it queues anything:
/// sides 1 to 2^24, inputs and outputs inside the `in_bytes` and `out_bytes` given, and a box
/// reduction's every box covering a pixel of its box_h x box_w. Throws std::invalid_argument
/// naming the job and the field.
void check_resize_jobs(const resize_job* jobs, std::size_t count, std::uint64_t in_bytes, std::uint64_t out_bytes);

/// resize_bilinear_u8 for every job of a batch on the device (RGB), the same bytes as the host's;
/// `device_jobs` in device memory, `host_jobs` the same in host memory (checked, and sizing the
/// launch). Asynchronous on `stream`, no host synchronization, capturable. Throws
/// std::invalid_argument on bad jobs, cuda_error when the launch fails.
void resize_bilinear_u8_device(const resize_job* device_jobs, const resize_job* host_jobs, std::size_t count, const std::uint8_t* in,
                               std::uint64_t in_bytes, std::uint8_t* out, std::uint64_t out_bytes, cudaStream_t stream);

}  // namespace pinfeed::ops
