// The JPEG planes on the host: the batch's checks, its sizes, and the reference decode.
#include <algorithm>
#include <string>

#include <oneapi/tbb/parallel_for.h>

#include "jpeg_math.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {

namespace {

[[noreturn]] void bad(std::size_t i, const std::string& what) {
  throw pinfeed::invalid_argument("jpeg batch: image " + std::to_string(i) + ": " + what);
}

std::string component_name(int k) { return "component " + std::to_string(k); }

/// The samples [first, last] of one axis of a component that the window [at, at + size) reads
/// through the upsampler (one more on each side, within the real samples), and the ones stored.
struct axis_need {
  std::uint64_t first, last, stored_first, stored_end;
};
axis_need need(std::uint64_t at, std::uint64_t size, std::uint64_t factor, std::uint64_t real, std::uint64_t mcu,
               std::uint64_t sampling, std::uint64_t blocks, std::uint64_t n) {
  const std::uint64_t lo = at / factor, hi = (at + size - 1) / factor + 1;
  return {lo > 0 ? lo - 1 : 0, std::min(hi, real - 1), mcu * sampling * n, (mcu * sampling + blocks) * n};
}

/// Component k's stored blocks hold every sample the window of image i reads.
void check_coverage(std::size_t i, int k, const jpeg_image& im) {
  const jpeg_component& c = im.comp[k];
  const jpeg::plane_view p = jpeg::plane_shape(im, k);
  const jpeg::window w = jpeg::window_of(im);
  const axis_need x = need(w.x, w.width, p.fh, p.dw, im.mcu_x, c.h, c.width_in_blocks, c.dct);
  const axis_need y = need(w.y, w.height, p.fv, p.dh, im.mcu_y, c.v, c.height_in_blocks, c.dct);
  if (x.stored_first > x.first || x.last >= x.stored_end || y.stored_first > y.first || y.last >= y.stored_end)
    bad(i, component_name(k) + " stores samples [" + std::to_string(x.stored_first) + ", " + std::to_string(x.stored_end) + ") x [" +
               std::to_string(y.stored_first) + ", " + std::to_string(y.stored_end) + "), not all of the [" + std::to_string(x.first) +
               ", " + std::to_string(x.last + 1) + ") x [" + std::to_string(y.first) + ", " + std::to_string(y.last + 1) +
               ") its window of " + std::to_string(w.width) + "x" + std::to_string(w.height) + " pixels reads");
}

/// Image i's window: the whole image, or a nonempty window inside its pixels at its scale.
void check_window(std::size_t i, const jpeg_image& im) {
  if (im.crop_width == 0 && im.crop_height == 0 && im.crop_x == 0 && im.crop_y == 0) return;
  const std::uint32_t W = jpeg_scaled_width(im), H = jpeg_scaled_height(im);
  if (im.crop_width == 0 || im.crop_height == 0 || std::uint64_t{im.crop_x} + im.crop_width > W ||
      std::uint64_t{im.crop_y} + im.crop_height > H)
    bad(i, "its window " + std::to_string(im.crop_width) + "x" + std::to_string(im.crop_height) + " at (" + std::to_string(im.crop_x) +
               ", " + std::to_string(im.crop_y) + ") is empty or not inside its " + std::to_string(W) + "x" + std::to_string(H) +
               " pixels" + (im.scale == 8 ? std::string() : " (at scale " + std::to_string(im.scale) + "/8)"));
}

bool is_dct_size(unsigned n) { return n == 1 || n == 2 || n == 4 || n == 8; }

/// Image i's components against its own size and the batch's blocks and tables.
void check_components(const jpeg_batch_view& b, std::size_t i, const jpeg_image& im) {
  for (int k = 0; k < im.components; ++k) {
    const jpeg_component& c = im.comp[k];
    if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || im.max_h % c.h != 0 || im.max_v % c.v != 0)
      bad(i, component_name(k) + " has sampling factors " + std::to_string(c.h) + "x" + std::to_string(c.v) + " against " +
                 std::to_string(im.max_h) + "x" + std::to_string(im.max_v) + ": not whole ratios of 1 to 4");
    // libjpeg's sizes: the component's IDCT at least the image's scale, and its samples a whole
    // number of pixels each way (what jpeg_component_scales() picks always is).
    if (!is_dct_size(c.dct) || c.dct < im.scale || (im.max_h * im.scale) % (c.h * c.dct) != 0 ||
        (im.max_v * im.scale) % (c.v * c.dct) != 0)
      bad(i, component_name(k) + " has IDCT size " + std::to_string(c.dct) + " at scale " + std::to_string(im.scale) +
                 " with sampling factors " + std::to_string(c.h) + "x" + std::to_string(c.v) + " against " + std::to_string(im.max_h) +
                 "x" + std::to_string(im.max_v) + ": not a size libjpeg decodes it at");
    check_coverage(i, k, im);
    const std::uint64_t blocks = jpeg::blocks_of(im, k);
    if (c.first_block > b.block_count || blocks > b.block_count - c.first_block)
      bad(i, component_name(k) + "'s blocks [" + std::to_string(c.first_block) + ", +" + std::to_string(blocks) +
                 ") are past the batch's " + std::to_string(b.block_count));
    if (std::uint64_t{im.first_quant} + c.quant >= b.quant_count)
      bad(i, component_name(k) + "'s quantization table " + std::to_string(im.first_quant + c.quant) + " is past the batch's " +
                 std::to_string(b.quant_count));
  }
}

}  // namespace

