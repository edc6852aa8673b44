// BMP and PNM readers (small_formats.hpp). Every read is checked against the bytes; the output
// is sized from the header, which the caller checked against the pixel limit.
#include "small_formats.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cstdint>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::detail {
namespace {

[[noreturn]] void refuse(const std::string& what, const std::string& reason) {
  throw pinfeed::runtime_error(what + ": " + reason);
}

std::uint8_t byte_at(std::span<const std::byte> b, std::size_t at) { return static_cast<std::uint8_t>(b[at]); }

/// num / den rounded half to even (Pillow's round() of a PNM sample's scaling).
std::uint32_t round_half_even(std::uint64_t num, std::uint64_t den) {
  const std::uint64_t q = num / den, r = num % den;
  return static_cast<std::uint32_t>(2 * r > den || (2 * r == den && (q & 1)) ? q + 1 : q);
}

// ---------------------------------------------------------------------------------------- PNM

struct pnm_reader {
  std::span<const std::byte> b;
  std::size_t at = 2;
  const std::string& what;

  /// Whitespace and '#' comments (to the end of the line).
  void skip_space() {
    while (at < b.size()) {
      const auto c = byte_at(b, at);
      if (c == '#') {
        while (at < b.size() && byte_at(b, at) != '\n' && byte_at(b, at) != '\r') ++at;
      } else if (std::isspace(c)) {
        ++at;
      } else {
        return;
      }
    }
  }
  /// A decimal number; in the header it must end at whitespace (as the size peek reads it).
  std::uint32_t number(const char* name, bool in_header) {
    skip_space();
    std::uint64_t v = 0;
    std::size_t digits = 0;
    while (at < b.size() && std::isdigit(byte_at(b, at))) {
      if (++digits > 10) refuse(what, std::string("PNM ") + name + " has more than 10 digits");
      v = v * 10 + (byte_at(b, at++) - '0');
    }
    if (digits == 0)
      refuse(what, std::string(at >= b.size() ? "PNM data ends before its " : "PNM: no number where its ") + name +
                       " should be (byte " + std::to_string(at) + ")");
    if (in_header && (at >= b.size() || !std::isspace(byte_at(b, at))))
      refuse(what, std::string("PNM header: the ") + name + " is not followed by whitespace");
    if (v > 0xFFFFFFFFu) refuse(what, std::string("PNM ") + name + " " + std::to_string(v) + " is out of range");
    return static_cast<std::uint32_t>(v);
  }
};

}  // namespace

namespace {

/// Each sample value's 8-bit value, for every value up to maxval (decode_pnm's rules).
std::vector<std::uint8_t> pnm_table(std::uint32_t maxval, bool bitmap, bool colour) {
  std::vector<std::uint8_t> table(maxval + 1);
  for (std::uint32_t v = 0; v <= maxval; ++v) {
    if (bitmap) table[v] = static_cast<std::uint8_t>(v ? 0 : 255);
    else if (colour || maxval <= 255) table[v] = static_cast<std::uint8_t>(round_half_even(std::uint64_t{v} * 255, maxval));
    else table[v] = static_cast<std::uint8_t>(round_half_even(std::uint64_t{v} * 65535, maxval) >> 8);
  }
  return table;
}

/// Calls put(i, value) for each of `samples` samples of the raster after the header.
template <class Put>
void read_pnm_samples(pnm_reader& r, int kind, std::uint32_t w, std::uint32_t h, std::uint32_t maxval, std::uint64_t samples,
                      const Put& put) {
  const auto b = r.b;
  const auto short_data = [&](std::uint64_t got) {
    refuse(r.what, "PNM pixel data ends after " + std::to_string(got) + " of " + std::to_string(samples) + " samples");
  };
  const std::size_t left = b.size() - std::min(r.at, b.size());
  if (kind == 4) {  // packed bits, rows padded to a byte, 1 = black
    const std::uint64_t row = (std::uint64_t{w} + 7) / 8;
    if (left < row * h) short_data(left * 8);
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x) put(std::uint64_t{y} * w + x, (byte_at(b, r.at + y * row + x / 8) >> (7 - x % 8)) & 1);
  } else if (kind >= 5) {
    const std::uint64_t size = maxval > 255 ? 2 : 1;
    if (left / size < samples) short_data(left / size);
    for (std::uint64_t i = 0; i < samples; ++i) {
      const std::size_t at = r.at + static_cast<std::size_t>(i * size);
      put(i, size == 2 ? (std::uint32_t{byte_at(b, at)} << 8) | byte_at(b, at + 1) : byte_at(b, at));
    }
  } else {  // plain: decimal numbers, or a bitmap's '0' and '1' with or without whitespace between
    for (std::uint64_t i = 0; i < samples; ++i) {
      r.skip_space();
      if (r.at >= b.size()) short_data(i);
      if (kind != 1) {
        put(i, r.number("sample", false));
        continue;
      }
      const auto c = byte_at(b, r.at++);
      if (c != '0' && c != '1') refuse(r.what, "PBM sample " + std::to_string(i) + " is '" + std::string(1, static_cast<char>(c)) + "', not 0 or 1");
      put(i, c - '0');
    }
  }
}

}  // namespace

