#pragma once
/// @file jpeg_planes.hpp
/// The half of JPEG decoding that follows the entropy decoder: quantized DCT coefficients, their
/// quantization tables and the image's geometry in, 8-bit RGB (HWC) out, for a batch of images of
/// any sizes and chroma layouts at once, on the host (the reference) or on the device, bit for
/// bit the same. The arithmetic is libjpeg-turbo's (the host decode path's):
///   - dequantization and the accurate integer IDCT (JDCT_ISLOW: 13-bit constants, 2 bits kept
///     between the passes, int32 throughout), and the post-IDCT range limit of libjpeg's C code,
///     which takes the 10 low bits of the result (a value past +-512 wraps);
///   - for an image decoded at a DCT scale of 1/2, 1/4 or 1/8, libjpeg's reduced IDCTs (4x4, 2x2,
///     1x1 outputs per block, its jidctred.c), each component at the size libjpeg picks for it
///     (chroma at a larger one where that spares the upsampling: 4:2:0 at 1/2 takes 8x8 chroma);
///   - upsampling of each component to the image: libjpeg's "fancy" triangle filters for h2v1 and
///     h2v2 chroma more than 2 samples wide and for h1v2 chroma, replication otherwise (4:1:1,
///     narrow images, and every layout at 1/8, where libjpeg does not filter), with the image's
///     real edges (rows past the last one repeat it);
///   - YCbCr -> RGB with libjpeg's tables (16-bit fixed point, rounded), clamped; a grey image's
///     one component is copied to R, G and B.
/// libjpeg-turbo's SIMD IDCTs (SSE2, AVX2, NEON) saturate where its C IDCT wraps, so for blocks
/// whose values leave [-512, 511] before the range limit (no encoder makes them from 8-bit pixels;
/// a crafted file can) the host decode's pixels depend on the SIMD level it runs; these functions
/// follow the C code on every host and on the device.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::ops {

/// One component (Y, Cb or Cr; the one of a grey image) of a jpeg_image.
struct jpeg_component {
  std::uint8_t h = 1, v = 1;   ///< sampling factors (1 to 4; the image's max_h / h and max_v / v whole)
  std::uint8_t quant = 0;      ///< its quantization table: jpeg_image::first_quant + quant
  std::uint32_t width_in_blocks = 0, height_in_blocks = 0;  ///< the blocks stored (the padded plane / 8)
  std::uint64_t first_block = 0;  ///< its first block in the batch (row by row)
  /// Its IDCT's output size, libjpeg's DCT_scaled_size: 8, or 4, 2, 1 in a scaled decode, never
  /// below the image's `scale` (jpeg_component_scales() gives libjpeg's choice).
  std::uint8_t dct = 8;
};

/// One image of a batch: its geometry and where its data sits in the batch.
struct jpeg_image {
  std::uint32_t width = 0, height = 0;
  std::uint8_t components = 0;  ///< 1 (grey) or 3 (YCbCr)
  std::uint8_t max_h = 1, max_v = 1;
  /// The DCT scale it is decoded at, as libjpeg's min_DCT_scaled_size: 8 (whole), 4 (1/2), 2 (1/4)
  /// or 1 (1/8). The pixels are then ceil(width x scale / 8) by ceil(height x scale / 8): the
  /// window below and the output are in those pixels.
  std::uint8_t scale = 8;
  jpeg_component comp[3]{};
  /// Where the stored blocks sit in the whole image, in iMCUs (8 max_h x 8 max_v pixels, or
  /// scale max_h x scale max_v of a scaled decode): component k's first stored block is block
  /// column mcu_x * h, block row mcu_y * v of the whole image's.
  std::uint32_t mcu_x = 0, mcu_y = 0;
  /// The pixels decoded: a window of the image (crop_width 0: the whole image). The stored blocks
  /// must hold every sample its upsampling reads (the window's and one more on each side).
  std::uint32_t crop_x = 0, crop_y = 0, crop_width = 0, crop_height = 0;
  std::uint32_t first_quant = 0;   ///< its first table in the batch's tables
  std::uint64_t out_offset = 0;    ///< its first output byte (the window's height x width x 3 bytes from there)
  std::uint64_t plane_offset = 0;  ///< its first byte of scratch (the components' planes, one after another)
};

/// A batch: images in order (their blocks and outputs in the same order), the coefficients of all
/// their blocks (64 int16 each, in natural order, as quantized) and the quantization tables (64
/// uint16 each, natural order). The pointers are host memory for the host function and device
/// memory for the device one, except `images` of jpeg_device_batch::host.
struct jpeg_batch_view {
  const jpeg_image* images = nullptr;
  std::size_t count = 0;
  const std::int16_t* blocks = nullptr;
  std::uint64_t block_count = 0;
  const std::uint16_t* quant = nullptr;
  std::size_t quant_count = 0;
};

/// The sizes libjpeg gives the components' IDCTs (their `dct`) in a decode at `scale` (8, 4, 2, 1):
/// the smallest size doubled while the component's sampling factors divide the image's largest
/// ones with a factor of 2 to spare, at most 8 (libjpeg-turbo's jpeg_calc_output_dimensions).
void jpeg_component_scales(jpeg_image& image);

