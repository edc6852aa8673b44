#pragma once
// JPEGs for the tests of the two halves of JPEG decoding (tests/loaders/jpeg_planes_test.cpp on the
// host, tests/ops/jpeg_gpu_test.cu on the device): pictures with edges and noise, every chroma
// layout, and the host decode path's pixels to compare with.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"

namespace pinfeed::test {

/// Gradients, a sharp-edged square (ringing after the DCT) and Philox-free noise (a fixed
/// generator), h x w RGB.
inline std::vector<std::uint8_t> jpeg_picture(int w, int h, std::uint32_t seed) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(w) * h * 3);
  std::uint32_t state = seed * 2654435761u + 1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k) {
        state = state * 1664525u + 1013904223u;
        const bool square = x > w / 4 && x < 3 * w / 4 && y > h / 4 && y < 3 * h / 4;
        int v = ((x * (k + 3) + y * (5 - k)) * 7 + static_cast<int>(seed) * 31) % 256 + static_cast<int>(state >> 27) - 16;
        if (square) v = k == 1 ? 250 : 10;
        px[(static_cast<std::size_t>(y) * w + x) * 3 + k] = static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
      }
  return px;
}

/// A chroma layout and its encoder options.
struct jpeg_layout {
  const char* name;
  int h, v;
  bool grey;
};
inline const std::vector<jpeg_layout>& jpeg_layouts() {
  static const std::vector<jpeg_layout> all{{"4:4:4", 1, 1, false}, {"4:2:2", 2, 1, false}, {"4:2:0", 2, 2, false},
                                            {"4:4:0", 1, 2, false}, {"4:1:1", 4, 1, false}, {"grey", 1, 1, true}};
  return all;
}

/// `w` x `h` of jpeg_picture(seed) encoded with `layout` and `o` (its sampling fields replaced).
inline std::vector<std::byte> jpeg_file(int w, int h, std::uint32_t seed, const jpeg_layout& layout, loaders::jpeg_encode_options o = {}) {
  o.h = layout.h;
  o.v = layout.v;
  o.grey = layout.grey;
  return loaders::encode_jpeg_with(jpeg_picture(w, h, seed), w, h, o);
}

/// The host decode path's RGB pixels of `file` (libjpeg-turbo with pinfeed's Huffman decoder).
inline std::vector<std::uint8_t> host_pixels(const std::vector<std::byte>& file) {
  std::vector<std::byte> out;
  (void)loaders::decode_image(file, out, {}, "test JPEG");
  const auto* p = reinterpret_cast<const std::uint8_t*>(out.data());
  return {p, p + out.size()};
}

/// libjpeg-turbo's decompressor over `file`, its headers read; destroyed with it. A failure exits
/// (libjpeg's default handler): the test files are good.
struct libjpeg_reader {
  jpeg_decompress_struct c{};
  jpeg_error_mgr err{};
  explicit libjpeg_reader(const std::vector<std::byte>& file) {
    c.err = jpeg_std_error(&err);
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(file.data()), static_cast<unsigned long>(file.size()));
    jpeg_read_header(&c, TRUE);
  }
  ~libjpeg_reader() { jpeg_destroy_decompress(&c); }
  libjpeg_reader(const libjpeg_reader&) = delete;
  libjpeg_reader& operator=(const libjpeg_reader&) = delete;
};

/// libjpeg's decode of `file` at 1/denom (RGB, the accurate IDCT, fancy upsampling: the host
/// path's settings), straight through libjpeg-turbo (its SIMD IDCTs where this host has them).
inline std::vector<std::uint8_t> libjpeg_scaled(const std::vector<std::byte>& file, unsigned denom) {
  libjpeg_reader r(file);
  jpeg_decompress_struct& c = r.c;
  c.out_color_space = JCS_RGB;
  c.scale_num = 1;
  c.scale_denom = denom;
  c.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&c);
  std::vector<std::uint8_t> px(static_cast<std::size_t>(c.output_width) * c.output_height * 3);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = px.data() + static_cast<std::size_t>(c.output_scanline) * c.output_width * 3;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  return px;
}

}  // namespace pinfeed::test
