// JPEGs to coefficients with libjpeg (jpeg_coefficients.hpp), and encoding with every option. libjpeg's
// errors jump (jpeg_error_jump.hpp) back into the function that set the jump, whose state lives
// behind a pointer set before the jump (so nothing it holds is in a register the jump loses); the
// state's destructor ends libjpeg's object on every path.
#include "pinfeed/loaders/jpeg_coefficients.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include <jpeglib.h>
#include <jerror.h>

#include "jpeg_error_jump.hpp"
#include "jpeg_scan.hpp"

#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders {

namespace {

using detail::install_error_jump;
using detail::jpeg_error_jump;

struct reader_state : detail::decompress_state {
  jpeg_coefficients out;
  std::string reason;
};

/// Copies the coefficient arrays and tables libjpeg read into `st.out`.
void copy_out(reader_state& st, jvirt_barray_ptr* arrays) {
  jpeg_decompress_struct& c = st.cinfo;
  ops::jpeg_image& im = st.out.image;
  im.width = c.image_width;
  im.height = c.image_height;
  im.components = static_cast<std::uint8_t>(c.num_components);
  im.max_h = static_cast<std::uint8_t>(c.max_h_samp_factor);
  im.max_v = static_cast<std::uint8_t>(c.max_v_samp_factor);
  std::vector<const JQUANT_TBL*> tables;
  std::uint64_t blocks = 0;
  for (int k = 0; k < c.num_components; ++k)
    blocks += std::uint64_t{c.comp_info[k].width_in_blocks} * c.comp_info[k].height_in_blocks;
  st.out.blocks.resize(blocks * 64);
  std::uint64_t at = 0;
  for (int k = 0; k < c.num_components; ++k) {
    const jpeg_component_info& ci = c.comp_info[k];
    const auto t = std::find(tables.begin(), tables.end(), ci.quant_table);
    im.comp[k] = {static_cast<std::uint8_t>(ci.h_samp_factor), static_cast<std::uint8_t>(ci.v_samp_factor),
                  static_cast<std::uint8_t>(t - tables.begin()), ci.width_in_blocks, ci.height_in_blocks, at};
    if (t == tables.end()) tables.push_back(ci.quant_table);
    for (JDIMENSION by = 0; by < ci.height_in_blocks; ++by) {
      JBLOCKARRAY row = (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c), arrays[k], by, 1, FALSE);
      std::memcpy(st.out.blocks.data() + (at + std::uint64_t{by} * ci.width_in_blocks) * 64, row[0],
                  sizeof(JBLOCK) * ci.width_in_blocks);
    }
    at += std::uint64_t{ci.width_in_blocks} * ci.height_in_blocks;
  }
  st.out.quant.resize(tables.size() * 64);
  for (std::size_t t = 0; t < tables.size(); ++t)
    for (int i = 0; i < 64; ++i) st.out.quant[t * 64 + i] = tables[t]->quantval[i];
}

}  // namespace

jpeg_fallback detail::refuse_for_device(const jpeg_decompress_struct& c, std::string& reason) {
  if (c.arith_code) return reason = "arithmetic-coded", jpeg_fallback::arithmetic;
  if (c.data_precision != 8) return reason = std::to_string(c.data_precision) + "-bit samples", jpeg_fallback::precision;
  const bool grey = c.jpeg_color_space == JCS_GRAYSCALE && c.num_components == 1;
  const bool ycc = c.jpeg_color_space == JCS_YCbCr && c.num_components == 3;
  if (!grey && !ycc) return reason = std::to_string(c.num_components) + " components, not YCbCr or grey", jpeg_fallback::colour;
  int max_h = 1, max_v = 1;
  for (int k = 0; k < c.num_components; ++k) {
    max_h = std::max(max_h, c.comp_info[k].h_samp_factor);
    max_v = std::max(max_v, c.comp_info[k].v_samp_factor);
  }
  for (int k = 0; k < c.num_components; ++k)
    if (max_h % c.comp_info[k].h_samp_factor != 0 || max_v % c.comp_info[k].v_samp_factor != 0)
      return reason = "fractional sampling factors", jpeg_fallback::sampling;
  return jpeg_fallback::none;
}