/// The pixels `image` decodes to (before its window): its size at its scale.
[[nodiscard]] std::uint32_t jpeg_scaled_width(const jpeg_image& image);
[[nodiscard]] std::uint32_t jpeg_scaled_height(const jpeg_image& image);

/// The blocks `image` stores (its components' width_in_blocks x height_in_blocks).
[[nodiscard]] std::uint64_t jpeg_block_count(const jpeg_image& image);
/// The scratch bytes `image` needs: its components' planes (width_in_blocks x dct by height_in_blocks x dct).
[[nodiscard]] std::uint64_t jpeg_plane_bytes(const jpeg_image& image);
/// The output bytes of `image`: its window's (or its) height x width x 3.
[[nodiscard]] std::uint64_t jpeg_output_bytes(const jpeg_image& image);

/// Checks a batch's geometry against itself and the sizes given (its images' blocks, tables,
/// outputs and planes in order and in range, factors that libjpeg upsamples, planes that cover the
/// image): throws std::invalid_argument naming the image, the component and the field.
void check_jpeg_batch(const jpeg_batch_view& batch, std::uint64_t out_bytes, std::uint64_t scratch_bytes);

/// The host reference: every image of `batch` into `out` (at each image's out_offset), using
/// `scratch` (at least the images' plane_offset + jpeg_plane_bytes). Checks as check_jpeg_batch.
void decode_jpeg_batch_host(const jpeg_batch_view& batch, std::uint8_t* out, std::uint64_t out_bytes, std::uint8_t* scratch,
                            std::uint64_t scratch_bytes);

/// The device version: `device` points to device memory (its images too); `host_images` is the
/// same geometry in host memory, which sizes the launches and is checked (as check_jpeg_batch)
/// before anything is queued. Asynchronous on `stream`, no host synchronization, capturable in a
/// graph. Throws std::invalid_argument on bad geometry, cuda_error when a launch fails.
void decode_jpeg_batch_device(const jpeg_batch_view& device, const jpeg_image* host_images, std::uint8_t* out,
                              std::uint64_t out_bytes, std::uint8_t* scratch, std::uint64_t scratch_bytes,
                              cudaStream_t stream);

/// Whether every host decodes block `coef` (64 int16, natural order, as quantized) with table `q`
/// (natural order) at IDCT size `dct` (8, 4, 2, 1) as these functions do: libjpeg-turbo's SIMD
/// IDCTs (8x8, 4x4 and 2x2) keep the dequantized values and the values between the passes in 16
/// bits and saturate the result where its C IDCT wraps, so they agree only while each dequantized
/// value and each value between the passes fits 16 bits and every sample before the range limit
/// is within [-512, 511]. The 1x1 has only C code: always. Photos' blocks always do.
[[nodiscard]] bool jpeg_block_same_on_every_host(const std::int16_t* coef, const std::uint16_t* q, int dct = 8);

/// The compact form of coefficient blocks, what the host half of hybrid decoding puts into a slot:
/// each block's nonzero coefficients in zigzag order, then an end byte 0x08. A coefficient is a
/// byte whose high nibble counts the zeros before it (0 to 15) and whose low nibble is its value
/// when that is -7..-1 or 1..7 (two's complement: 9..15 for -7..-1); low nibble 0: its value
/// follows as 2 bytes, little-endian (values past +-7 only). Runs of 16 zeros or more before a
/// coefficient start with 0xF8 bytes, 16 zeros each. One form only: nothing else is accepted (no
/// 0xF8 before the end byte, no other byte with low nibble 8, no index past 63). At quality 90
/// most coefficients take one byte: about an eighth of the dense int16 blocks.
/// Appends `blocks` (64 int16 each, natural order) packed to `out`, and, with `starts`, each
/// block's first byte in `out` (what the device unpack needs; `out` must stay under 4 GiB then).
void pack_jpeg_blocks(std::span<const std::int16_t> blocks, std::vector<std::uint8_t>& out,
                      std::vector<std::uint32_t>* starts = nullptr);

/// Unpacks exactly `block_count` blocks from `bytes` into `blocks` (dense, natural order). Throws
/// std::invalid_argument naming the block and the byte where the data is malformed: it ends inside
/// a block or a value, a byte with low nibble 8 is neither the end nor 16 zeros, an index passes
/// 63, 16 zeros come right before the end, a value within +-7 was written in two bytes, or bytes
/// are left over.
void unpack_jpeg_blocks(std::span<const std::uint8_t> bytes, std::uint64_t block_count, std::int16_t* blocks);

/// The same on the device, a thread per block, asynchronous on `stream` (no host synchronization,
/// capturable): block b is bytes[starts[b], starts[b + 1]) (the last one ends at `size`), all in
/// device memory, unpacked into `blocks`. The device accepts exactly what unpack_jpeg_blocks does:
/// a malformed block (or one that does not end where the next starts) is left all zero and adds 1
/// to *malformed (device memory the caller zeroes; unpack_jpeg_blocks on the host copy names the
/// first). Throws cuda_error when the launch fails, std::invalid_argument for null pointers.
void unpack_jpeg_blocks_device(const std::uint8_t* bytes, std::uint64_t size, const std::uint32_t* starts,
                               std::uint64_t block_count, std::int16_t* blocks, std::uint32_t* malformed,
                               cudaStream_t stream);

}  // namespace pinfeed::ops
