#pragma once
/// @file jpeg_coefficients.hpp
/// The host half of hybrid JPEG decoding: a JPEG entropy-decoded to its quantized DCT coefficients,
/// quantization tables and geometry (what pinfeed/ops/jpeg_planes.hpp turns into pixels, on the
/// host or the device), or the reason it is left to the whole host decode; and a JPEG encoder with
/// every option the tests of both halves need.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"

namespace pinfeed::loaders {

/// Why a file is not taken by the device half (it is decoded whole on the host instead).
enum class jpeg_fallback {
  none,
  not_jpeg,           ///< no JPEG start-of-image marker
  arithmetic,         ///< arithmetic-coded
  precision,          ///< not 8-bit samples (12-bit, lossless)
  colour,             ///< CMYK, YCCK, RGB or any colour space but YCbCr and grey
  sampling,           ///< sampling factors libjpeg upsamples with fractions, or none it takes
  quantization,       ///< a quantization step past 32767
  corrupt,            ///< truncated or corrupt data, or a warning libjpeg gives for it
  too_large,          ///< its compact blocks are more than the bytes allowed (pack_options::max_bytes)
  /// a block whose samples may leave [-512, 511] before the IDCT's range limit, where libjpeg-turbo's
  /// SIMD and C code differ (crafted or corrupt data; never a photo's)
  range,
};
[[nodiscard]] const char* to_string(jpeg_fallback f) noexcept;

/// One image's coefficients: `image` with its blocks from 0 and its tables from 0 (components in
/// the file's order; out_offset and plane_offset 0), `blocks` (64 int16 each, natural order) and
/// `quant` (64 uint16 each, natural order).
struct jpeg_coefficients {
  ops::jpeg_image image{};
  std::vector<std::int16_t> blocks;
  std::vector<std::uint16_t> quant;
};

/// What read_jpeg_coefficients() gives: the coefficients, or why not (and, for corrupt data,
/// libjpeg's message).
struct jpeg_read {
  std::optional<jpeg_coefficients> coefficients;
  jpeg_fallback fallback = jpeg_fallback::none;
  std::string reason;
};

/// Entropy-decodes `bytes` (baseline or progressive, all scans read) with libjpeg-turbo; files
/// whose pixels the device half cannot make exactly come back with their fallback. Images with more
/// than `max_pixels` pixels (0: no limit) are refused by a std::runtime_error naming `what`.
[[nodiscard]] jpeg_read read_jpeg_coefficients(std::span<const std::byte> bytes, const std::string& what,
                                               std::int64_t max_pixels = std::int64_t{1} << 28);

/// What pack_jpeg() does.
struct jpeg_pack_options {
  /// The pixels wanted, in the image's pixels (nothing: all of them). Only the blocks they need are
  /// stored: the window's iMCUs and one chroma sample more on each side (what upsampling reads).
  std::optional<image_region> window;
  /// More compact bytes than this (blocks, block starts and tables): jpeg_fallback::too_large. 0: no limit.
  std::uint64_t max_bytes = 0;
  /// Images with more pixels are refused by a std::runtime_error (0: no limit).
  std::int64_t max_pixels = std::int64_t{1} << 28;
  /// The DCT scale to decode at, as a denominator: 1, 2, 4 or 8 (libjpeg's reduced IDCTs). The
  /// window is then the one decode_image_region() decodes at that scale (scaled_region()), and the
  /// geometry's crop is in the scaled decode's pixels.
  unsigned scale_denom = 1;
};

/// One image as the host half gives it to the device: the compact blocks (jpeg_planes.hpp) of
/// the window, each block's first byte, the quantization tables, and the geometry (its blocks,
/// tables, output and planes from 0, the window as `image`'s crop). Reuse one across calls.
struct jpeg_packed {
  ops::jpeg_image image{};
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> starts;
  std::vector<std::uint16_t> quant;
  /// Read by pinfeed's scan walker (one baseline scan of every component, read down to the
  /// window's last row); false: by libjpeg, all its scans (progressive, one scan per component).
  bool walked = false;
  /// The bytes this puts into a slot: blocks, starts, tables and geometry.
  [[nodiscard]] std::uint64_t slot_bytes() const {
    return bytes.size() + starts.size() * sizeof(std::uint32_t) + quant.size() * sizeof(std::uint16_t) + sizeof(ops::jpeg_image);
  }
};

/// pack_jpeg()'s answer: none, or why the image is left to the host decode.
struct jpeg_pack_result {
  jpeg_fallback fallback = jpeg_fallback::none;
  std::string reason;
};

/// The host half of hybrid decoding: entropy-decodes `bytes` with pinfeed's Huffman decoder
/// straight into the compact form (a single baseline scan: rows below the window are not read,
/// blocks outside it only decoded), or through libjpeg's reader (every other scan layout), into
/// `out`. Files the device half cannot decode exactly come back with their fallback, and `out`
/// then holds nothing of use. Throws std::runtime_error naming `what` past max_pixels, and
/// std::invalid_argument for a window that is empty or not inside the image.
jpeg_pack_result pack_jpeg(std::span<const std::byte> bytes, const std::string& what, const jpeg_pack_options& options,
                           jpeg_packed& out);

/// The blocks, Huffman symbols and entropy-coded bits pack_jpeg()'s walk decodes for one file.
struct jpeg_entropy_counts {
  std::uint64_t blocks = 0, symbols = 0, bits = 0;
};

/// The entropy decoder of pack_jpeg() on its own, for benches: a file's header is read once, then
/// decode() runs the walk pack_jpeg() makes for the same options (the MCU rows down to the row
/// after the window's last, every block decoded) storing nothing, as often as it is called; so the
/// time of decode() is the entropy decoder's, and pack_jpeg()'s time less it is everything else.
class jpeg_entropy_probe {
 public:
  /// Throws as pack_jpeg() does for `options`, and std::runtime_error naming `what` for a file
  /// pack_jpeg() does not walk (not one baseline scan, or a fallback: its reason).
  jpeg_entropy_probe(std::span<const std::byte> bytes, const std::string& what, const jpeg_pack_options& options);
  ~jpeg_entropy_probe();
  jpeg_entropy_probe(const jpeg_entropy_probe&) = delete;
  jpeg_entropy_probe& operator=(const jpeg_entropy_probe&) = delete;
  /// Decodes the walk's blocks with pack_jpeg()'s decoder, storing nothing.
  void decode();
  /// The walk's blocks, symbols and bits, counted one symbol at a time with the canonical tables.
  [[nodiscard]] jpeg_entropy_counts count();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// A batch being put together on the host: images appended one after another (their blocks,
/// tables, outputs and planes in order), as ops::decode_jpeg_batch_* take them.
struct jpeg_batch {
  std::vector<ops::jpeg_image> images;
  std::vector<std::int16_t> blocks;
  std::vector<std::uint16_t> quant;
  std::uint64_t out_bytes = 0, scratch_bytes = 0;
  void append(const jpeg_coefficients& c);
  /// The image `p` holds, its blocks unpacked (ops::unpack_jpeg_blocks; throws as it does).
  void append(const jpeg_packed& p);
  [[nodiscard]] ops::jpeg_batch_view view() const;
};

/// How encode_jpeg_with() encodes.
struct jpeg_encode_options {
  int quality = 90;               ///< 1..100 (100: every step 1)
  /// Luma sampling factors against 1x1 chroma: 1x1 (4:4:4), 2x1 (4:2:2), 2x2 (4:2:0), 1x2 (4:4:0),
  /// 4x1 (4:1:1), 4x2 (4:1:0); grey writes one component.
  int h = 2, v = 2;
  bool grey = false;
  int restart_interval = 0;       ///< MCUs between restart markers (0: none)
  bool optimize = false;          ///< optimized Huffman tables
  bool progressive = false;
  bool arithmetic = false;
};
/// Encodes 8-bit RGB (HWC) with libjpeg-turbo. Throws std::invalid_argument for a bad size or
/// option, std::runtime_error when libjpeg fails.
[[nodiscard]] std::vector<std::byte> encode_jpeg_with(std::span<const std::uint8_t> rgb, int width, int height,
                                                      const jpeg_encode_options& options);

}  // namespace pinfeed::loaders
