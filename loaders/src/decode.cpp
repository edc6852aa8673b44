#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

#if PINFEED_HAVE_IMGCODECS
#include "imgcodecs/module_loader.hpp"
#endif

#include <jpeglib.h>
#include <turbojpeg.h>

#include "decode_memory.hpp"
#include "image_header.hpp"
#include "small_formats.hpp"
#include "jpeg_huffman.hpp"
#include "jpeg_window.hpp"

namespace pinfeed::loaders {
namespace {

using detail::is_jpeg;
using detail::is_tiff;

bool starts_with(std::span<const std::byte> b, std::initializer_list<unsigned> magic) {
  if (b.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned m : magic)
    if (static_cast<unsigned>(b[i++]) != m) return false;
  return true;
}

/// A decoder's message that says it ran out of memory (libjpeg's JERR_OUT_OF_MEMORY, TurboJPEG's
/// allocation failures, OpenCV's): that is no fault of the image, and under error_policy::skip
/// it must not make the image count as bad.
bool says_out_of_memory(const std::string& reason) {
  for (const char* marker : {"Insufficient memory", "Memory allocation failure", "Failed to allocate", "Out of memory"})
    if (reason.find(marker) != std::string::npos) return true;
  return false;
}

[[noreturn]] void fail(const std::string& what, const std::string& reason) {
  if (says_out_of_memory(reason)) throw std::bad_alloc();
  throw pinfeed::runtime_error(what + ": " + reason);
}

void check_pixels(const image_size& s, const decode_options& o, const std::string& what) {
  if (s.width <= 0 || s.height <= 0) return;
  // Divide rather than multiply: header sizes can be anything up to 2^32 each.
  if (o.max_pixels > 0 && s.width > o.max_pixels / s.height)
    fail(what, "image of " + std::to_string(s.width) + "x" + std::to_string(s.height) + " pixels exceeds the limit of " +
                   std::to_string(o.max_pixels) + " pixels");
}

#define PINFEED_STRINGIFY2(x) #x
#define PINFEED_STRINGIFY(x) PINFEED_STRINGIFY2(x)

std::string libjpeg_version() {
#ifdef LIBJPEG_TURBO_VERSION
  return "libjpeg-turbo " PINFEED_STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
  return "this libjpeg";
#endif
}

/// check_pixels() as decode_jpeg_window() takes it.
detail::jpeg_size_check pixel_check(const decode_options& o, const std::string& what) {
  return [&o, &what](std::int64_t w, std::int64_t h) { check_pixels({w, h}, o, what); };
}

/// The formats pinfeed decodes, recognized by their magic bytes; anything else is refused.
bool codec_format(std::span<const std::byte> b) {
  if (starts_with(b, {0x89, 'P', 'N', 'G'}) || starts_with(b, {'B', 'M'})) return true;
  if (is_tiff(b)) return true;  // classic TIFF and BigTIFF
  if (detail::is_webp(b))
    // Only the three chunk kinds a WebP file starts with, all of which peek_size() reads the size of.
    return std::memcmp(b.data() + 12, "VP8 ", 4) == 0 || std::memcmp(b.data() + 12, "VP8L", 4) == 0 ||
           std::memcmp(b.data() + 12, "VP8X", 4) == 0;
  if (detail::is_pnm(b)) return true;  // PBM/PGM/PPM
  return is_jpeg(b);
}

/// The format codec_format() let through, for messages.
const char* format_name(std::span<const std::byte> b) {
  if (starts_with(b, {0x89, 'P', 'N', 'G'})) return "a PNG image";
  if (starts_with(b, {'B', 'M'})) return "a BMP image";
  if (is_tiff(b)) return "a TIFF image";
  if (detail::is_webp(b)) return "a WebP image";
  if (is_jpeg(b)) return "a JPEG image";
  return "a PNM image";
}

/// Refuses, by name, what the header says cannot be decoded or is over the pixel or memory limit,
/// before any decoder runs. A JPEG must be an 8-bit DCT JPEG (libjpeg reads its header again and
/// checks the size itself); every other format must give its size in the header where there is a
/// limit: its decoder would allocate whatever the file says.
void check_header(std::span<const std::byte> bytes, const decode_options& o, bool region, const std::string& what) {
  if (is_jpeg(bytes)) {
    const detail::jpeg_frame f = detail::read_jpeg_frame(bytes);
    if (!f.found) return;  // libjpeg's reading of the header names what is wrong
    if (f.precision != 8)
      fail(what, "a " + std::to_string(f.precision) + "-bit JPEG (" + detail::jpeg_process_name(f.marker) + "): " +
                     libjpeg_version() + " here decodes 8-bit JPEGs only");
    const int m = f.marker;  // lossless and hierarchical processes: outside libjpeg-turbo 2's reach
    if (m == 0xC3 || m == 0xCB || (m >= 0xC5 && m <= 0xC7) || (m >= 0xCD && m <= 0xCF))
      fail(what, std::string("a ") + detail::jpeg_process_name(m) + " JPEG, which " + libjpeg_version() +
                     " does not decode");
    check_pixels({f.width, f.height}, o, what);
    detail::check_decode_memory(bytes, o, region, {{f.width, f.height}, f.marker}, "JPEG image", what);
    return;
  }
  const image_size s = peek_size(bytes);
  if ((s.width <= 0 || s.height <= 0) && o.max_pixels > 0 && codec_format(bytes))
    fail(what, std::string(format_name(bytes)) + " whose header gives no size: " +
                   (is_tiff(bytes) ? "the first directory must give ImageWidth and ImageLength as one BYTE, SHORT or LONG each"
                                   : "truncated or malformed header") +
                   " (the pixel limit applies to every image)");
  check_pixels(s, o, what);
  detail::check_decode_memory(bytes, o, region, {s, 0}, format_name(bytes) + 2, what);  // "a PNG image" -> "PNG image"
}

/// TIFFs of samples that have no stated conversion to 8 bits, refused by name.
void refuse_tiff_layout(const detail::tiff_layout& t, const std::string& what) {
  if (t.sample_format == 3 || t.bits > 16)
    fail(what, "a TIFF of " + std::to_string(t.bits) + "-bit " + (t.sample_format == 3 ? "floating-point" : "integer") +
                   " samples, which have no stated conversion to 8 bits");
}

#if PINFEED_HAVE_IMGCODECS
struct decoded_sink {
  std::vector<std::byte>* out;
  image_spec spec;
};

unsigned char* sink_pixels(void* context, int rows, int cols) {
  auto& sink = *static_cast<decoded_sink*>(context);
  sink.spec = image_spec{rows, cols, 3, dtype::u8};
  sink.out->resize(sink.spec.bytes());
  return reinterpret_cast<unsigned char*>(sink.out->data());
}
#endif

/// Everything that is not a JPEG: BMP and PNM by pinfeed's own readers (small_formats.hpp), PNG,
/// WebP and TIFF by libpng, libwebp and libtiff in the codec module (opened on first use,
/// imgcodecs/module_loader.hpp).
image_spec orient(std::vector<std::byte>& img, const image_spec& spec, int o);

image_spec decode_other(std::span<const std::byte> bytes, std::vector<std::byte>& out, const std::string& what) {
  if (starts_with(bytes, {'B', 'M'})) return detail::decode_bmp(bytes, out, what);
  if (detail::is_pnm(bytes)) return detail::decode_pnm(bytes, out, what);
  const bool tiff_file = is_tiff(bytes);
  const detail::tiff_layout tiff = tiff_file ? detail::read_tiff_layout(bytes) : detail::tiff_layout{};
  if (tiff_file) refuse_tiff_layout(tiff, what);
  if (!codec_format(bytes))
    fail(what, "not a decodable image: the bytes are no JPEG, PNG, WebP, BMP, TIFF or PNM");
#if !PINFEED_HAVE_IMGCODECS
  (void)out;
  fail(what, std::string(format_name(bytes)) +
                 ", but this pinfeed was built without its PNG, WebP and TIFF module (PINFEED_WITH_IMGCODECS=OFF): "
                 "only JPEG, BMP and PNM images are decoded");
#else
  const pinfeed_imgcodecs_v1* module = nullptr;
  try {
    module = &detail::imgcodecs_module();
  } catch (const pinfeed::runtime_error& e) {
    fail(what, std::string(format_name(bytes)) + ", which needs " + e.what());
  }
  decoded_sink sink{&out, {}};
  char message[512] = {};
  const int status = module->decode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), &sink_pixels,
                                    &sink, message, sizeof message);
  if (status == pinfeed_imgcodecs_ok) {
    // A TIFF's Orientation tag says how its rows are laid out: turned as Pillow turns them, always.
    return tiff.orientation == 1 ? sink.spec : orient(out, sink.spec, tiff.orientation);
  }
  if (status == pinfeed_imgcodecs_out_of_memory) throw std::bad_alloc();
  fail(what, std::string(format_name(bytes)) + " that cannot be decoded: " +
                 (message[0] != '\0' ? std::string(message) : std::string("its library gives no reason")));
#endif
}