std::uint64_t jpeg_block_count(const jpeg_image& image) { return jpeg::blocks_of(image); }

std::uint64_t jpeg_plane_bytes(const jpeg_image& image) {
  std::uint64_t n = 0;
  for (int k = 0; k < image.components && k < 3; ++k) n += jpeg::blocks_of(image, k) * image.comp[k].dct * image.comp[k].dct;
  return n;
}

std::uint32_t jpeg_scaled_width(const jpeg_image& image) { return jpeg::scaled_extent(image.width, image.scale, 8); }
std::uint32_t jpeg_scaled_height(const jpeg_image& image) { return jpeg::scaled_extent(image.height, image.scale, 8); }

void jpeg_component_scales(jpeg_image& image) {
  for (int k = 0; k < image.components && k < 3; ++k) {
    jpeg_component& c = image.comp[k];
    unsigned n = image.scale;
    while (n < 8 && (image.max_h * image.scale) % (c.h * n * 2) == 0 && (image.max_v * image.scale) % (c.v * n * 2) == 0) n *= 2;
    c.dct = static_cast<std::uint8_t>(n);
  }
}

std::uint64_t jpeg_output_bytes(const jpeg_image& image) {
  const jpeg::window w = jpeg::window_of(image);
  return std::uint64_t{w.width} * w.height * 3;
}

void check_jpeg_batch(const jpeg_batch_view& b, std::uint64_t out_bytes, std::uint64_t scratch_bytes) {
  jpeg::check_batch(b, out_bytes, scratch_bytes, true);
}

void jpeg::check_batch(const jpeg_batch_view& b, std::uint64_t out_bytes, std::uint64_t scratch_bytes, bool tables_here) {
  if (b.count > 0 && b.images == nullptr) throw pinfeed::invalid_argument("jpeg batch: " + std::to_string(b.count) + " images but no geometry");
  if (b.block_count > 0 && b.blocks == nullptr) throw pinfeed::invalid_argument("jpeg batch: blocks counted but none given");
  if (b.quant_count > 0 && b.quant == nullptr) throw pinfeed::invalid_argument("jpeg batch: tables counted but none given");
  std::uint64_t out_end = 0, plane_end = 0, block_end = 0;
  for (std::size_t i = 0; i < b.count; ++i) {
    const jpeg_image& im = b.images[i];
    if (im.components != 1 && im.components != 3)
      bad(i, "has " + std::to_string(im.components) + " components; 1 (grey) or 3 (YCbCr) are decoded here");
    if (im.width == 0 || im.height == 0) bad(i, "is " + std::to_string(im.width) + "x" + std::to_string(im.height));
    if (!is_dct_size(im.scale)) bad(i, "has scale " + std::to_string(im.scale) + " (8, 4, 2 or 1: a decode at 1, 1/2, 1/4 or 1/8)");
    check_window(i, im);
    check_components(b, i, im);
    // In order and without overlap: the device finds an image from a block or a pixel by search.
    if (im.out_offset < out_end) bad(i, "its output starts at byte " + std::to_string(im.out_offset) + ", inside the one before");
    if (im.plane_offset < plane_end) bad(i, "its planes start at byte " + std::to_string(im.plane_offset) + ", inside the ones before");
    if (im.comp[0].first_block < block_end) bad(i, "its blocks start at " + std::to_string(im.comp[0].first_block) + ", inside the ones before");
    for (int k = 1; k < im.components; ++k)
      if (im.comp[k].first_block != im.comp[k - 1].first_block + jpeg::blocks_of(im, k - 1))
        bad(i, component_name(k) + "'s blocks do not follow " + component_name(k - 1) + "'s");
    out_end = im.out_offset + jpeg_output_bytes(im);
    plane_end = im.plane_offset + jpeg_plane_bytes(im);
    block_end = im.comp[im.components - 1].first_block + jpeg::blocks_of(im, im.components - 1);
    if (out_end > out_bytes) bad(i, "its output ends at byte " + std::to_string(out_end) + ", past the " + std::to_string(out_bytes) + " given");
    if (plane_end > scratch_bytes)
      bad(i, "its planes end at byte " + std::to_string(plane_end) + ", past the " + std::to_string(scratch_bytes) + " of scratch given");
  }
  for (std::uint64_t t = 0; tables_here && t < std::uint64_t{b.quant_count} * 64; ++t)
    if (b.quant[t] == 0 || b.quant[t] > 32767)  // past 32767 libjpeg's 16-bit multipliers and its int ones differ
      throw pinfeed::invalid_argument("jpeg batch: quantization table " + std::to_string(t / 64) + " has step " +
                                      std::to_string(b.quant[t]) + " at " + std::to_string(t % 64) + " (1 to 32767 are decoded here)");
}

