// A window of a JPEG through libjpeg (jpeg_window.hpp). libjpeg reports errors by calling
// error_exit, which must not return: it jumps back to decode_jpeg_window(), which throws. Nothing
// between the jump and its target owns anything (the helpers' locals are plain values).
#include "jpeg_window.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <jpeglib.h>
#include <jerror.h>

#include "cmyk.hpp"
#include "jpeg_error_jump.hpp"
#include "jpeg_huffman.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::detail {
namespace {

/// Several rows per call: libjpeg produces rec_outbuf_height rows at a time anyway.
constexpr int kRows = 16;

/// How the window's rows are read: whole rows from the top straight into the output, any other
/// window through a row buffer, cropped to it.
struct row_reader {
  JSAMPROW rows[kRows];
  bool direct = false;
  int channels = 3;      ///< of libjpeg's rows: 3 (RGB), or 4 (CMYK, converted as rows are copied)
  std::int64_t y = 0;    ///< the next output row libjpeg gives
  std::size_t skip = 0;  ///< bytes of a buffered row left of the window
};


/// Sets up reading `win` of an output `ow` pixels wide: a window that is not whole rows from the
/// top is cropped (libjpeg widens it to iMCU boundaries) and the rows above it skipped.
void begin_window(jpeg_decompress_struct& cinfo, const image_region& win, std::int64_t ow,
                  std::vector<JSAMPLE>& row_storage, row_reader& r) {
  r.direct = win.x == 0 && win.width == ow && win.y == 0 && r.channels == 3;
  if (r.direct) return;
  // Chroma upsampling treats the edges of a cropped or skipped area as image edges: keep one iMCU
  // (16 pixels) of margin on every side so those edges fall outside the window.
  constexpr std::int64_t kMargin = 16;
  const std::int64_t mx = std::max<std::int64_t>(0, win.x - kMargin);
  r.y = std::max<std::int64_t>(0, win.y - kMargin);
  auto xoff = static_cast<JDIMENSION>(mx);
  auto cw = static_cast<JDIMENSION>(std::min<std::int64_t>(win.x + win.width + kMargin, ow) - mx);
  jpeg_crop_scanline(&cinfo, &xoff, &cw);
  if (r.y > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(r.y));
  const auto c = static_cast<std::size_t>(r.channels);
  row_storage.resize(static_cast<std::size_t>(cw) * c * kRows);
  for (int k = 0; k < kRows; ++k) r.rows[k] = row_storage.data() + static_cast<std::size_t>(k) * cw * c;
  r.skip = static_cast<std::size_t>(win.x - static_cast<std::int64_t>(xoff)) * c;
}

/// Four-channel JPEGs as Pillow decodes them: the samples taken as Adobe stores them, inverted
/// (Pillow's "CMYK;I" for every CMYK JPEG), then its CMYK to RGB (cmyk.hpp).
void cmyk_to_rgb(const JSAMPLE* in, std::uint8_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i, in += 4, out += 3) {
    const std::uint8_t cmyk[4] = {static_cast<std::uint8_t>(255 - in[0]), static_cast<std::uint8_t>(255 - in[1]),
                                  static_cast<std::uint8_t>(255 - in[2]), static_cast<std::uint8_t>(255 - in[3])};
    pillow_cmyk_to_rgb(cmyk, out);
  }
}

/// Reads the window's rows into `out` (its size). Data that ends early jumps through `err`.
void read_window(jpeg_decompress_struct& cinfo, jpeg_error_jump& err, const image_region& win, row_reader& r,
                 std::byte* out) {
  const auto out_row = [&](std::int64_t row) { return out + static_cast<std::size_t>((row - win.y) * win.width) * 3; };
  while (r.y < win.y + win.height) {
    const auto want = static_cast<JDIMENSION>(std::min<std::int64_t>(kRows, win.y + win.height - r.y));
    if (r.direct)
      for (JDIMENSION k = 0; k < want; ++k) r.rows[k] = reinterpret_cast<JSAMPLE*>(out_row(r.y + k));
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, r.rows, want);
    if (got == 0) {
      std::snprintf(err.message, sizeof err.message, "premature end of data");
      std::longjmp(err.jump, 1);
    }
    for (JDIMENSION k = 0; k < got; ++k, ++r.y) {
      if (r.direct || r.y < win.y) continue;
      if (r.channels == 3) std::memcpy(out_row(r.y), r.rows[k] + r.skip, static_cast<std::size_t>(win.width) * 3);
      else cmyk_to_rgb(r.rows[k] + r.skip, reinterpret_cast<std::uint8_t*>(out_row(r.y)), win.width);
    }
  }
}

