#pragma once
// Internal: pinfeed's scan walker, the fast reader of pack_jpeg() (jpeg_scan.cpp). It walks a
// single baseline scan of every component with pinfeed's Huffman decoder (jpeg_entropy.hpp) and
// writes each wanted block in the compact form as it is decoded; errors go through libjpeg's
// error_exit (the caller's jump).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <jpeglib.h>

#include "jpeg_entropy.hpp"
#include "pinfeed/loaders/transforms.hpp"

namespace pinfeed::loaders::detail {

/// The most bytes a block takes in the compact form: 64 coefficients of 3 bytes, the end byte.
constexpr std::size_t kMostBlockBytes = 64 * 3 + 1;

/// Blocks whose bound is past this (samples past 500 in magnitude) are checked whole
/// (ops::jpeg_block_same_on_every_host); below it no sample can leave [-512, 511], nor a value
/// between the passes 16 bits (each is under 4 x 8 x 500 / (0.7 x 0.7)). Photos' samples stay
/// near [-128, 127], but their bounds, sums of magnitudes, pass this for sharp edges. The bound
/// holds for the reduced IDCTs too: with the DC's weight the same (a sample's worth), each
/// coefficient's weight in their 1-D passes is below the 8-point pass's largest for it (4 points:
/// 1.28, 0.92, 1.09, 0.73, 0.38, 0.25 for coefficients 1, 2, 3, 5, 6, 7 against 1.39, 1.31, 1.39,
/// 1.39, 1.31, 1.39 (sqrt 2 cos(pi/16) for every odd one); 2 points: 0.91, 0.32, 0.21, 0.18 for 1, 3, 5, 7).
constexpr std::int64_t kMostGain = std::int64_t{500} * 4096;

// A growing byte buffer written through a pointer (grown before each block, never shrunk, so a
/// thread's buffers stop growing after its largest image).
struct byte_run {
  std::vector<std::uint8_t> v;
  std::size_t n = 0;
  std::vector<std::uint32_t> starts;  ///< each block's first byte
  std::uint8_t* room(std::size_t bytes) {
    if (v.size() - n < bytes) v.resize(std::max(v.size() * 2, n + bytes));
    return v.data() + n;
  }
  void clear() {
    n = 0;
    starts.clear();
  }
  void append(const byte_run& o) {
    if (o.n == 0) return;
    for (const std::uint32_t s : o.starts) starts.push_back(static_cast<std::uint32_t>(n + s));
    std::memcpy(room(o.n), o.v.data(), o.n);
    n += o.n;
  }
};

/// The walker's per-thread state: each component's blocks, its MCU row's block rows (components
/// sampled more than once vertically), and the Huffman tables built (kept between images).
struct scan_scratch {
  byte_run comp[3];
  byte_run rows[3][4];
  entropy::table tables[2][NUM_HUFF_TBLS];
};

/// The stored blocks: iMCU columns [x0, x1) and rows [y0, y1), and per component (in the frame's
/// order) its sampling in the iMCU, its blocks in the whole image and its IDCT size (8, or a
/// scaled decode's smaller one: which of the IDCTs' ranges its blocks are checked against).
struct layout {
  std::uint32_t x0, x1, y0, y1;
  int components;
  int h[3], v[3];
  std::uint32_t wib[3], hib[3];
  int dct[3];
  [[nodiscard]] std::uint32_t first_col(int k) const { return x0 * static_cast<std::uint32_t>(h[k]); }
  [[nodiscard]] std::uint32_t end_col(int k) const { return std::min(x1 * static_cast<std::uint32_t>(h[k]), wib[k]); }
  [[nodiscard]] std::uint32_t first_row(int k) const { return y0 * static_cast<std::uint32_t>(v[k]); }
  [[nodiscard]] std::uint32_t end_row(int k) const { return std::min(y1 * static_cast<std::uint32_t>(v[k]), hib[k]); }
};

/// The scan's blocks of one MCU, in order: component (frame index and scan index), place in the
/// MCU, and tables.
struct mcu_plan {
  int blocks = 0;
  int comp[D_MAX_BLOCKS_IN_MCU], scan[D_MAX_BLOCKS_IN_MCU], dx[D_MAX_BLOCKS_IN_MCU], dy[D_MAX_BLOCKS_IN_MCU];
  const entropy::table* dc[D_MAX_BLOCKS_IN_MCU];
  const entropy::table* ac[D_MAX_BLOCKS_IN_MCU];
  std::uint32_t mcus_w = 0, mcus_h = 0;
  std::int64_t gain[MAX_COMPONENTS][64];  ///< each component's gain_table (frame order)
  std::uint16_t quant[MAX_COMPONENTS][64];  ///< each component's steps (natural order)
};

/// How a walk ended: every wanted block written, or stopped where the image goes to the host decode.
enum class walk_end { walked, too_large, past_63, past_range };

/// Each step of table `q` (natural order) times its gain, in zigzag order.
void gain_table(const JQUANT_TBL& q, std::int64_t* out);

/// The layout for `window`, in the pixels of a decode at `scale` (8: whole, 4, 2, 1: 1/2, 1/4,
/// 1/8), with the components' IDCT sizes `dct`. A grey image is one block per iMCU whatever its
/// sampling factors say (libjpeg reads it so: one component is never interleaved).
layout layout_for(const jpeg_decompress_struct& c, const image_region& w, int scale, const int* dct);

/// The plan of the scan jpeg_read_header() stopped at, or false where it is not one baseline scan
/// of every component whose tables are all there (libjpeg's reader then reads the file).
bool plan_scan(const jpeg_decompress_struct& c, scan_scratch& s, mcu_plan& p);

/// Walks the scan down to the iMCU row after the layout's last (libjpeg's upsampler reads the
/// next iMCU row as context, so the host decode of the window reads that far, and corrupt data
/// there fails it: the walker must not take what the host decode refuses); the components'
/// blocks end in s.comp.
walk_end walk_scan(j_decompress_ptr cinfo, const mcu_plan& p, const layout& l, scan_scratch& s, std::uint64_t max_bytes);

/// The blocks, Huffman symbols and scan bits (stuffed bytes and restart markers included) of the
/// scan's first `rows` MCU rows, decoded one symbol at a time with the canonical tables (a count
/// for the bench, independent of the fast tables).
struct walk_counts {
  std::uint64_t blocks = 0, symbols = 0, bits = 0;
};
walk_counts count_scan(j_decompress_ptr cinfo, const mcu_plan& p, std::uint32_t rows);

}  // namespace pinfeed::loaders::detail
