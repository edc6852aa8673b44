// libpinfeed_imgcodecs.so: PNG (libpng), WebP (libwebp) and TIFF (libtiff) behind plugin_abi.hpp,
// opened by the loaders on the first such image. Each library reports into the call's own message
// (nothing goes to stderr), a failed allocation is reported as such, and nothing is retried.
// Every decode gives the pixels as stored, as Pillow decodes them (tests/loaders/formats_test.cpp).
#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

#include "../cmyk.hpp"
#include "pinfeed/version.hpp"
#include "plugin_abi.hpp"

namespace {

/// Whether a library's message says that memory ran out (libpng's, libwebp's and libtiff's words).
/// Nothing allocated here: it runs inside libpng's and libtiff's C callbacks, which no C++
/// exception may cross.
bool says_out_of_memory(const char* text) {
  for (const char* marker : {"out of memory", "insufficient memory", "not enough memory", "cannot allocate",
                             "can't allocate", "failed to allocate", "unable to allocate", "no space for", "malloc("})
    if (strcasestr(text, marker) != nullptr) return true;
  return false;
}

/// One call's report: the first error in the library's words, and whether any said memory ran out.
struct report {
  char* message;
  std::size_t size;
  bool out_of_memory = false;
  bool set = false;
  void say(const char* text) {
    out_of_memory = out_of_memory || says_out_of_memory(text);
    if (set || size == 0) return;
    set = true;
    const std::size_t n = std::min(std::strlen(text), size - 1);
    std::memcpy(message, text, n);
    message[n] = '\0';
  }
  int status() const { return out_of_memory ? pinfeed_imgcodecs_out_of_memory : pinfeed_imgcodecs_corrupt; }
};

// ------------------------------------------------------------------------------------------ PNG

struct png_source {
  const unsigned char* bytes;
  std::size_t size, at;
  report* rep;
};

void png_failed(png_structp png, png_const_charp text) {
  static_cast<png_source*>(png_get_error_ptr(png))->rep->say(text);
  png_longjmp(png, 1);
}
void png_warned(png_structp, png_const_charp) {}  // libpng goes on: so does the decode

void png_read_bytes(png_structp png, png_bytep to, png_size_t n) {
  auto* s = static_cast<png_source*>(png_get_io_ptr(png));
  if (s->size - s->at < n) png_error(png, "the file ends before the image data does (truncated)");
  std::memcpy(to, s->bytes + s->at, n);
  s->at += n;
}

struct png_handles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~png_handles() { png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr); }
};

/// libpng's reading of the header, with the conversions to 8-bit RGB set; false (the report says
/// why) where libpng failed. Nothing here owns anything a jump would skip.
bool read_png_header(png_structp png, png_infop info, png_uint_32& w, png_uint_32& h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
  png_read_info(png, info);
  w = png_get_image_width(png, info);
  h = png_get_image_height(png, info);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  (void)png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != std::size_t{w} * 3) png_error(png, "no 8-bit RGB rows after conversion");
  return true;
}

bool read_png_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

/// PNG to 8-bit RGB: palettes and grey expanded, 16-bit samples by their high byte
/// (png_set_strip_16), alpha dropped; interlaced images deinterlaced. CRC errors of any chunk
/// refuse the file, as Pillow refuses it.
int decode_png(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context, report& rep) {
  png_source src{bytes, size, 0, &rep};
  png_handles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_failed, png_warned);
  if (h.png == nullptr) throw std::bad_alloc();
  h.info = png_create_info_struct(h.png);
  if (h.info == nullptr) throw std::bad_alloc();
  png_set_read_fn(h.png, &src, png_read_bytes);
  png_uint_32 w = 0, ht = 0;
  if (!read_png_header(h.png, h.info, w, ht)) return rep.status();
  unsigned char* out = output(context, static_cast<int>(ht), static_cast<int>(w));  // may throw: memory
  std::vector<png_bytep> rows(ht);
  for (png_uint_32 y = 0; y < ht; ++y) rows[y] = out + std::size_t{y} * w * 3;
  return read_png_rows(h.png, rows.data()) ? pinfeed_imgcodecs_ok : rep.status();
}

// ----------------------------------------------------------------------------------------- WebP

