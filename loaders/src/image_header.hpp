#pragma once
// Image headers read as each format defines them, without a decoder library and without state:
// the size peek (peek_size) and the JPEG frame header the decode path checks before libjpeg runs.

#include <cstddef>
#include <cstdint>
#include <span>

#include "pinfeed/loaders/decode.hpp"

namespace pinfeed::loaders::detail {

/// A JPEG's first frame header (SOF0..SOF15 but DHT, JPG and DAC), found by walking the markers as
/// libjpeg's reader does: bytes between markers are skipped (libjpeg: "extraneous bytes before
/// marker", a warning), fill bytes 0xFF too, and every marker segment but SOI, TEM and RSTn has a
/// 16-bit length. `found` is false where the bytes end, a length is short, or a scan starts
/// before a frame header.
struct jpeg_frame {
  bool found = false;
  int marker = 0;      ///< 0xC0..0xCF: baseline, extended, progressive, lossless, arithmetic...
  int precision = 0;   ///< bits a sample: 8, or 12 / 16 (which an 8-bit libjpeg cannot decode)
  std::int64_t width = 0, height = 0;  ///< height 0: given by a DNL marker after the first scan
  int components = 0;
};
[[nodiscard]] jpeg_frame read_jpeg_frame(std::span<const std::byte> bytes) noexcept;

/// The JPEG marker process a frame is coded with, in words ("lossless (SOF3)"), for messages.
[[nodiscard]] const char* jpeg_process_name(int marker) noexcept;

[[nodiscard]] bool is_jpeg(std::span<const std::byte> bytes) noexcept;
[[nodiscard]] bool is_tiff(std::span<const std::byte> bytes) noexcept;  ///< classic TIFF or BigTIFF
[[nodiscard]] bool is_pnm(std::span<const std::byte> bytes) noexcept;   ///< P1..P6 and whitespace
[[nodiscard]] bool is_webp(std::span<const std::byte> bytes) noexcept;  ///< RIFF....WEBP
/// What a TIFF's first directory says of its samples (the first value of each tag; defaults where
/// a tag is missing, -1 for Photometric).
struct tiff_layout {
  int bits = 1, samples = 1, photometric = -1, sample_format = 1;  ///< SampleFormat 1 uint, 2 int, 3 float
  int orientation = 1;  ///< the Orientation tag (274): how the rows are laid out, 1..8
};
[[nodiscard]] tiff_layout read_tiff_layout(std::span<const std::byte> bytes) noexcept;

/// The EXIF orientation (1..8) a file carries, as Pillow's getexif() finds it: a JPEG's first APP1
/// "Exif" segment, a PNG's eXIf chunk, a WebP's EXIF chunk; 1 where there is none or it is not
/// 1..8, and for a TIFF, whose Orientation tag (274) is part of its raster's layout: its decoders
/// (Pillow's, libtiff's RGBA reader under OpenCV) always apply it.
[[nodiscard]] int exif_orientation(std::span<const std::byte> bytes) noexcept;

}  // namespace pinfeed::loaders::detail