/// The DCT scale of a whole-image decode: the smallest of 1/8, 1/4, 1/2 whose shorter side (rounded
/// up, as libjpeg sizes its output) is still >= min_short_side; 1 when none is or min_short_side
/// is 0. Only those three: libjpeg-turbo's other scaled IDCTs (7/8, 3/4, ...) have no SIMD code and
/// cost more than a full decode.
unsigned full_decode_denom(std::int64_t w, std::int64_t h, std::int64_t min_short_side) {
  if (min_short_side > 0)
    for (std::int64_t d : {8, 4, 2})
      if (std::min((w + d - 1) / d, (h + d - 1) / d) >= min_short_side) return static_cast<unsigned>(d);
  return 1;
}

/// Copies rows/columns of a decoded image into `out` (the region, clamped).
image_spec cut_region(const std::vector<std::byte>& full, const image_spec& spec, image_region r, double scale,
                      std::vector<std::byte>& out) {
  const auto y0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(r.y) * scale), 0, spec.height - 1);
  const auto x0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(r.x) * scale), 0, spec.width - 1);
  const auto h = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(r.height) * scale), 1, spec.height - y0);
  const auto w = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(r.width) * scale), 1, spec.width - x0);
  const image_spec cut{h, w, 3, dtype::u8};
  out.resize(cut.bytes());
  for (std::int64_t y = 0; y < h; ++y)
    std::memcpy(out.data() + static_cast<std::size_t>(y * w) * 3, full.data() + static_cast<std::size_t>((y0 + y) * spec.width + x0) * 3,
                static_cast<std::size_t>(w) * 3);
  return cut;
}