const char* webp_status(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "libwebp: out of memory";
    case VP8_STATUS_INVALID_PARAM: return "libwebp: invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "libwebp: corrupt bitstream";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "libwebp: a feature it does not decode";
    case VP8_STATUS_SUSPENDED: return "libwebp: decoding suspended";
    // pinfeed gives libwebp no callback that stops a decode, nor options its set-up could refuse:
    // its output stage stops only when an allocation of its own fails (found by failing every
    // allocation of a run in turn).
    case VP8_STATUS_USER_ABORT: return "libwebp: out of memory (its output stage stopped)";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "libwebp: the file ends before the image does (truncated)";
    default: return "libwebp: failed";
  }
}

/// WebP (lossy, lossless, extended) to 8-bit RGB, alpha dropped; animations are refused.
int decode_webp(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context, report& rep) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return rep.say("libwebp: version mismatch"), pinfeed_imgcodecs_corrupt;
  VP8StatusCode s = WebPGetFeatures(bytes, size, &config.input);
  if (s != VP8_STATUS_OK) return rep.say(webp_status(s)), rep.status();
  if (config.input.has_animation) return rep.say("an animated WebP, which is not decoded"), pinfeed_imgcodecs_corrupt;
  const int w = config.input.width, h = config.input.height;
  unsigned char* out = output(context, h, w);
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out;
  config.output.u.RGBA.stride = w * 3;
  config.output.u.RGBA.size = static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3;
  s = WebPDecode(bytes, size, &config);
  WebPFreeDecBuffer(&config.output);
  if (s != VP8_STATUS_OK) return rep.say(webp_status(s)), rep.status();
  return pinfeed_imgcodecs_ok;
}

// ----------------------------------------------------------------------------------------- TIFF

struct tiff_source {
  const unsigned char* bytes;
  toff_t size, at;
};

tmsize_t tiff_read(thandle_t h, void* to, tmsize_t n) {
  auto* s = static_cast<tiff_source*>(h);
  const toff_t left = s->at < s->size ? s->size - s->at : 0;
  const auto k = static_cast<toff_t>(n) < left ? static_cast<toff_t>(n) : left;
  std::memcpy(to, s->bytes + s->at, static_cast<std::size_t>(k));
  s->at += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<tiff_source*>(h);
  const toff_t base = whence == SEEK_CUR ? s->at : whence == SEEK_END ? s->size : 0;
  s->at = base + off;
  return s->at;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<tiff_source*>(h)->size; }
int tiff_map(thandle_t h, void** base, toff_t* size) {
  auto* s = static_cast<tiff_source*>(h);
  *base = const_cast<unsigned char*>(s->bytes);
  *size = s->size;
  return 1;
}
void tiff_unmap(thandle_t, void*, toff_t) {}

/// A TIFF call's report, and where libtiff's one unrecoverable failure returns to.
struct tiff_call {
  report* rep;
  std::jmp_buf fields_lost;
  TIFF* abandoned = nullptr;
};

int tiff_error(TIFF* tif, void* user, const char* module, const char* fmt, va_list ap) {
  auto* call = static_cast<tiff_call*>(user);
  char text[400];
  const int n = std::snprintf(text, sizeof text, "libtiff: %s: ", module != nullptr ? module : "");
  std::vsnprintf(text + std::max(0, std::min(n, static_cast<int>(sizeof text) - 1)), sizeof text - static_cast<std::size_t>(std::max(0, std::min(n, static_cast<int>(sizeof text) - 1))), fmt, ap);
  call->rep->say(text);
  // libtiff 4.5 to 4.7: when the realloc in _TIFFMergeFields fails (a codec registering its tags),
  // the handle keeps its field count with a null field table, and TIFFReadDirectory then reads
  // through it. Nothing of that handle may run again: back to tiff_open, past libtiff's frames
  // (C, nothing to unwind), with the handle left to tiff_open.
  if (module != nullptr && std::strcmp(module, "_TIFFMergeFields") == 0) {
    call->rep->out_of_memory = true;
    call->abandoned = tif;
    std::longjmp(call->fields_lost, 1);
  }
  return 1;  // handled: libtiff's global handler (stderr) is not called
}
/// A warning that memory ran out (libtiff goes on without a tag, or without a correction) makes
/// the call out of memory: the pixels it would give are not the file's.
int tiff_warning(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  char text[400];
  const int n = std::snprintf(text, sizeof text, "libtiff: %s: ", module != nullptr ? module : "");
  std::vsnprintf(text + std::max(0, std::min(n, static_cast<int>(sizeof text) - 1)), sizeof text - static_cast<std::size_t>(std::max(0, std::min(n, static_cast<int>(sizeof text) - 1))), fmt, ap);
  if (says_out_of_memory(text)) static_cast<tiff_call*>(user)->rep->say(text);
  return 1;
}

