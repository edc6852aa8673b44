// Headers read as each format defines them (image_header.hpp). Every read is bounds-checked
// against the bytes; nothing here allocates or keeps state between calls.
#include "image_header.hpp"

#include <cctype>
#include <cstring>

namespace pinfeed::loaders::detail {
namespace {

bool starts_with(std::span<const std::byte> b, std::initializer_list<unsigned> magic) noexcept {
  if (b.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned m : magic)
    if (static_cast<unsigned>(b[i++]) != m) return false;
  return true;
}

/// n bytes (n <= 8) at `at`, little- or big-endian; the caller checked the bounds.
std::uint64_t read_uint(std::span<const std::byte> b, std::size_t at, int n, bool little) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + static_cast<std::size_t>(little ? i : n - 1 - i)]) << (8 * i);
  return v;
}

image_size png_size(std::span<const std::byte> b) noexcept {
  // The signature, then IHDR, which must be the first chunk: length 13, "IHDR", width, height.
  if (b.size() < 24 || std::memcmp(b.data() + 12, "IHDR", 4) != 0) return {};
  return {static_cast<std::int64_t>(read_uint(b, 16, 4, false)), static_cast<std::int64_t>(read_uint(b, 20, 4, false))};
}

image_size webp_size(std::span<const std::byte> b) noexcept {
  if (b.size() < 30) return {};
  const auto u8 = [&](std::size_t at) { return static_cast<std::int64_t>(b[at]); };
  if (std::memcmp(b.data() + 12, "VP8X", 4) == 0)  // extended: canvas size - 1, 24 bits each
    return {1 + (u8(24) | u8(25) << 8 | u8(26) << 16), 1 + (u8(27) | u8(28) << 8 | u8(29) << 16)};
  if (std::memcmp(b.data() + 12, "VP8L", 4) == 0 && u8(20) == 0x2F) {  // lossless: 14 bits each, - 1
    const std::int64_t bits = u8(21) | u8(22) << 8 | u8(23) << 16 | u8(24) << 24;
    return {1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)};
  }
  if (std::memcmp(b.data() + 12, "VP8 ", 4) == 0)  // lossy key frame: 14-bit width and height
    return {(u8(26) | u8(27) << 8) & 0x3FFF, (u8(28) | u8(29) << 8) & 0x3FFF};
  return {};
}

/// Calls fn(tag, type, count, value_offset) for each entry of a TIFF's (or BigTIFF's) first
/// directory that lies inside the bytes; value_offset is where the entry keeps its value.
template <class Fn>
void tiff_entries(std::span<const std::byte> b, Fn fn) noexcept {
  const bool le = b[0] == std::byte{'I'};
  const bool big = read_uint(b, 2, 2, le) == 43;
  if (big && (b.size() < 16 || read_uint(b, 4, 2, le) != 8)) return;
  const std::uint64_t ifd = big ? read_uint(b, 8, 8, le) : read_uint(b, 4, 4, le);
  const std::uint64_t count_bytes = big ? 8 : 2, entry_bytes = big ? 20 : 12, value_at = big ? 12 : 8;
  if (ifd > b.size() || b.size() - ifd < count_bytes) return;
  const std::uint64_t entries = read_uint(b, static_cast<std::size_t>(ifd), static_cast<int>(count_bytes), le);
  for (std::uint64_t e = 0; e < entries; ++e) {
    const std::uint64_t at = ifd + count_bytes + entry_bytes * e;
    if (at > b.size() || b.size() - at < entry_bytes) return;
    const auto p = static_cast<std::size_t>(at);
    if (!fn(read_uint(b, p, 2, le), read_uint(b, p + 2, 2, le), read_uint(b, p + 4, big ? 8 : 4, le),
            p + static_cast<std::size_t>(value_at), le, big))
      return;
  }
}

/// ImageWidth (256) and ImageLength (257) of the first directory: one BYTE, SHORT, LONG (or, in a
/// BigTIFF, LONG8) each, held in the entry. The first of a repeated tag counts, as libtiff reads it.
image_size tiff_size(std::span<const std::byte> b) noexcept {
  image_size s{};
  bool bad = false;
  tiff_entries(b, [&](std::uint64_t tag, std::uint64_t type, std::uint64_t count, std::size_t at, bool le, bool big) {
    if (tag != 256 && tag != 257) return true;
    const int width = type == 1 ? 1 : type == 3 ? 2 : type == 4 ? 4 : (big && type == 16) ? 8 : 0;
    if (width == 0 || count != 1) return !(bad = true);
    const std::uint64_t v = read_uint(b, at, width, le);
    if (v > (std::uint64_t{1} << 62)) return !(bad = true);
    if (tag == 256 && s.width == 0) s.width = static_cast<std::int64_t>(v);
    if (tag == 257 && s.height == 0) s.height = static_cast<std::int64_t>(v);
    return true;
  });
  return bad ? image_size{} : s;
}

