#pragma once
// Internal: what the two readers of the host half (libjpeg's coefficient reader in
// jpeg_coefficients.cpp, pinfeed's scan walker in jpeg_scan.cpp) share.
#include <span>
#include <string>

#include <jpeglib.h>

#include "jpeg_error_jump.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"

namespace pinfeed::loaders::detail {

/// A libjpeg decompression whose errors jump (jpeg_error_jump.hpp); ended on every path by the
/// destructor. Lives behind a pointer set before the jump target, so nothing it holds is in a
/// register the jump loses.
struct decompress_state {
  jpeg_decompress_struct cinfo{};
  jpeg_error_jump err{};
  bool created = false;
  decompress_state() = default;
  decompress_state(const decompress_state&) = delete;
  decompress_state& operator=(const decompress_state&) = delete;
  ~decompress_state() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

/// Why the header read into `c` is not one the device half takes (setting `reason`), or none.
[[nodiscard]] jpeg_fallback refuse_for_device(const jpeg_decompress_struct& c, std::string& reason);

/// Whether nvJPEG takes `bytes` (its headers read by libjpeg): 8-bit Huffman-coded YCbCr or grey
/// with whole sampling ratios; for its hardware backend also a single interleaved baseline scan
/// and 4:4:4, 4:2:2, 4:2:0, 4:4:0 or grey sampling (its engines take no other). False for data
/// libjpeg cannot read the headers of.
[[nodiscard]] bool nvjpeg_takes(std::span<const std::byte> bytes, bool hardware);

/// Whether the entropy-coded data of every scan of `bytes` decodes: a single baseline scan walked
/// with pinfeed's Huffman decoder (no block stored, no IDCT), any other layout read by libjpeg's
/// coefficient reader. libjpeg's corrupt-data warnings count as errors, as on the host decode path
/// (a truncated scan, a bad Huffman code, extraneous bytes or a wrong restart marker). False sets
/// `why` to libjpeg's message. Whole files go to nvJPEG only past this check: its hardware backend
/// can report success for a file whose headers parse but whose data is corrupt, and write garbage.
[[nodiscard]] bool jpeg_scan_intact(std::span<const std::byte> bytes, std::string& why);

}  // namespace pinfeed::loaders::detail
