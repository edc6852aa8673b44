#pragma once
// A window of a JPEG decoded through libjpeg's API (with pinfeed's Huffman decoder unless told
// otherwise): rows above the window are skipped and columns outside it are not converted.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/decode.hpp"

namespace pinfeed::loaders::detail {

/// The DCT scale 1/denom to decode at, from the full size (width, height).
using jpeg_denom_fn = std::function<unsigned(std::int64_t width, std::int64_t height)>;
/// The window in output pixels, from the full size, the scale and the output size.
using jpeg_window_fn = std::function<image_region(std::int64_t width, std::int64_t height, double scale,
                                                  std::int64_t out_width, std::int64_t out_height)>;
/// Checks the full size before anything is decoded (the pixel limit); throws to refuse it.
using jpeg_size_check = std::function<void(std::int64_t width, std::int64_t height)>;

/// Decodes the window of `bytes` into `out` (RGB) and returns its shape; CMYK and YCCK JPEGs are
/// turned into RGB as Pillow turns them (inverted samples, its CMYK to RGB). Throws
/// std::runtime_error "<what>: corrupt or truncated JPEG (<libjpeg's words>)". strict: libjpeg's
/// first warning refuses the file; else warnings are counted into `report` (where given), the end
/// of the data still refuses it, and a scan pinfeed's Huffman decoder finds corrupt is decoded
/// again by libjpeg's.
[[nodiscard]] image_spec decode_jpeg_window(std::span<const std::byte> bytes, std::vector<std::byte>& out,
                                                           bool fast_dct, const std::string& what,
                                                           const jpeg_size_check& check, const jpeg_denom_fn& denom,
                                                           const jpeg_window_fn& window, bool pinfeed_huffman,
                                                           bool strict, decode_report* report);

}  // namespace pinfeed::loaders::detail
