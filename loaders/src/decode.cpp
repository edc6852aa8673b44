#include "pinfeed/loaders/decode.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <turbojpeg.h>

namespace pinfeed::loaders {
namespace {

bool starts_with(std::span<const std::byte> b, std::initializer_list<unsigned> magic) {
  if (b.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned m : magic)
    if (static_cast<unsigned>(b[i++]) != m) return false;
  return true;
}

std::uint32_t be32(std::span<const std::byte> b, std::size_t at) {
  return (static_cast<std::uint32_t>(b[at]) << 24) | (static_cast<std::uint32_t>(b[at + 1]) << 16) |
         (static_cast<std::uint32_t>(b[at + 2]) << 8) | static_cast<std::uint32_t>(b[at + 3]);
}
std::int32_t le32(std::span<const std::byte> b, std::size_t at) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(b[at]) | (static_cast<std::uint32_t>(b[at + 1]) << 8) |
                                   (static_cast<std::uint32_t>(b[at + 2]) << 16) |
                                   (static_cast<std::uint32_t>(b[at + 3]) << 24));
}

bool is_jpeg(std::span<const std::byte> b) { return starts_with(b, {0xFF, 0xD8, 0xFF}); }

struct tj_deleter {
  void operator()(void* h) const noexcept { tjDestroy(h); }
};
using tj_handle = std::unique_ptr<void, tj_deleter>;

tjhandle decompressor() {
  thread_local tj_handle handle(tjInitDecompress());
  if (!handle) throw std::runtime_error("TurboJPEG: cannot create a decompressor");
  return handle.get();
}

[[noreturn]] void fail(const std::string& what, const std::string& reason) {
  throw std::runtime_error(what + ": " + reason);
}

void check_pixels(const image_size& s, const decode_options& o, const std::string& what) {
  if (s.width <= 0 || s.height <= 0) return;
  // Divide rather than multiply: header sizes can be anything up to 2^32 each.
  if (o.max_pixels > 0 && s.width > o.max_pixels / s.height)
    fail(what, "image of " + std::to_string(s.width) + "x" + std::to_string(s.height) + " pixels exceeds the limit of " +
                   std::to_string(o.max_pixels) + " pixels");
}

/// OpenCV for everything that is not a plain JPEG: BGR(A)/grey -> RGB.
image_spec decode_opencv(std::span<const std::byte> bytes, std::vector<std::byte>& out, const std::string& what) {
  cv::Mat decoded;
  try {
    const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<std::byte*>(bytes.data()));
    decoded = cv::imdecode(raw, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    fail(what, std::string("corrupt or unsupported image (") + e.what() + ")");
  }
  if (decoded.empty()) fail(what, "not a decodable image (corrupt, truncated or not an image format)");
  const image_spec spec{decoded.rows, decoded.cols, 3, dtype::u8};
  out.resize(spec.bytes());
  cv::Mat rgb(decoded.rows, decoded.cols, CV_8UC3, out.data());
  cv::cvtColor(decoded, rgb, cv::COLOR_BGR2RGB);
  return spec;
}

}  // namespace

image_size peek_size(std::span<const std::byte> b) {
  if (is_jpeg(b)) {
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(decompressor(), reinterpret_cast<const unsigned char*>(b.data()),
                            static_cast<unsigned long>(b.size()), &w, &h, &subsamp, &colorspace) == 0)
      return {w, h};
    return {};
  }
  if (starts_with(b, {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}) && b.size() >= 24)
    return {be32(b, 16), be32(b, 20)};  // IHDR
  if (starts_with(b, {'B', 'M'}) && b.size() >= 26) {
    const std::int64_t h = le32(b, 22);
    return {le32(b, 18), h < 0 ? -h : h};
  }
  return {};
}

image_spec decode_image(std::span<const std::byte> bytes, std::vector<std::byte>& out, const decode_options& o,
                        const std::string& what) {
  if (bytes.empty()) fail(what, "empty file (0 bytes)");
  check_pixels(peek_size(bytes), o, what);
  if (!is_jpeg(bytes)) return decode_opencv(bytes, out, what);

  tjhandle tj = decompressor();
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(tj, src, size, &w, &h, &subsamp, &colorspace) != 0)
    fail(what, std::string("corrupt JPEG header (") + tjGetErrorStr2(tj) + ")");
  // CMYK/YCCK JPEGs: TurboJPEG cannot convert them to RGB; OpenCV's libjpeg path can.
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) return decode_opencv(bytes, out, what);
  // The smallest DCT scale that keeps the shorter side >= min_short_side.
  int n = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&n);
  tjscalingfactor best{1, 1};
  if (o.min_short_side > 0) {
    for (int i = 0; i < n; ++i) {
      const tjscalingfactor f = factors[i];
      // Only 1/2, 1/4 and 1/8: libjpeg-turbo's other scaled IDCTs (7/8, 3/4, ...) have no SIMD
      // code and cost more than a full decode.
      if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
      if (std::min<std::int64_t>(TJSCALED(w, f), TJSCALED(h, f)) >= o.min_short_side && TJSCALED(w, f) < TJSCALED(w, best))
        best = f;
    }
  }
  const int sw = TJSCALED(w, best), sh = TJSCALED(h, best);
  const image_spec spec{sh, sw, 3, dtype::u8};
  out.resize(spec.bytes());
  const int flags = TJFLAG_NOREALLOC | (o.fast_dct ? TJFLAG_FASTDCT : 0) | TJFLAG_STOPONWARNING;
  if (tjDecompress2(tj, src, size, reinterpret_cast<unsigned char*>(out.data()), sw, 0, sh, TJPF_RGB, flags) != 0)
    fail(what, std::string("corrupt or truncated JPEG (") + tjGetErrorStr2(tj) + ")");
  return spec;
}

image_spec decode_image_for(std::span<const std::byte> bytes, std::vector<std::byte>& out, decode_options o,
                            const std::function<std::int64_t(std::int64_t, std::int64_t)>& min_short_side,
                            const std::string& what) {
  if (min_short_side) {
    const image_size full = peek_size(bytes);
    if (full.width > 0 && full.height > 0) {
      const std::int64_t need = min_short_side(full.height, full.width);
      o.min_short_side = need == 0 ? 0 : std::max(need, o.min_short_side);
    }
  }
  return decode_image(bytes, out, o, what);
}

void read_file(const std::string& path, std::vector<std::byte>& out) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, "cannot open for reading");
  const std::streamsize size = in.tellg();
  if (size < 0) fail(path, "cannot determine the size");
  out.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(out.data()), size)) fail(path, "read error");
}

}  // namespace pinfeed::loaders