image_spec decode_pnm(std::span<const std::byte> bytes, std::vector<std::byte>& out, const std::string& what) {
  pnm_reader r{bytes, 2, what};
  const int kind = byte_at(bytes, 1) - '0';  // 1..6, checked by the caller's magic test
  const bool bitmap = kind == 1 || kind == 4, colour = kind == 3 || kind == 6;
  const std::uint32_t w = r.number("width", true), h = r.number("height", true);
  const std::uint32_t maxval = bitmap ? 1 : r.number("maxval", true);
  if (w == 0 || h == 0) refuse(what, "PNM of " + std::to_string(w) + "x" + std::to_string(h) + " pixels");
  if (maxval == 0 || maxval > 65535) refuse(what, "PNM maxval " + std::to_string(maxval) + " is outside 1..65535");
  if (kind >= 4) ++r.at;  // the single whitespace byte before a raw raster
  const std::vector<std::uint8_t> table = pnm_table(maxval, bitmap, colour);
  const image_spec spec{h, w, 3, dtype::u8};
  out.resize(spec.bytes());
  auto* px = reinterpret_cast<std::uint8_t*>(out.data());
  const std::uint64_t samples = std::uint64_t{w} * h * (colour ? 3 : 1);
  read_pnm_samples(r, kind, w, h, maxval, samples, [&](std::uint64_t i, std::uint32_t v) {
    if (v > maxval)
      refuse(what, "PNM sample " + std::to_string(i) + " is " + std::to_string(v) + ", over the maxval " + std::to_string(maxval));
    if (colour) px[i] = table[v];
    else px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = table[v];
  });
  return spec;
}

// ---------------------------------------------------------------------------------------- BMP