bool detail::nvjpeg_takes(std::span<const std::byte> bytes, bool hardware) {
  if (bytes.size() < 2 || bytes[0] != std::byte{0xFF} || bytes[1] != std::byte{0xD8}) return false;
  const auto st = std::make_unique<reader_state>();
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st->cinfo), st->err);
  if (setjmp(st->err.jump)) return false;
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  jpeg_decompress_struct& c = st->cinfo;
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&c, TRUE);
  if (detail::refuse_for_device(c, st->reason) != jpeg_fallback::none) return false;
  if (!hardware) return true;
  if (c.progressive_mode || c.comps_in_scan != c.num_components) return false;
  if (c.num_components == 1) return true;
  const jpeg_component_info* k = c.comp_info;
  return k[0].h_samp_factor <= 2 && k[0].v_samp_factor <= 2 && k[1].h_samp_factor == 1 && k[1].v_samp_factor == 1 &&
         k[2].h_samp_factor == 1 && k[2].v_samp_factor == 1;
}

const char* to_string(jpeg_fallback f) noexcept {
  switch (f) {
    case jpeg_fallback::none: return "none";
    case jpeg_fallback::not_jpeg: return "not a JPEG";
    case jpeg_fallback::arithmetic: return "arithmetic coding";
    case jpeg_fallback::precision: return "not 8-bit";
    case jpeg_fallback::colour: return "colour space";
    case jpeg_fallback::sampling: return "sampling factors";
    case jpeg_fallback::quantization: return "quantization steps";
    case jpeg_fallback::corrupt: return "truncated or corrupt";
    case jpeg_fallback::too_large: return "too large for its slot";
    case jpeg_fallback::range: return "past the IDCT's range";
  }
  return "?";
}

jpeg_read read_jpeg_coefficients(std::span<const std::byte> bytes, const std::string& what, std::int64_t max_pixels) {
  const auto fallback = [](jpeg_fallback f, std::string reason) {
    jpeg_read r;
    r.fallback = f;
    r.reason = std::move(reason);
    return r;
  };
  if (bytes.size() < 2 || bytes[0] != std::byte{0xFF} || bytes[1] != std::byte{0xD8})
    return fallback(jpeg_fallback::not_jpeg, "no start-of-image marker");
  // Everything the calls below change lives behind `st` (set before the jump target).
  const auto st = std::make_unique<reader_state>();
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st->cinfo), st->err);
  if (setjmp(st->err.jump)) return fallback(jpeg_fallback::corrupt, st->err.message);
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  jpeg_mem_src(&st->cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&st->cinfo, TRUE);
  const std::int64_t pixels = std::int64_t{st->cinfo.image_width} * st->cinfo.image_height;
  if (max_pixels > 0 && pixels > max_pixels)
    throw pinfeed::runtime_error(what + ": " + std::to_string(st->cinfo.image_width) + "x" + std::to_string(st->cinfo.image_height) +
                                 " pixels, more than the limit of " + std::to_string(max_pixels));
  if (const jpeg_fallback f = detail::refuse_for_device(st->cinfo, st->reason); f != jpeg_fallback::none) return fallback(f, st->reason);
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(&st->cinfo);
  for (int k = 0; k < st->cinfo.num_components; ++k)  // libjpeg latches a table at a component's first scan
    if (st->cinfo.comp_info[k].quant_table == nullptr)
      return fallback(jpeg_fallback::corrupt, "component " + std::to_string(k) + " is in no scan");
  copy_out(*st, arrays);
  jpeg_finish_decompress(&st->cinfo);
  if (std::any_of(st->out.quant.begin(), st->out.quant.end(), [](std::uint16_t q) { return q == 0 || q > 32767; }))
    return fallback(jpeg_fallback::quantization, "a quantization step of 0 or past 32767");
  jpeg_read r;
  r.coefficients = std::move(st->out);
  return r;
}