/// BMP: the DIB header's size says which. 12 bytes (Windows 2.x / OS/2 1.x BITMAPCOREHEADER):
/// unsigned 16-bit width and height. 16 and 64 (OS/2 2.x), 40, 52, 56, 108, 124 (Windows): signed
/// 32-bit, a negative height meaning rows top-down; a width under 1 gives no size.
image_size bmp_size(std::span<const std::byte> b) noexcept {
  if (b.size() < 26) return {};
  const std::uint64_t dib = read_uint(b, 14, 4, true);
  if (dib == 12) return {static_cast<std::int64_t>(read_uint(b, 18, 2, true)), static_cast<std::int64_t>(read_uint(b, 20, 2, true))};
  if (dib < 16) return {};
  const auto w = static_cast<std::int64_t>(static_cast<std::int32_t>(read_uint(b, 18, 4, true)));
  const auto h = static_cast<std::int64_t>(static_cast<std::int32_t>(read_uint(b, 22, 4, true)));
  if (w <= 0 || h == 0) return {};
  return {w, h < 0 ? -h : h};
}

/// PBM/PGM/PPM (P1..P6): width and height, decimal, after the magic, separated by whitespace and
/// '#' comments (to the end of the line), as Netpbm defines the header; each token ends at
/// whitespace.
image_size pnm_size(std::span<const std::byte> b) noexcept {
  std::size_t at = 2;
  std::int64_t v[2] = {0, 0};
  for (std::int64_t& value : v) {
    for (;;) {  // whitespace and comments
      if (at >= b.size()) return {};
      const auto c = static_cast<unsigned char>(b[at]);
      if (c == '#') {
        while (at < b.size() && b[at] != std::byte{'\n'} && b[at] != std::byte{'\r'}) ++at;
      } else if (std::isspace(c)) {
        ++at;
      } else {
        break;
      }
    }
    std::size_t digits = 0;
    while (at < b.size() && std::isdigit(static_cast<unsigned char>(b[at]))) {
      if (++digits > 10) return {};  // past 2^32: no image this size is decoded
      value = value * 10 + (static_cast<std::int64_t>(b[at]) - '0');
      ++at;
    }
    // A token ends at whitespace. Readers differ on a '#' right after digits (Netpbm ends the
    // token there, Pillow reads on past the comment, OpenCV neither): no size, so it is refused.
    if (digits == 0 || at >= b.size() || !std::isspace(static_cast<unsigned char>(b[at]))) return {};
  }
  return {v[0], v[1]};
}

}  // namespace

bool is_pnm(std::span<const std::byte> b) noexcept {
  return b.size() >= 3 && b[0] == std::byte{'P'} && b[1] >= std::byte{'1'} && b[1] <= std::byte{'6'} &&
         std::isspace(static_cast<unsigned char>(b[2]));
}

tiff_layout read_tiff_layout(std::span<const std::byte> b) noexcept {
  tiff_layout t;
  if (!is_tiff(b) || b.size() < 8) return t;
  tiff_entries(b, [&](std::uint64_t tag, std::uint64_t type, std::uint64_t count, std::size_t at, bool le, bool big) {
    if (type != 3 || count == 0) return true;  // the tags read here are SHORTs
    // Values that do not fit the entry lie at the offset it holds.
    std::uint64_t where = at;
    if (count * 2 > (big ? 8u : 4u)) {
      where = read_uint(b, at, big ? 8 : 4, le);
      if (where > b.size() || b.size() - where < 2) return true;
    }
    const std::uint64_t v = read_uint(b, static_cast<std::size_t>(where), 2, le);
    if (tag == 258) t.bits = static_cast<int>(v);
    if (tag == 262) t.photometric = static_cast<int>(v);
    if (tag == 277) t.samples = static_cast<int>(v);
    if (tag == 339) t.sample_format = static_cast<int>(v);
    if (tag == 274 && v >= 1 && v <= 8) t.orientation = static_cast<int>(v);
    return true;
  });
  return t;
}

namespace {

/// Orientation (274) of the TIFF structure `t` (an EXIF block): 1 without one.
int tiff_orientation(std::span<const std::byte> t) noexcept { return read_tiff_layout(t).orientation; }

int jpeg_exif_orientation(std::span<const std::byte> b) noexcept {
  std::size_t at = 2;
  while (at + 4 <= b.size() && b[at] == std::byte{0xFF}) {
    const auto marker = static_cast<unsigned>(b[at + 1]);
    if (marker == 0xDA || marker == 0xD9) return 1;
    const std::size_t length = (static_cast<std::size_t>(b[at + 2]) << 8) | static_cast<std::size_t>(b[at + 3]);
    if (length < 2 || b.size() - at - 2 < length) return 1;
    if (marker == 0xE1 && length >= 8 && std::memcmp(b.data() + at + 4, "Exif\0\0", 6) == 0)
      return tiff_orientation(b.subspan(at + 10, length - 8));
    at += 2 + length;
  }
  return 1;
}

int png_exif_orientation(std::span<const std::byte> b) noexcept {
  std::size_t at = 8;
  while (at + 12 <= b.size()) {
    const std::uint64_t length = read_uint(b, at, 4, false);
    if (length > b.size() - at - 12) return 1;
    if (std::memcmp(b.data() + at + 4, "eXIf", 4) == 0) return tiff_orientation(b.subspan(at + 8, static_cast<std::size_t>(length)));
    if (std::memcmp(b.data() + at + 4, "IEND", 4) == 0) return 1;
    at += 12 + static_cast<std::size_t>(length);
  }
  return 1;
}

int webp_exif_orientation(std::span<const std::byte> b) noexcept {
  std::size_t at = 12;
  while (at + 8 <= b.size()) {
    const std::uint64_t length = read_uint(b, at + 4, 4, true);
    if (length > b.size() - at - 8) return 1;
    if (std::memcmp(b.data() + at, "EXIF", 4) == 0) {
      auto exif = b.subspan(at + 8, static_cast<std::size_t>(length));
      if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
      return tiff_orientation(exif);
    }
    at += 8 + static_cast<std::size_t>(length + (length & 1));
  }
  return 1;
}

}  // namespace