/// TIFFClientOpenExt, or null with the reason in the report. Only trivially destructible objects
/// live in this frame: tiff_error may jump back into it.
TIFF* tiff_open(tiff_source& src, tiff_call& call) {
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (opts == nullptr) return call.rep->say("out of memory"), call.rep->out_of_memory = true, nullptr;
  TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_error, &call);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_warning, &call);
  if (setjmp(call.fields_lost) != 0) {
    TIFFOpenOptionsFree(opts);
    // Its field table is gone and TIFFCleanup skips a null one: the rest is freed as libtiff frees
    // a handle whose first directory failed (what TIFFReadDirectory held in its frame is lost).
    if (call.abandoned != nullptr) TIFFCleanup(call.abandoned);
    return nullptr;
  }
  TIFF* tif = TIFFClientOpenExt("image", "rm", &src, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size, tiff_map,
                                tiff_unmap, opts);
  TIFFOpenOptionsFree(opts);
  return tif;
}

struct tiff_closer {
  TIFF* tif = nullptr;
  ~tiff_closer() {
    if (tif != nullptr) TIFFClose(tif);
  }
};

/// Contiguous 8- or 16-bit grey, RGB or CMYK strips (extra samples, alpha included, dropped; 16-bit
/// samples by their high byte), row by row; false where the layout is another (the caller then
/// takes libtiff's RGBA reader).
bool read_tiff_rows(TIFF* tif, std::uint32_t w, std::uint32_t h, std::uint8_t* out, bool& failed) {
  std::uint16_t bits = 1, samples = 1, photometric = 0, planar = PLANARCONFIG_CONTIG, format = SAMPLEFORMAT_UINT, inks = INKSET_CMYK;
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_INKSET, &inks);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric)) return false;
  const int colours = photometric == PHOTOMETRIC_MINISBLACK ? 1 : photometric == PHOTOMETRIC_RGB ? 3
                      : photometric == PHOTOMETRIC_SEPARATED && inks == INKSET_CMYK ? 4 : 0;
  if (colours == 0 || (bits != 8 && bits != 16) || planar != PLANARCONFIG_CONTIG || format != SAMPLEFORMAT_UINT ||
      samples < colours || TIFFIsTiled(tif))
    return false;
  std::vector<std::uint8_t> line(static_cast<std::size_t>(TIFFScanlineSize(tif)));
  const std::size_t step = static_cast<std::size_t>(samples) * (bits / 8u);
  if (line.size() < std::size_t{w} * step) return failed = true, true;
  for (std::uint32_t y = 0; y < h; ++y) {
    if (TIFFReadScanline(tif, line.data(), y, 0) < 0) return failed = true, true;
    std::uint8_t* o = out + std::size_t{y} * w * 3;
    for (std::uint32_t x = 0; x < w; ++x, o += 3) {
      std::uint8_t v[4];
      for (int c = 0; c < colours; ++c) {
        const std::uint8_t* p = line.data() + x * step + static_cast<std::size_t>(c) * (bits / 8u);
        // 16-bit samples in the machine's order (libtiff swaps them): the high byte.
        v[c] = bits == 8 ? p[0] : static_cast<std::uint8_t>(static_cast<std::uint16_t>(p[0] | (p[1] << 8)) >> 8);
      }
      if (colours == 1) o[0] = o[1] = o[2] = v[0];
      else if (colours == 3) std::memcpy(o, v, 3);
      else pinfeed::loaders::detail::pillow_cmyk_to_rgb(v, o);  // as Pillow converts a CMYK TIFF
    }
  }
  return true;
}

