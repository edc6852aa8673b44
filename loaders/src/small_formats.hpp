#pragma once
// pinfeed's own readers of the two formats no library decodes every variant of correctly (OpenCV
// 4.6 gives 32-bit bitfield BMPs the wrong channels and leaves PNM maxvals unscaled): BMP and PNM,
// to the pixels Pillow gives (tests/loaders/formats_test.cpp is the proof). Both check every
// offset against the bytes; the caller has checked the header's size against the pixel limit.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/decode.hpp"

namespace pinfeed::loaders::detail {

/// PBM, PGM, PPM, raw and plain (P1..P6), maxval 1..65535, to 8-bit RGB: bitmaps 1 -> black;
/// colour samples scaled to 0..255, rounding half to even; grey samples of a maxval up to 255 the
/// same, over 255 scaled to 0..65535 and their high byte taken. Throws std::runtime_error "<what>:
/// <reason>" for a malformed header, a sample over maxval, or data that ends early.
image_spec decode_pnm(std::span<const std::byte> bytes, std::vector<std::byte>& out, const std::string& what);

/// BMP: the core (OS/2 1.x), OS/2 2.x and Windows 3..5 headers; 1, 4 and 8 bits with a palette,
/// RLE8 and RLE4 (as Pillow reads them; delta escapes and odd RLE4 absolute runs refused); 16, 24
/// and 32 bits, plain or with bit masks (channels scaled to 8 bits by
/// truncation, as Pillow's 5- and 6-bit unpackers do); rows bottom-up or top-down. Alpha is
/// dropped. Throws std::runtime_error "<what>: <reason>" for what it cannot decode (embedded JPEG
/// or PNG, odd depths, bad masks) and for data that ends early.
image_spec decode_bmp(std::span<const std::byte> bytes, std::vector<std::byte>& out, const std::string& what);

}  // namespace pinfeed::loaders::detail