int exif_orientation(std::span<const std::byte> b) noexcept {
  if (starts_with(b, {0xFF, 0xD8})) return jpeg_exif_orientation(b);
  if (starts_with(b, {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A})) return png_exif_orientation(b);
  if (is_webp(b))
    return webp_exif_orientation(b);
  // A TIFF's Orientation tag says how its raster is laid out, and its decoders (libtiff's RGBA
  // reader, Pillow's) always apply it: there is nothing left to turn.
  return 1;
}

bool is_jpeg(std::span<const std::byte> b) noexcept { return starts_with(b, {0xFF, 0xD8, 0xFF}); }

bool is_webp(std::span<const std::byte> b) noexcept {
  return starts_with(b, {'R', 'I', 'F', 'F'}) && b.size() >= 16 && std::memcmp(b.data() + 8, "WEBP", 4) == 0;
}

bool is_tiff(std::span<const std::byte> b) noexcept {
  return starts_with(b, {'I', 'I', 42, 0}) || starts_with(b, {'M', 'M', 0, 42}) || starts_with(b, {'I', 'I', 43, 0}) ||
         starts_with(b, {'M', 'M', 0, 43});
}

jpeg_frame read_jpeg_frame(std::span<const std::byte> b) noexcept {
  jpeg_frame f;
  if (!starts_with(b, {0xFF, 0xD8})) return f;
  std::size_t at = 2;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned>(b[i]); };
  for (;;) {
    while (at < b.size() && byte(at) != 0xFF) ++at;  // extraneous bytes: libjpeg warns, skips them
    while (at < b.size() && byte(at) == 0xFF) ++at;  // the marker's 0xFF and any fill bytes
    if (at >= b.size()) return f;
    const unsigned marker = byte(at++);
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;  // TEM, RSTn, SOI: no length
    if (marker == 0xD9 || marker == 0xDA) return f;                     // EOI or a scan before a frame
    if (b.size() - at < 2) return f;
    const std::size_t length = (byte(at) << 8) | byte(at + 1);
    if (length < 2 || b.size() - at < length) return f;
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (length < 8) return f;
      f.marker = static_cast<int>(marker);
      f.precision = static_cast<int>(byte(at + 2));
      f.height = static_cast<std::int64_t>((byte(at + 3) << 8) | byte(at + 4));
      f.width = static_cast<std::int64_t>((byte(at + 5) << 8) | byte(at + 6));
      f.components = static_cast<int>(byte(at + 7));
      f.found = true;
      return f;
    }
    at += length;
  }
}

const char* jpeg_process_name(int marker) noexcept {
  switch (marker) {
    case 0xC0: return "baseline (SOF0)";
    case 0xC1: return "extended sequential (SOF1)";
    case 0xC2: return "progressive (SOF2)";
    case 0xC3: return "lossless (SOF3)";
    case 0xC5: return "differential sequential (SOF5)";
    case 0xC6: return "differential progressive (SOF6)";
    case 0xC7: return "differential lossless (SOF7)";
    case 0xC9: return "arithmetic extended sequential (SOF9)";
    case 0xCA: return "arithmetic progressive (SOF10)";
    case 0xCB: return "arithmetic lossless (SOF11)";
    case 0xCD: return "arithmetic differential sequential (SOF13)";
    case 0xCE: return "arithmetic differential progressive (SOF14)";
    case 0xCF: return "arithmetic differential lossless (SOF15)";
    default: return "unknown";
  }
}

}  // namespace pinfeed::loaders::detail

namespace pinfeed::loaders {

image_size peek_size(std::span<const std::byte> b) {
  using namespace detail;
  if (is_jpeg(b)) {
    const jpeg_frame f = read_jpeg_frame(b);
    if (!f.found || f.width == 0 || f.height == 0) return {};
    return {f.width, f.height};
  }
  if (starts_with(b, {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A})) return png_size(b);
  if (is_webp(b)) return webp_size(b);
  if (is_tiff(b) && b.size() >= 8) return tiff_size(b);
  if (starts_with(b, {'B', 'M'})) return bmp_size(b);
  if (is_pnm(b)) return pnm_size(b);
  return {};
}

}  // namespace pinfeed::loaders
