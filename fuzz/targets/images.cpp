// Image decoding: JPEG (pinfeed's Huffman decoder against libjpeg-turbo's, whole and in a window,
// the frame header's size) and the other formats (whole, window, header size).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "targets.hpp"

namespace pinfeed::fuzz {
namespace {

using loaders::decode_options;
using loaders::image_region;
using loaders::image_spec;

decode_options options(decode_options::huffman_decoder h) {
  decode_options o;
  o.max_pixels = std::int64_t{1} << 22;  // 4 Mpixel: a fuzzer's inputs are small
  o.huffman = h;
  return o;
}

struct decoded {
  bool ok = false;
  image_spec spec{};
  std::vector<std::byte> pixels;
};

decoded whole(bytes input, decode_options::huffman_decoder h) {
  decoded d;
  try {
    d.spec = loaders::decode_image(as_bytes(input), d.pixels, options(h), "fuzz");
    d.ok = true;
  } catch (const std::runtime_error&) {
  }
  return d;
}

decoded window(bytes input, decode_options::huffman_decoder h, image_region r, std::int64_t min_short_side) {
  decoded d;
  try {
    d.spec = loaders::decode_image_region(as_bytes(input), d.pixels, options(h), r, min_short_side, "fuzz");
    d.ok = true;
  } catch (const std::runtime_error&) {
  }
  return d;
}

void check_shape(std::string_view name, const decoded& d) {
  if (d.spec.height <= 0 || d.spec.width <= 0 || d.spec.channels != 3 || d.pixels.size() != d.spec.bytes())
    broken(name, "decoded a " + std::to_string(d.spec.height) + "x" + std::to_string(d.spec.width) + "x" +
                     std::to_string(d.spec.channels) + " image into " + std::to_string(d.pixels.size()) + " bytes");
}

void check_same(std::string_view name, const char* what, const decoded& a, const decoded& b) {
  if (a.spec.height != b.spec.height || a.spec.width != b.spec.width || a.pixels != b.pixels)
    broken(name, std::string(what) + ": " + std::to_string(a.spec.height) + "x" + std::to_string(a.spec.width) + " vs " +
                     std::to_string(b.spec.height) + "x" + std::to_string(b.spec.width) + ", pixels " +
                     (a.pixels == b.pixels ? "equal" : "differ"));
}

/// The window a region decode at full resolution must give: `r` clamped to the image, cut from it.
decoded cut(const decoded& full, image_region r) {
  const auto H = full.spec.height, W = full.spec.width;
  const auto y = std::clamp<std::int64_t>(r.y, 0, H - 1), x = std::clamp<std::int64_t>(r.x, 0, W - 1);
  const auto h = std::clamp<std::int64_t>(r.height, 1, H - y), w = std::clamp<std::int64_t>(r.width, 1, W - x);
  decoded d;
  d.ok = true;
  d.spec = full.spec;
  d.spec.height = h;
  d.spec.width = w;
  d.pixels.resize(static_cast<std::size_t>(h * w * 3));
  for (std::int64_t row = 0; row < h; ++row)
    std::memcpy(d.pixels.data() + row * w * 3, full.pixels.data() + ((y + row) * W + x) * 3, static_cast<std::size_t>(w * 3));
  return d;
}

/// A window and a DCT scale from the input's last bytes (so the fuzzer steers them too).
struct steer {
  image_region region;
  std::int64_t min_short_side;
};
steer steering(bytes input) {
  const auto tail = [&](std::size_t back) {
    return input.size() > back ? static_cast<std::int64_t>(input[input.size() - 1 - back]) : 0;
  };
  return {{tail(0) * 3, tail(1) * 3, 1 + tail(2) * 4, 1 + tail(3) * 4}, tail(4) % 4 == 0 ? 0 : tail(4)};
}

}  // namespace

outcome jpeg(bytes input) {
  constexpr std::string_view name = "jpeg";
  using h = decode_options::huffman_decoder;
  const auto ours = whole(input, h::pinfeed), theirs = whole(input, h::libjpeg);
  if (ours.ok) check_shape(name, ours);
  if (theirs.ok) check_shape(name, theirs);
  if (ours.ok && theirs.ok) check_same(name, "whole image, pinfeed's Huffman decoder vs libjpeg-turbo's", ours, theirs);
  // The size read from the frame header without libjpeg (peek_size) is the decoded one.
  const auto peeked = loaders::peek_size(as_bytes(input));
  if (theirs.ok && peeked.width != 0 && (peeked.width != theirs.spec.width || peeked.height != theirs.spec.height))
    broken(name, "the frame header says " + std::to_string(peeked.width) + "x" + std::to_string(peeked.height) +
                     ", the decoded image is " + std::to_string(theirs.spec.width) + "x" + std::to_string(theirs.spec.height));
  // A window, at a DCT scale the input picks: both decoders give the same pixels; at full
  // resolution those of the same window of the whole image.
  const auto s = steering(input);
  const auto w_ours = window(input, h::pinfeed, s.region, s.min_short_side);
  const auto w_theirs = window(input, h::libjpeg, s.region, s.min_short_side);
  if (w_ours.ok) check_shape(name, w_ours);
  if (w_ours.ok && w_theirs.ok) check_same(name, "window, pinfeed's Huffman decoder vs libjpeg-turbo's", w_ours, w_theirs);
  if (s.min_short_side == 0 && w_theirs.ok && theirs.ok)
    check_same(name, "window vs the same window of the whole image", w_theirs, cut(theirs, s.region));
  return ours.ok || theirs.ok ? outcome::accepted : outcome::rejected;
}

namespace {

/// `p` through the planes' host reference.
std::vector<std::uint8_t> planes_of(const loaders::jpeg_packed& p) {
  loaders::jpeg_batch batch;
  batch.append(p);
  std::vector<std::uint8_t> out(batch.out_bytes), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(batch.view(), out.data(), out.size(), scratch.data(), scratch.size());
  return out;
}

/// The host half (pack_jpeg), whole and for a window at a scale: what it takes the host decode takes too,
/// with the same pixels, and its blocks are the coefficient reader's `c`.
void check_packed(std::string_view name, bytes input, const loaders::jpeg_coefficients& c, const decoded& host) {
  loaders::jpeg_packed p;
  if (loaders::pack_jpeg(as_bytes(input), "fuzz", {}, p).fallback == loaders::jpeg_fallback::none) {
    std::vector<std::uint8_t> packed;
    ops::pack_jpeg_blocks(c.blocks, packed);
    if (p.bytes != packed) broken(name, "pack_jpeg's blocks differ from the coefficient reader's, packed");
    if (!host.ok) broken(name, "pack_jpeg took a file the host decode refuses");
    const auto px = planes_of(p);
    if (std::memcmp(host.pixels.data(), px.data(), px.size()) != 0) broken(name, "pack_jpeg's pixels differ from the host decode's");
  }
  const steer st = steering(input);
  image_region r = st.region;
  r.y %= c.image.height;
  r.x %= c.image.width;
  r.height = std::min<std::int64_t>(r.height, c.image.height - r.y);
  r.width = std::min<std::int64_t>(r.width, c.image.width - r.x);
  if (r.height <= 0 || r.width <= 0) return;
  // At the DCT scale the host decode takes for the input's shorter side (1/2, 1/4, 1/8: the
  // reduced IDCTs), or whole.
  loaders::jpeg_pack_options o;
  o.window = r;
  o.scale_denom = loaders::region_decode_denom(r, st.min_short_side);
  if (loaders::pack_jpeg(as_bytes(input), "fuzz", o, p).fallback != loaders::jpeg_fallback::none) return;
  const auto part = window(input, decode_options::huffman_decoder::pinfeed, r, st.min_short_side);
  if (!part.ok) broken(name, "pack_jpeg took a window the host decode refuses");
  const auto px = planes_of(p);
  if (px.size() != part.pixels.size() || std::memcmp(part.pixels.data(), px.data(), px.size()) != 0)
    broken(name, "pack_jpeg's window differs from the host decode's");
}

}  // namespace

outcome jpeg_planes(bytes input) {
  constexpr std::string_view name = "jpeg_planes";
  // Any bytes read as compact blocks are malformed, or exactly what packing their blocks writes:
  // the form has one spelling, so the device and the host cannot read a slot differently.
  const auto ends = static_cast<std::uint64_t>(std::count(input.begin(), input.end(), std::uint8_t{0x08}));
  if (ends > 0 && ends <= 4096) {
    std::vector<std::int16_t> blocks(ends * 64);
    bool read = true;
    try {
      ops::unpack_jpeg_blocks({input.data(), input.size()}, ends, blocks.data());
    } catch (const std::invalid_argument&) {
      read = false;
    }
    if (read) {
      std::vector<std::uint8_t> again;
      ops::pack_jpeg_blocks(blocks, again);
      if (again.size() != input.size() || !std::equal(again.begin(), again.end(), input.begin()))
        broken(name, "compact blocks that unpack do not pack back to the same bytes");
    }
  }
  loaders::jpeg_read r;
  try {
    r = loaders::read_jpeg_coefficients(as_bytes(input), "fuzz", std::int64_t{1} << 22);
  } catch (const std::runtime_error&) {  // over the pixel limit
    return outcome::rejected;
  }
  if (!r.coefficients) {
    if (r.reason.empty()) broken(name, std::string("a fallback (") + loaders::to_string(r.fallback) + ") without a reason");
    return outcome::rejected;
  }
  const loaders::jpeg_coefficients& c = *r.coefficients;
  // The compact form gives the blocks back exactly.
  std::vector<std::uint8_t> packed;
  ops::pack_jpeg_blocks(c.blocks, packed);
  std::vector<std::int16_t> back(c.blocks.size());
  ops::unpack_jpeg_blocks(packed, c.blocks.size() / 64, back.data());
  if (back != c.blocks) broken(name, "packed and unpacked blocks differ");
  // The planes decode (the batch's checks hold for what the reader made), and where every block
  // stays inside the range where libjpeg-turbo's C and SIMD IDCTs agree (the sum of a block's
  // dequantized magnitudes at most 2000: its samples within +-501 before the range limit, every
  // 16-bit intermediate of the SIMD code in range), the pixels are the host decode's.
  loaders::jpeg_batch batch;
  batch.append(c);
  std::vector<std::uint8_t> out(batch.out_bytes), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(batch.view(), out.data(), out.size(), scratch.data(), scratch.size());
  bool in_range = true;
  for (int k = 0; k < c.image.components && in_range; ++k) {
    const ops::jpeg_component& comp = c.image.comp[k];
    const std::uint16_t* q = c.quant.data() + comp.quant * 64;
    for (std::uint64_t b = comp.first_block; b < comp.first_block + std::uint64_t{comp.width_in_blocks} * comp.height_in_blocks && in_range; ++b) {
      std::int64_t sum = 0;
      for (int i = 0; i < 64; ++i) sum += std::abs(static_cast<std::int64_t>(c.blocks[b * 64 + i]) * q[i]);
      in_range = sum <= 2000;
    }
  }
  const auto host = whole(input, decode_options::huffman_decoder::pinfeed);
  if (host.ok && (host.spec.width != c.image.width || host.spec.height != c.image.height))
    broken(name, "the coefficients are " + std::to_string(c.image.width) + "x" + std::to_string(c.image.height) + ", the host decode " +
                     std::to_string(host.spec.width) + "x" + std::to_string(host.spec.height));
  if (host.ok && in_range && std::memcmp(host.pixels.data(), out.data(), out.size()) != 0)
    broken(name, "the planes' pixels differ from the host decode's");
  check_packed(name, input, c, host);
  return outcome::accepted;
}

outcome image(bytes input) {
  constexpr std::string_view name = "image";
  if (input.size() >= 2 && input[0] == 0xFF && input[1] == 0xD8) return jpeg(input);  // a JPEG: its own checks
  const auto full = whole(input, decode_options::huffman_decoder::pinfeed);
  if (!full.ok) return outcome::rejected;
  check_shape(name, full);
  // The size read from the header (without decoding) is the decoded one's; an orientation tag
  // may swap the sides, never change the pixel count.
  const auto peeked = loaders::peek_size(std::span<const std::byte>(reinterpret_cast<const std::byte*>(input.data()), input.size()));
  if (peeked.width != 0 && peeked.width * peeked.height != full.spec.width * full.spec.height)
    broken(name, "the header says " + std::to_string(peeked.width) + "x" + std::to_string(peeked.height) +
                     ", the decoded image is " + std::to_string(full.spec.width) + "x" + std::to_string(full.spec.height));
  const auto s = steering(input);
  const auto part = window(input, decode_options::huffman_decoder::pinfeed, s.region, 0);
  if (!part.ok) broken(name, "the whole image decodes, a window of it does not");
  check_same(name, "window vs the same window of the whole image", part, cut(full, s.region));
  return outcome::accepted;
}

}  // namespace pinfeed::fuzz