/// `spec`'s pixels in `img` turned by EXIF orientation `o` (2..8) as Pillow's exif_transpose turns
/// them (orientations 5..8 swap the sides); returns the new shape.
image_spec orient(std::vector<std::byte>& img, const image_spec& spec, int o) {
  const std::int64_t H = spec.height, W = spec.width;
  const bool swap = o >= 5;
  const image_spec out{swap ? W : H, swap ? H : W, 3, dtype::u8};
  auto& turned = pinfeed::detail::thread_scratch<std::vector<std::byte>, struct oriented_image>();
  turned.resize(out.bytes());
  for (std::int64_t y = 0; y < out.height; ++y)
    for (std::int64_t x = 0; x < out.width; ++x) {
      std::int64_t sy = y, sx = x;
      switch (o) {
        case 2: sx = W - 1 - x; break;                   // mirrored left-right
        case 3: sy = H - 1 - y; sx = W - 1 - x; break;   // turned 180
        case 4: sy = H - 1 - y; break;                   // mirrored top-bottom
        case 5: sy = x; sx = y; break;                   // transposed
        case 6: sy = H - 1 - x; sx = y; break;           // turned 90 clockwise
        case 7: sy = H - 1 - x; sx = W - 1 - y; break;   // transversed
        case 8: sy = x; sx = W - 1 - y; break;           // turned 90 counter-clockwise
        default: break;
      }
      std::memcpy(turned.data() + static_cast<std::size_t>(y * out.width + x) * 3, img.data() + static_cast<std::size_t>(sy * W + sx) * 3, 3);
    }
  img.swap(turned);
  return out;
}

/// A whole JPEG through libjpeg (full_decode_denom's scale), with pinfeed's Huffman decoder or not.
image_spec decode_whole_jpeg(std::span<const std::byte> bytes, std::vector<std::byte>& out,
                                            const decode_options& o, const std::string& what, bool pinfeed_huffman,
                                            decode_report* report) {
  return detail::decode_jpeg_window(
      bytes, out, o.fast_dct, what, pixel_check(o, what), [&](std::int64_t w, std::int64_t h) { return full_decode_denom(w, h, o.min_short_side); },
      [](std::int64_t, std::int64_t, double, std::int64_t ow, std::int64_t oh) { return image_region{0, 0, oh, ow}; },
      pinfeed_huffman, o.strict, report);
}

/// Whether a decode with options `o` runs pinfeed's Huffman decoder where the file allows it.
bool pinfeed_huffman_for(const decode_options& o) {
  return o.huffman == decode_options::huffman_decoder::pinfeed && jpeg_huffman_in_use().pinfeed;
}