namespace {

std::uint32_t u16(std::span<const std::byte> b, std::size_t at) { return byte_at(b, at) | (std::uint32_t{byte_at(b, at + 1)} << 8); }
std::uint32_t u32(std::span<const std::byte> b, std::size_t at) { return u16(b, at) | (u16(b, at + 2) << 16); }

/// One channel of a bit-field pixel: its bits, scaled to 0..255 by truncation.
struct channel {
  std::uint32_t mask = 0;
  int shift = 0;
  std::uint32_t top = 0;
  std::uint8_t operator()(std::uint32_t px) const {
    return static_cast<std::uint8_t>(top == 255 ? (px & mask) >> shift : ((px & mask) >> shift) * 255 / top);
  }
};

channel channel_of(std::uint32_t mask, const char* name, const std::string& what) {
  if (mask == 0) refuse(what, std::string("BMP bit field of ") + name + " is empty");
  const int shift = std::countr_zero(mask), bits = std::popcount(mask);
  if ((mask >> shift) != (std::uint32_t{0xFFFFFFFF} >> (32 - bits)))
    refuse(what, std::string("BMP bit field of ") + name + " is not contiguous");
  if (bits > 16) refuse(what, std::string("BMP bit field of ") + name + " has " + std::to_string(bits) + " bits");
  return {mask, shift, (std::uint32_t{1} << bits) - 1};
}

struct bmp_header {
  std::uint32_t data_at = 0, header = 0, compression = 0, colours = 0;
  std::int64_t width = 0, height = 0;
  int bits = 0, palette_entry = 4;
  std::size_t after_header = 0;  ///< where the palette (or the masks of a 40-byte header) begins
  std::uint32_t masks[3] = {};
};

bmp_header read_bmp_header(std::span<const std::byte> b, const std::string& what) {
  if (b.size() < 26) refuse(what, "BMP header ends early (" + std::to_string(b.size()) + " bytes)");
  bmp_header h;
  h.data_at = u32(b, 10);
  h.header = u32(b, 14);
  const std::uint32_t known[] = {12, 40, 52, 56, 64, 108, 124};  // as Pillow reads them
  if (std::find(std::begin(known), std::end(known), h.header) == std::end(known))
    refuse(what, "BMP header of " + std::to_string(h.header) + " bytes (12, 40, 52, 56, 64, 108 or 124 are read)");
  if (b.size() < 14 + std::size_t{h.header}) refuse(what, "BMP header ends early");
  h.after_header = 14 + std::size_t{h.header};
  if (h.header == 12) {
    h.width = u16(b, 18);
    h.height = u16(b, 20);
    h.bits = static_cast<int>(u16(b, 24));
    h.palette_entry = 3;
    return h;
  }
  h.width = static_cast<std::int32_t>(u32(b, 18));
  h.height = static_cast<std::int32_t>(u32(b, 22));
  h.bits = static_cast<int>(u16(b, 28));
  h.compression = u32(b, 30);
  h.colours = u32(b, 46);
  if (h.header == 64 && (h.compression == 3 || h.compression == 4))
    refuse(what, std::string("OS/2 BMP compressed with ") + (h.compression == 3 ? "Huffman 1D" : "RLE24") + ", which is not decoded");
  if (h.compression == 3 || h.compression == 6) {  // bit fields: in the header from v2 on, else after it
    std::size_t at = 54;
    if (h.header == 40) {
      at = h.after_header;
      h.after_header += h.compression == 6 ? 16 : 12;
      if (b.size() < h.after_header) refuse(what, "BMP bit fields end early");
    }
    for (int k = 0; k < 3; ++k) h.masks[k] = u32(b, at + 4 * static_cast<std::size_t>(k));
  }
  return h;
}

/// Indices of an RLE8 or RLE4 bitmap, in file order (rows bottom-up), as Pillow's decoder reads
/// them: pixels appended to one buffer, an encoded run cut at the row's end, a row end padding
/// the row with index 0 (none where the row is full), an absolute run appended whole, the
/// bitmap's end (or the data's) stopping it. Delta escapes and odd RLE4 absolute runs, which
/// readers disagree on (Pillow reads a delta's two bytes twice, and drops an odd run's last
/// pixel), are refused.
void decode_rle(std::span<const std::byte> b, std::size_t at, const bmp_header& h, std::vector<std::uint8_t>& idx,
                const std::string& what) {
  const bool four = h.compression == 2;
  const auto w = static_cast<std::size_t>(h.width), need = w * static_cast<std::size_t>(h.height);
  idx.clear();
  std::size_t x = 0;
  const auto put = [&](std::uint8_t v, bool nibbles, int count) {
    for (int i = 0; i < count; ++i) idx.push_back(nibbles ? static_cast<std::uint8_t>(i % 2 ? v & 15 : v >> 4) : v);
  };
  while (idx.size() < need && at + 1 < b.size()) {
    const std::uint8_t n = byte_at(b, at), v = byte_at(b, at + 1);
    at += 2;
    if (n > 0) {
      const std::size_t run = x + n > w ? (w > x ? w - x : 0) : n;
      put(v, four, static_cast<int>(run));
      x += run;
    } else if (v == 0) {
      while (idx.size() % w != 0) idx.push_back(0);
      x = 0;
    } else if (v == 1) {
      break;
    } else if (v == 2) {
      refuse(what, "an RLE BMP with a delta escape at byte " + std::to_string(at - 2) + ", which readers disagree on");
    } else {
      if (four && v % 2 != 0)
        refuse(what, "an RLE4 BMP with an absolute run of " + std::to_string(v) + " pixels, which readers disagree on");
      const std::size_t bytes = four ? v / 2u : v;
      if (b.size() - at < bytes) break;
      for (std::size_t i = 0; i < bytes; ++i) put(byte_at(b, at + i), four, four ? 2 : 1);
      at += bytes + (bytes & 1);  // runs end on a 16-bit boundary
      x += v;
    }
  }
  if (idx.size() < need)
    refuse(what, "RLE BMP data ends after " + std::to_string(idx.size()) + " of " + std::to_string(need) + " pixels");
  idx.resize(need);
}

}  // namespace