void jpeg::check_device_call(const jpeg_batch_view& device, const jpeg_image* host_images, std::uint64_t out_bytes,
                             std::uint64_t scratch_bytes) {
  if (device.count > 0 && host_images == nullptr)
    throw pinfeed::invalid_argument("jpeg batch: " + std::to_string(device.count) +
                                    " images on the device but no host copy of their geometry");
  jpeg_batch_view host = device;  // the geometry from its host copy; the tables' steps are on the device
  host.images = host_images;
  check_batch(host, out_bytes, scratch_bytes, false);
}

namespace {

/// The conditions of jpeg_block_same_on_every_host() on the values between the passes (`ws`, N
/// rows of 8) and the samples of the second pass.
template <int N>
bool reduced_same(const std::int64_t* ws) {
  constexpr std::int64_t lo16 = -32768, hi16 = 32767;
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < 8; ++c)
      if (c != 4 && (N == 4 || c % 2 == 1 || c == 0) && (ws[r * 8 + c] < lo16 || ws[r * 8 + c] > hi16)) return false;
  for (int r = 0; r < N; ++r) {
    std::int64_t v[N];
    jpeg::reduced_row<N>(ws, r, v);
    for (int c = 0; c < N; ++c)
      if (v[c] < -512 || v[c] > 511) return false;
  }
  return true;
}

}  // namespace

bool jpeg_block_same_on_every_host(const std::int16_t* coef, const std::uint16_t* q, int dct) {
  constexpr std::int64_t lo16 = -32768, hi16 = 32767;
  if (dct == 1) return true;  // C code only
  for (int i = 0; i < 64; ++i) {
    const std::int64_t v = static_cast<std::int64_t>(coef[i]) * q[i];
    if (v < lo16 || v > hi16) return false;
  }
  if (dct == 4 || dct == 2) {
    std::int64_t ws[64];
    if (dct == 4) {
      jpeg::reduced_columns<4>(coef, q, ws);
      return reduced_same<4>(ws);
    }
    jpeg::reduced_columns<2>(coef, q, ws);
    return reduced_same<2>(ws);
  }
  std::int64_t ws[64];
  for (int c = 0; c < 8; ++c) {
    std::int64_t in[8];
    for (int r = 0; r < 8; ++r) in[r] = static_cast<std::int64_t>(coef[r * 8 + c]) * q[r * 8 + c];
    const jpeg::pass_sums p = jpeg::idct_pass(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
    for (int r = 0; r < 8; ++r) {
      ws[r * 8 + c] = jpeg::descale(p.v[r], jpeg::kConstBits - jpeg::kPass1Bits);
      if (ws[r * 8 + c] < lo16 || ws[r * 8 + c] > hi16) return false;
    }
  }
  for (int r = 0; r < 8; ++r) {
    const std::int64_t* w = ws + r * 8;
    const jpeg::pass_sums p = jpeg::idct_pass(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
    for (int c = 0; c < 8; ++c) {
      const std::int64_t v = jpeg::descale(p.v[c], jpeg::kConstBits + jpeg::kPass1Bits + 3);
      if (v < -512 || v > 511) return false;
    }
  }
  return true;
}

void decode_jpeg_batch_host(const jpeg_batch_view& b, std::uint8_t* out, std::uint64_t out_bytes, std::uint8_t* scratch,
                            std::uint64_t scratch_bytes) {
  check_jpeg_batch(b, out_bytes, scratch_bytes);
  tbb::parallel_for(std::size_t{0}, b.count, [&](std::size_t i) {
    const jpeg_image& im = b.images[i];
    for (std::uint64_t blk = 0; blk < jpeg::blocks_of(im); ++blk) jpeg::decode_block(im, blk, b.blocks, b.quant, scratch);
    const jpeg::planes planes = jpeg::planes_of(im, scratch);
    const jpeg::window w = jpeg::window_of(im);
    std::uint8_t* dst = out + im.out_offset;
    for (std::uint32_t y = 0; y < w.height; ++y)
      for (std::uint32_t x = 0; x < w.width; ++x, dst += 3) jpeg::pixel(planes, w.x + x, w.y + y, dst);
  });
}

}  // namespace pinfeed::ops