/// RGB pixels (validated by the caller) as a JPEG with TurboJPEG's chroma `subsamp`.
std::vector<std::byte> compress_jpeg(const std::uint8_t* rgb, int width, int height, int quality, int subsamp) {
  const std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitCompress(), tjDestroy);
  if (!tj) throw pinfeed::runtime_error("encode_jpeg: TurboJPEG could not start a compressor");
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj.get(), rgb, width, 0, height, TJPF_RGB, &jpeg, &size, subsamp, quality, 0) != 0) {
    const std::string reason = tjGetErrorStr2(tj.get());
    tjFree(jpeg);
    throw pinfeed::runtime_error("encode_jpeg: " + reason);
  }
  std::vector<std::byte> out(reinterpret_cast<const std::byte*>(jpeg), reinterpret_cast<const std::byte*>(jpeg) + size);
  tjFree(jpeg);
  return out;
}

/// Test JPEGs of the self-check: noisy gradients (long codes, many coefficients) in the common
/// layouts, made with TurboJPEG.
std::vector<std::vector<std::byte>> self_check_jpegs() {
  struct layout {
    int w, h, subsamp, quality;
  };
  const layout layouts[] = {{67, 45, TJSAMP_420, 90}, {40, 33, TJSAMP_444, 100}, {51, 29, TJSAMP_GRAY, 75},
                            {64, 48, TJSAMP_422, 60}};
  std::vector<std::vector<std::byte>> out;
  std::uint32_t state = 12345;
  for (const layout& l : layouts) {
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(l.w * l.h * 3));
    for (int y = 0; y < l.h; ++y)
      for (int x = 0; x < l.w; ++x)
        for (int c = 0; c < 3; ++c) {
          state = state * 1664525u + 1013904223u;
          rgb[static_cast<std::size_t>((y * l.w + x) * 3 + c)] =
              static_cast<unsigned char>((x * 4 + y * (c + 1) * 3) + static_cast<int>(state >> 27));
        }
    try {
      out.push_back(compress_jpeg(rgb.data(), l.w, l.h, l.quality, l.subsamp));
    } catch (const std::exception&) {
      // Not made: the self-check runs on those that were.
    }
  }
  return out;
}

jpeg_huffman_status check_jpeg_huffman() {
#ifdef LIBJPEG_TURBO_VERSION
  const std::string version = PINFEED_STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
  const std::string version = "unknown";
#endif
#if !PINFEED_HAVE_JPEG_HUFFMAN
  return {false, "libjpeg-turbo's (pinfeed's decoder was not built: jpegint.h missing, version " + version +
                     " not verified, or PINFEED_JPEG_HUFFMAN=OFF)"};
#else
  const auto jpegs = self_check_jpegs();
  if (jpegs.empty()) return {false, "libjpeg-turbo's (self-check: TurboJPEG could not encode the test images)"};
  std::vector<std::byte> ours, theirs;
  const decode_options o;
  for (std::size_t i = 0; i < jpegs.size(); ++i) {
    try {
      const std::size_t scans = detail::pinfeed_huffman_scans();
      const auto a = decode_whole_jpeg(jpegs[i], ours, o, "self-check", true, nullptr);
      const bool ran = detail::pinfeed_huffman_scans() > scans;
      const auto b = decode_whole_jpeg(jpegs[i], theirs, o, "self-check", false, nullptr);
      if (a.width != b.width || a.height != b.height || !ran || ours != theirs)
        return {false, "libjpeg-turbo's (self-check: pinfeed's decoder " +
                           std::string(ran ? "gave other pixels" : "did not run") + " on test JPEG " +
                           std::to_string(i) + " with libjpeg-turbo " + version + ")"};
    } catch (const std::exception& e) {
      return {false, "libjpeg-turbo's (self-check failed on test JPEG " + std::to_string(i) + ": " + e.what() + ")"};
    }
  }
  return {true, "pinfeed's (libjpeg-turbo " + version + ", self-check passed)"};
#endif
}

}  // namespace

const jpeg_huffman_status& jpeg_huffman_in_use() {
  static const jpeg_huffman_status status = check_jpeg_huffman();
  return status;
}