namespace {

using bmp_palette = std::array<std::array<std::uint8_t, 3>, 256>;

/// The palette of a BMP of 8 bits or fewer: its colours (BGR, or BGRX past a core header).
std::uint32_t read_bmp_palette(std::span<const std::byte> b, const bmp_header& h, bmp_palette& palette, const std::string& what) {
  const std::uint32_t colours = h.colours != 0 ? h.colours : 1u << h.bits;
  if (colours > 256) refuse(what, "BMP palette of " + std::to_string(colours) + " colours");
  if (h.after_header + std::size_t{colours} * static_cast<std::size_t>(h.palette_entry) > b.size()) refuse(what, "BMP palette ends early");
  for (std::uint32_t i = 0; i < colours; ++i) {
    const std::size_t at = h.after_header + std::size_t{i} * static_cast<std::size_t>(h.palette_entry);
    palette[i] = {byte_at(b, at + 2), byte_at(b, at + 1), byte_at(b, at)};
  }
  return colours;
}

/// Calls pixel(file_row, x, value) for each pixel of an uncompressed BMP: a palette index (8 bits
/// or fewer) or the whole little-endian pixel.
template <class Pixel>
void read_bmp_rows(std::span<const std::byte> b, const bmp_header& h, std::size_t w, std::size_t rows, const Pixel& pixel,
                   const std::string& what) {
  const int n = h.bits;
  const std::size_t stride = (w * static_cast<std::size_t>(n) + 31) / 32 * 4;
  if ((b.size() - h.data_at) / stride < rows)
    refuse(what, "BMP pixel data ends early: " + std::to_string(b.size() - h.data_at) + " bytes of " + std::to_string(stride * rows));
  for (std::size_t y = 0; y < rows; ++y) {
    const std::size_t row = h.data_at + y * stride;
    for (std::size_t x = 0; x < w; ++x) {
      if (n <= 8) {
        const std::size_t bit = x * static_cast<std::size_t>(n);
        pixel(y, x, (std::uint32_t{byte_at(b, row + bit / 8)} >> (8 - n - static_cast<int>(bit % 8))) & ((1u << n) - 1));
        continue;
      }
      const std::size_t at = row + x * static_cast<std::size_t>(n / 8);
      pixel(y, x, n == 16 ? u16(b, at) : n == 24 ? u16(b, at) | (std::uint32_t{byte_at(b, at + 2)} << 16) : u32(b, at));
    }
  }
}

/// Whether the header's depth and compression are a layout decode_bmp() reads.
bool bmp_layout_read(const bmp_header& h) {
  const std::uint32_t c = h.compression;
  const int n = h.bits;
  return (c == 0 && (n == 1 || n == 4 || n == 8 || n == 16 || n == 24 || n == 32)) || (c == 1 && n == 8) ||
         (c == 2 && n == 4) || ((c == 3 || c == 6) && (n == 16 || n == 24 || n == 32));
}

}  // namespace

image_spec decode_bmp(std::span<const std::byte> b, std::vector<std::byte>& out, const std::string& what) {
  const bmp_header h = read_bmp_header(b, what);
  const bool top_down = h.height < 0;
  const std::int64_t width = h.width, height = top_down ? -h.height : h.height;
  if (width <= 0 || height == 0) refuse(what, "BMP of " + std::to_string(width) + "x" + std::to_string(height) + " pixels");
  const std::uint32_t c = h.compression;
  if (c == 4 || c == 5) refuse(what, std::string("a BMP holding a ") + (c == 4 ? "JPEG" : "PNG") + ", which is not decoded");
  if (!bmp_layout_read(h))
    refuse(what, "BMP of " + std::to_string(h.bits) + " bits a pixel with compression " + std::to_string(c) + ", which is not decoded");
  const bool rle = c == 1 || c == 2;
  if (rle && top_down) refuse(what, "a top-down RLE BMP, which the format does not allow");
  bmp_palette palette{};
  const std::uint32_t colours = h.bits <= 8 ? read_bmp_palette(b, h, palette, what) : 0;
  if (h.data_at >= b.size()) refuse(what, "BMP pixel data starts past the end of the file");
  const auto w = static_cast<std::size_t>(width), rows = static_cast<std::size_t>(height);
  const image_spec spec{height, width, 3, dtype::u8};
  out.resize(spec.bytes());
  auto* px = reinterpret_cast<std::uint8_t*>(out.data());
  const auto at = [&](std::size_t file_row, std::size_t x) { return px + ((top_down ? file_row : rows - 1 - file_row) * w + x) * 3; };
  const auto from_palette = [&](std::uint8_t* dst, std::uint32_t i) {
    if (i >= colours) refuse(what, "BMP palette index " + std::to_string(i) + " past its " + std::to_string(colours) + " colours");
    std::copy(palette[i].begin(), palette[i].end(), dst);
  };
  if (rle) {
    std::vector<std::uint8_t> idx;
    decode_rle(b, h.data_at, h, idx, what);
    for (std::size_t y = 0; y < rows; ++y)
      for (std::size_t x = 0; x < w; ++x) from_palette(at(y, x), idx[y * w + x]);
    return spec;
  }
  channel ch[3];
  if (h.bits >= 16) {
    const bool fields = c == 3 || c == 6;
    const std::uint32_t plain16[3] = {0x7C00, 0x3E0, 0x1F}, plain[3] = {0xFF0000, 0xFF00, 0xFF};
    const char* names[3] = {"red", "green", "blue"};
    for (int k = 0; k < 3; ++k) ch[k] = channel_of(fields ? h.masks[k] : h.bits == 16 ? plain16[k] : plain[k], names[k], what);
  }
  read_bmp_rows(b, h, w, rows, [&](std::size_t y, std::size_t x, std::uint32_t v) {
    std::uint8_t* dst = at(y, x);
    if (h.bits <= 8) return from_palette(dst, v);
    for (int k = 0; k < 3; ++k) dst[k] = ch[k](v);
  }, what);
  return spec;
}

}  // namespace pinfeed::loaders::detail