void jpeg_batch::append(const jpeg_coefficients& c) {
  ops::jpeg_image im = c.image;
  const std::uint64_t first_block = blocks.size() / 64;
  for (int k = 0; k < im.components; ++k) im.comp[k].first_block += first_block;
  im.first_quant = static_cast<std::uint32_t>(quant.size() / 64);
  im.out_offset = out_bytes;
  im.plane_offset = scratch_bytes;
  blocks.insert(blocks.end(), c.blocks.begin(), c.blocks.end());
  quant.insert(quant.end(), c.quant.begin(), c.quant.end());
  out_bytes += ops::jpeg_output_bytes(im);
  scratch_bytes += ops::jpeg_plane_bytes(im);
  images.push_back(im);
}

void jpeg_batch::append(const jpeg_packed& p) {
  jpeg_coefficients c;
  c.image = p.image;
  c.blocks.resize(ops::jpeg_block_count(p.image) * 64);
  ops::unpack_jpeg_blocks(p.bytes, ops::jpeg_block_count(p.image), c.blocks.data());
  c.quant = p.quant;
  append(c);
}

ops::jpeg_batch_view jpeg_batch::view() const {
  return {images.data(), images.size(), blocks.data(), blocks.size() / 64, quant.data(), quant.size() / 64};
}

namespace {

struct writer_state {
  jpeg_compress_struct cinfo{};
  jpeg_error_jump err{};
  bool created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ~writer_state() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

}  // namespace

std::vector<std::byte> encode_jpeg_with(std::span<const std::uint8_t> rgb, int width, int height, const jpeg_encode_options& o) {
  if (width <= 0 || height <= 0 || rgb.size() != static_cast<std::size_t>(width) * height * 3)
    throw pinfeed::invalid_argument("encode_jpeg_with: " + std::to_string(rgb.size()) + " bytes for " + std::to_string(width) + "x" +
                                    std::to_string(height) + " RGB pixels");
  if (o.quality < 1 || o.quality > 100) throw pinfeed::invalid_argument("encode_jpeg_with: quality " + std::to_string(o.quality) + " is not in 1..100");
  const bool factors_ok = (o.h == 1 && (o.v == 1 || o.v == 2)) || (o.h == 2 && (o.v == 1 || o.v == 2)) || (o.h == 4 && (o.v == 1 || o.v == 2));
  if (!o.grey && !factors_ok)
    throw pinfeed::invalid_argument("encode_jpeg_with: luma sampling " + std::to_string(o.h) + "x" + std::to_string(o.v) +
                                    " is not 1x1, 2x1, 2x2, 1x2, 4x1 or 4x2");
  if (o.restart_interval < 0 || o.restart_interval > 65535)
    throw pinfeed::invalid_argument("encode_jpeg_with: restart interval " + std::to_string(o.restart_interval) + " is not in 0..65535");
  const auto st = std::make_unique<writer_state>();
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st->cinfo), st->err);
  if (setjmp(st->err.jump)) throw pinfeed::runtime_error(std::string("encode_jpeg_with: libjpeg: ") + st->err.message);
  jpeg_create_compress(&st->cinfo);
  st->created = true;
  jpeg_compress_struct& c = st->cinfo;
  jpeg_mem_dest(&c, &st->buffer, &st->size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, o.quality, TRUE);
  if (o.grey) jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  c.comp_info[0].h_samp_factor = o.grey ? 1 : o.h;
  c.comp_info[0].v_samp_factor = o.grey ? 1 : o.v;
  c.restart_interval = static_cast<unsigned>(o.restart_interval);
  c.optimize_coding = o.optimize ? TRUE : FALSE;
  c.arith_code = o.arithmetic ? TRUE : FALSE;
  if (o.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb.data() + static_cast<std::size_t>(c.next_scanline) * width * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  const auto* b = reinterpret_cast<const std::byte*>(st->buffer);
  return std::vector<std::byte>(b, b + st->size);
}

}  // namespace pinfeed::loaders