image_spec decode_image(std::span<const std::byte> bytes, std::vector<std::byte>& out, const decode_options& o,
                        const std::string& what, decode_report* report) {
  if (bytes.empty()) fail(what, "empty file (0 bytes)");
  check_header(bytes, o, false, what);
  const image_spec spec = is_jpeg(bytes) ? decode_whole_jpeg(bytes, out, o, what, pinfeed_huffman_for(o), report)
                                         : decode_other(bytes, out, what);
  const int orientation = o.apply_exif_orientation ? detail::exif_orientation(bytes) : 1;
  return orientation == 1 ? spec : orient(out, spec, orientation);
}

unsigned region_decode_denom(image_region r, std::int64_t min_short_side) noexcept {
  if (min_short_side > 0)
    for (unsigned d : {8u, 4u, 2u})
      if (std::min(r.height, r.width) / static_cast<std::int64_t>(d) >= min_short_side) return d;
  return 1u;
}

image_region scaled_region(image_region r, std::int64_t width, std::int64_t height, unsigned denom) noexcept {
  const std::int64_t d = denom == 0 ? 1 : denom, ow = (width + d - 1) / d, oh = (height + d - 1) / d;
  const double scale = static_cast<double>(ow) / static_cast<double>(width);
  const auto at = [scale](std::int64_t v) { return static_cast<std::int64_t>(static_cast<double>(v) * scale); };
  const std::int64_t sy = std::min(at(r.y), oh - 1), sx = std::min(at(r.x), ow - 1);
  return {sy, sx, std::clamp<std::int64_t>(at(r.height), 1, oh - sy), std::clamp<std::int64_t>(at(r.width), 1, ow - sx)};
}

image_spec decode_image_region(std::span<const std::byte> bytes, std::vector<std::byte>& out, const decode_options& o,
                               image_region r, std::int64_t min_short_side, const std::string& what,
                               decode_report* report) {
  if (bytes.empty()) fail(what, "empty file (0 bytes)");
  check_header(bytes, o, true, what);
  auto& whole = pinfeed::detail::thread_scratch<std::vector<std::byte>, struct whole_image>();
  if (o.apply_exif_orientation && detail::exif_orientation(bytes) != 1) {
    // The window is of the turned image: the whole image, turned, then cut.
    decode_options full = o;
    full.min_short_side = 0;
    const image_spec spec = decode_image(bytes, whole, full, what, report);
    return cut_region(whole, spec, r, 1.0, out);
  }
  if (is_jpeg(bytes)) {
    unsigned denom = 1;
    const auto clamp_to = [&r](std::int64_t W, std::int64_t H) {
      r.y = std::clamp<std::int64_t>(r.y, 0, H - 1);
      r.x = std::clamp<std::int64_t>(r.x, 0, W - 1);
      r.height = std::clamp<std::int64_t>(r.height, 1, H - r.y);
      r.width = std::clamp<std::int64_t>(r.width, 1, W - r.x);
    };
    return detail::decode_jpeg_window(
        bytes, out, o.fast_dct, what, pixel_check(o, what),
        [&](std::int64_t W, std::int64_t H) {
          clamp_to(W, H);
          return denom = region_decode_denom(r, min_short_side);
        },
        // libjpeg's output at 1/denom is ceil(W / denom) x ceil(H / denom), as scaled_region() takes it.
        [&](std::int64_t W, std::int64_t H, double, std::int64_t, std::int64_t) { return scaled_region(r, W, H, denom); },
        pinfeed_huffman_for(o), o.strict, report);
  }
  const image_spec spec = decode_other(bytes, whole, what);
  return cut_region(whole, spec, r, 1.0, out);
}

std::vector<std::byte> encode_jpeg(std::span<const std::uint8_t> rgb, int width, int height, int quality) {
  if (width <= 0 || height <= 0 || rgb.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3)
    throw pinfeed::invalid_argument("encode_jpeg: " + std::to_string(rgb.size()) + " bytes are not " + std::to_string(width) +
                                " x " + std::to_string(height) + " RGB pixels");
  if (quality < 1 || quality > 100)
    throw pinfeed::invalid_argument("encode_jpeg: quality must be in [1, 100], got " + std::to_string(quality));
  return compress_jpeg(rgb.data(), width, height, quality, TJSAMP_420);
}

void read_file(const std::string& path, std::vector<std::byte>& out) {
  errno = 0;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in && errno == ENOMEM) throw std::bad_alloc();
  if (!in) fail(path, "cannot open for reading");
  const std::streamsize size = in.tellg();
  if (size < 0) fail(path, "cannot determine the size");
  out.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(out.data()), size)) fail(path, "read error");
}

}  // namespace pinfeed::loaders