/// The warnings a decode went past, into the caller's report.
void add_warnings(const jpeg_error_jump& err, decode_report* report) {
  if (report == nullptr || err.warnings == 0) return;
  if (report->warnings == 0) report->first_warning = err.first_warning;
  report->warnings += err.warnings;
}

/// RGB (or, for a CMYK or YCCK JPEG, CMYK) out, at 1/denom, with the chosen IDCT.
void set_output(jpeg_decompress_struct& cinfo, unsigned denom, bool fast_dct, bool cmyk) {
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.scale_num = 1;
  cinfo.scale_denom = denom;
  cinfo.dct_method = fast_dct ? JDCT_IFAST : JDCT_ISLOW;
}

}  // namespace

image_spec decode_jpeg_window(std::span<const std::byte> bytes, std::vector<std::byte>& out, bool fast_dct,
                                             const std::string& what, const jpeg_size_check& check,
                                             const jpeg_denom_fn& denom, const jpeg_window_fn& window,
                                             bool pinfeed_huffman, bool strict, decode_report* report) {
  jpeg_decompress_struct cinfo{};
  jpeg_error_jump err{};
  err.count_warnings = !strict;
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&cinfo), err);
  // Per-thread storage, not a local: nothing to undo after a longjmp.
  auto& row_storage = pinfeed::detail::thread_scratch<std::vector<JSAMPLE>, struct jpeg_rows>();
  // Set once pinfeed's Huffman decoder runs the scan: a member of err (whose address libjpeg
  // holds, so it lives in memory), read through a pointer set before the setjmp.
  const bool* in_our_scan = &err.in_pinfeed_scan;
  if (setjmp(err.jump)) {
    const int code = err.mgr.msg_code;
    const bool ours = *in_our_scan;
    jpeg_destroy_decompress(&cinfo);
    // libjpeg's JERR_OUT_OF_MEMORY (its allocator returned null) is no fault of the image:
    // error_policy::skip must not skip it. (Its sizes follow the header, which max_pixels checked.)
    if (code == JERR_OUT_OF_MEMORY) throw std::bad_alloc();
    // pinfeed's decoder stops at corrupt data that libjpeg's may decode past with a warning: unless
    // warnings are refused, libjpeg's own decoder decodes the file again, so the pixels (and the
    // verdict) are libjpeg's.
    if (ours && !strict) return decode_jpeg_window(bytes, out, fast_dct, what, check, denom, window, false, false, report);
    throw pinfeed::runtime_error(what + ": corrupt or truncated JPEG (" + err.message + ")");
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  // The size again, from libjpeg's own reading of the frame header: a caller's peek may give up on
  // headers TurboJPEG refuses, which libjpeg may still read.
  try {
    check(cinfo.image_width, cinfo.image_height);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  const std::int64_t W = cinfo.image_width, H = cinfo.image_height;
  set_output(cinfo, denom(W, H), fast_dct, cmyk);
  jpeg_start_decompress(&cinfo);
  // pinfeed's Huffman decoder is verified on one and three components: CMYK takes libjpeg's.
  if (pinfeed_huffman && !cmyk && use_pinfeed_huffman(&cinfo)) err.in_pinfeed_scan = true;
  const std::int64_t ow = cinfo.output_width, oh = cinfo.output_height;
  const image_region win = window(W, H, static_cast<double>(ow) / static_cast<double>(W), ow, oh);
  const image_spec spec{win.height, win.width, 3, dtype::u8};
  out.resize(spec.bytes());
  row_reader r;
  r.channels = cmyk ? 4 : 3;
  begin_window(cinfo, win, ow, row_storage, r);
  read_window(cinfo, err, win, r, out.data());
  jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  add_warnings(err, report);
  return spec;
}

}  // namespace pinfeed::loaders::detail