/// TIFF (and BigTIFF), its first image, to 8-bit RGB, the rows as stored (the caller applies the
/// Orientation tag): 8- and 16-bit grey, RGB and CMYK read row by row; JPEG-compressed YCbCr as RGB
/// from libjpeg; palettes, 1- to 4-bit, tiles and planes by libtiff's RGBA reader.
int decode_tiff_pixels(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context,
                       report& rep) {
  tiff_source src{bytes, static_cast<toff_t>(size), 0};
  tiff_call call{&rep, {}};
  tiff_closer t;
  t.tif = tiff_open(src, call);
  if (t.tif == nullptr) return rep.set ? rep.status() : (rep.say("libtiff cannot open the file"), pinfeed_imgcodecs_corrupt);
  // Some of libtiff's allocations fail without a word (a tag's value, JPEGTables among them: its
  // JPEG codec then reads through the null table). Only errno tells.
  if (rep.out_of_memory || errno == ENOMEM) return pinfeed_imgcodecs_out_of_memory;
  std::uint32_t w = 0, h = 0;
  std::uint16_t compression = COMPRESSION_NONE, photometric = 0, orientation = ORIENTATION_TOPLEFT;
  TIFFGetField(t.tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(t.tif, TIFFTAG_IMAGELENGTH, &h);
  TIFFGetFieldDefaulted(t.tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(t.tif, TIFFTAG_ORIENTATION, &orientation);
  TIFFGetField(t.tif, TIFFTAG_PHOTOMETRIC, &photometric);
  if (w == 0 || h == 0) return rep.say("libtiff: no image size"), pinfeed_imgcodecs_corrupt;
  if (compression == COMPRESSION_JPEG && photometric == PHOTOMETRIC_YCBCR)
    TIFFSetField(t.tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);  // libjpeg's YCbCr to RGB, as Pillow's
  const int before = errno;  // pinfeed's allocation for the pixels leaves errno as it found it
  std::uint8_t* out = output(context, static_cast<int>(h), static_cast<int>(w));
  errno = before;
  bool failed = false;
  if (read_tiff_rows(t.tif, w, h, out, failed))
    return failed ? (rep.set ? rep.status() : (rep.say("libtiff: cannot read the rows"), pinfeed_imgcodecs_corrupt)) : pinfeed_imgcodecs_ok;
  char why[1024] = {};
  if (!TIFFRGBAImageOK(t.tif, why)) return rep.say((std::string("libtiff: ") + why).c_str()), pinfeed_imgcodecs_corrupt;
  std::vector<std::uint32_t> raster(std::size_t{w} * h);
  // Rows as stored (the file's own orientation asked for): the caller turns them as Pillow does.
  if (!TIFFReadRGBAImageOriented(t.tif, w, h, raster.data(), orientation, 0))
    return rep.set ? rep.status() : (rep.say("libtiff: cannot read the image"), pinfeed_imgcodecs_corrupt);
  for (std::size_t i = 0; i < raster.size(); ++i) {
    out[3 * i] = static_cast<std::uint8_t>(TIFFGetR(raster[i]));
    out[3 * i + 1] = static_cast<std::uint8_t>(TIFFGetG(raster[i]));
    out[3 * i + 2] = static_cast<std::uint8_t>(TIFFGetB(raster[i]));
  }
  return pinfeed_imgcodecs_ok;
}

/// A TIFF decode: where libtiff said that memory ran out, or an allocation under it failed (ENOMEM)
/// while it went on (a codec, a tag or a correction left out), the call is out of memory, whatever
/// it gave: those pixels are not the file's.
int decode_tiff(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context, report& rep) {
  errno = 0;
  const int status = decode_tiff_pixels(bytes, size, output, context, rep);
  if (!rep.out_of_memory && errno != ENOMEM) return status;
  rep.say("libtiff: out of memory");
  return pinfeed_imgcodecs_out_of_memory;
}

int decode(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context, char* message,
           std::size_t message_size) {
  report rep{message, message_size};
  if (size >= 8 && png_sig_cmp(bytes, 0, 8) == 0) return decode_png(bytes, size, output, context, rep);
  if (size >= 12 && std::memcmp(bytes, "RIFF", 4) == 0 && std::memcmp(bytes + 8, "WEBP", 4) == 0)
    return decode_webp(bytes, size, output, context, rep);
  if (size >= 4 && (std::memcmp(bytes, "II", 2) == 0 || std::memcmp(bytes, "MM", 2) == 0))
    return decode_tiff(bytes, size, output, context, rep);
  rep.say("not a PNG, WebP or TIFF image");
  return pinfeed_imgcodecs_corrupt;
}

#define PINFEED_STRINGIFY2(x) #x
#define PINFEED_STRINGIFY(x) PINFEED_STRINGIFY2(x)
// The libraries it was built with, as one literal: nothing is made (or allocated) when it opens.
constexpr const char* kLibraries = "libpng " PNG_LIBPNG_VER_STRING ", libwebp (decoder ABI " PINFEED_STRINGIFY(
    WEBP_DECODER_ABI_VERSION) "), libtiff " PINFEED_STRINGIFY(TIFFLIB_VERSION);
const pinfeed_imgcodecs_v1 entry{PINFEED_IMGCODECS_ABI, PINFEED_VERSION_STRING, kLibraries, &decode};

}  // namespace

extern "C" __attribute__((visibility("default"))) const pinfeed_imgcodecs_v1* pinfeed_imgcodecs_entry_v1() {
  return &entry;
}
