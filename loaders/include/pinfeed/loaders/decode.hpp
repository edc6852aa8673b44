#pragma once
/// @file decode.hpp
/// Image decoding: JPEG with libjpeg-turbo and pinfeed's own Huffman decoder (DCT scaling by 1/2,
/// 1/4, 1/8 when a smaller image suffices), BMP and PNM by pinfeed's own readers, PNG, WebP and TIFF by
/// libpng, libwebp and libtiff; every variant as Pillow decodes it or refused by name (docs/formats.md). The format
/// comes from the bytes, not the file name. Output is always 8-bit RGB, HWC: greyscale and CMYK
/// inputs are converted.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"

namespace pinfeed::loaders {

struct decode_options {
  /// Images with more pixels are rejected before any pixel buffer is allocated (decompression
  /// bombs): the size comes from the header of every format (peek_size); a non-JPEG image whose
  /// header gives no size is refused while there is a limit. 0 = no limit.
  std::int64_t max_pixels = std::int64_t{1} << 28;
  /// Decode JPEGs at the smallest DCT scale (1/8, 1/4, 1/2 or 1) whose shorter side is still >=
  /// this; 0 = full.
  std::int64_t min_short_side = 0;
  bool fast_dct = false;  ///< TurboJPEG's fast, slightly less exact IDCT
  /// The Huffman decoder of baseline JPEGs: pinfeed's (the default; faster, and the same pixels)
  /// inside libjpeg-turbo, or libjpeg-turbo's own. Progressive and arithmetic-coded JPEGs always
  /// use libjpeg-turbo's, and so does everything where jpeg_huffman_in_use() says pinfeed's is not
  /// available, and every JPEG whose entropy-coded data pinfeed's decoder finds corrupt (libjpeg
  /// then decodes it again, warnings and all, as below).
  enum class huffman_decoder { pinfeed, libjpeg };
  huffman_decoder huffman = huffman_decoder::pinfeed;
  /// Corrupt JPEG data that libjpeg decodes past with a warning (extraneous bytes before a marker,
  /// a bad Huffman code, a wrong restart marker: libjpeg fills or resyncs, as Pillow and libjpeg's
  /// own tools decode such files) is decoded by default, the warnings counted in decode_report.
  /// strict: refused at the first warning instead. A file that ends before its image does is
  /// refused either way ("Premature end of JPEG file"), as Pillow refuses a truncated file.
  bool strict = false;
  /// EXIF orientation (JPEG APP1, PNG eXIf, WebP EXIF): off by default, as torchvision's and
  /// Pillow's loaders leave it (the pixels as stored); on, the image is turned and mirrored as
  /// Pillow's ImageOps.exif_transpose turns it (a window then is of the turned image, decoded whole
  /// first; the device decode paths do not take it). A TIFF's Orientation tag is part of its
  /// raster's layout and always applied, by Pillow and here alike.
  bool apply_exif_orientation = false;
  /// The most memory one decode may take: the decoded image and what its decoder holds beside it,
  /// estimated from the header before any of it is allocated (decode_memory_need()). A decode that
  /// needs more is refused by name (its size, the estimate, the limit and where the limit came
  /// from), as an image over max_pixels is. nullopt (the default): this process's share of the
  /// node's memory (node_plan::rank_memory: the physical memory or a cgroup limit, divided among
  /// the local ranks) divided by the threads that may decode at once (TBB's cap on this process's
  /// threads); no limit where the memory is unknown. 0 = no limit.
  std::optional<std::uint64_t> max_decode_bytes{};
};

/// What decoding an image takes at most, from its header (decode_memory_need()).
struct decode_memory {
  std::uint64_t bytes = 0;  ///< 0 where the header gives no size
  std::string parts{};      ///< what it is made of, in words ("3 bytes a pixel: the decoded RGB pixels")
};
/// The memory decode_image() (region: decode_image_region()) of `bytes` needs at most, per pixel of
/// the full image: 3 bytes of RGB pixels, and for JPEGs other than baseline and extended
/// sequential (progressive, arithmetic) 6 more (libjpeg keeps every DCT coefficient, 2 bytes, of
/// up to 3 full-size components); WebP 4 more (a lossless image's ARGB rows); TIFF 4 more
/// (libtiff's RGBA raster); a window of a non-JPEG image 3 more (the whole image is decoded, then
/// cut); EXIF orientation applied, 3 more (the turned copy).
[[nodiscard]] decode_memory decode_memory_need(std::span<const std::byte> bytes, const decode_options& options,
                                               bool region);

/// The limit decode_options::max_decode_bytes gives (0: none) and where it came from, in words.
struct decode_memory_limit {
  std::uint64_t bytes = 0;
  std::string source{};  ///< in words: "this process's share of memory, ..." or the option
};
[[nodiscard]] decode_memory_limit decode_memory_limit_of(const decode_options& options);

/// What a decode went past without failing.
struct decode_report {
  int warnings = 0;           ///< libjpeg's corrupt-data warnings (decode_options::strict refuses these)
  std::string first_warning;  ///< the first, in libjpeg's words
};

/// Width and height from the header as the format defines it, without decoding and without a
/// decoder library: JPEG (the first frame header, past any bytes libjpeg skips), PNG (IHDR), WebP
/// (VP8, VP8L, VP8X), TIFF and BigTIFF (the first directory), BMP (Windows and OS/2 headers),
/// PNM. 0 x 0 where the header is malformed or the format is none of these.
struct image_size {
  std::int64_t width = 0, height = 0;
};
[[nodiscard]] image_size peek_size(std::span<const std::byte> bytes);

/// Decodes `bytes` into `out` (resized as needed; reuse it across calls) and returns the shape
/// (channels 3, uint8). Throws std::runtime_error naming `what` (a path) and the reason: empty,
/// not an image, truncated or corrupt, over the pixel limit.
/// `report`, where given, gains the decode's warnings.
image_spec decode_image(std::span<const std::byte> bytes, std::vector<std::byte>& out, const decode_options& options,
                        const std::string& what, decode_report* report = nullptr);

/// Decodes only `region` of the image (clamped to it), at the smallest DCT scale (JPEG: 1, 1/2,
/// 1/4, 1/8) that keeps the region's shorter side >= min_short_side (0: full resolution). For a
/// JPEG the rows above the window are skipped and the columns outside it are not converted
/// (libjpeg's jpeg_skip_scanlines and jpeg_crop_scanline), so a small window decodes in a fraction
/// of the time; the pixels equal the same window of a full decode at that scale. Other formats
/// (and CMYK JPEGs) are decoded whole and cut. Throws like decode_image().
image_spec decode_image_region(std::span<const std::byte> bytes, std::vector<std::byte>& out,
                               const decode_options& options, image_region region, std::int64_t min_short_side,
                               const std::string& what, decode_report* report = nullptr);

/// The DCT scale decode_image_region() decodes a JPEG's `region` at, as a denominator: the
/// smallest of 8, 4, 2 that keeps the region's shorter side >= min_short_side; 1 when none does or
/// min_short_side is 0.
[[nodiscard]] unsigned region_decode_denom(image_region region, std::int64_t min_short_side) noexcept;

/// The pixels decode_image_region() gives of a JPEG's `region` (inside the width x height image)
/// decoded at 1/denom (1, 2, 4, 8): the region scaled by the decode's size over the image's
/// (ceil(width / denom) / width), rounded down, at least 1 pixel and inside the decode.
[[nodiscard]] image_region scaled_region(image_region region, std::int64_t width, std::int64_t height, unsigned denom) noexcept;

/// Encodes 8-bit RGB pixels (HWC, `width` x `height`) as a baseline JPEG with TurboJPEG (4:2:0,
/// `quality` 1..100): test and benchmark data without an image codec library. Throws
/// std::invalid_argument for a bad size or quality, std::runtime_error if TurboJPEG fails.
[[nodiscard]] std::vector<std::byte> encode_jpeg(std::span<const std::uint8_t> rgb, int width, int height,
                                                 int quality = 90);

/// Which Huffman decoder decode_options::huffman_decoder::pinfeed gets in this process: pinfeed's
/// where it was built in (libjpeg-turbo's private jpegint.h present and the library's version on
/// the list the decoder was verified against) and the self-check passed, else libjpeg-turbo's.
/// The self-check runs once, at the first call (thread-safe): built-in test JPEGs (4:2:0, 4:4:4,
/// grey) are decoded with both decoders and must give the same pixels.
struct jpeg_huffman_status {
  bool pinfeed = false;
  std::string reason;  ///< e.g. "pinfeed's (libjpeg-turbo 2.1.5, self-check passed)"
};
[[nodiscard]] const jpeg_huffman_status& jpeg_huffman_in_use();

/// Reads a whole file. Throws std::runtime_error naming the path when it cannot be read.
void read_file(const std::string& path, std::vector<std::byte>& out);

}  // namespace pinfeed::loaders
