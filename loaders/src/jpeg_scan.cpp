// The host half of hybrid decoding (jpeg_coefficients.hpp, pack_jpeg): a JPEG's blocks of a window
// in the compact form. A single baseline scan of every component is walked here with pinfeed's
// Huffman decoder (jpeg_entropy.hpp), each wanted block written compact as it is decoded; every
// other layout goes through libjpeg's coefficient reader and is packed after.
//
// libjpeg's errors jump (jpeg_error_jump.hpp) back into pack_jpeg(): everything the code after
// the setjmp changes lives behind pointers (the state, `out`, the thread's scratch), and nothing
// between the jump and its target has a destructor to skip.
#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <memory>
#include <new>

#include "jpeg_scan.hpp"
#include "jpeg_walk.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders {

namespace {

using namespace detail;
using detail::entropy::kNatural;

/// Packs the layout's blocks of the coefficient arrays libjpeg read into s.comp; false where a
/// block's samples may pass the range limit at its component's IDCT size (kMostGain).
bool pack_read(jpeg_decompress_struct& c, jvirt_barray_ptr* arrays, const layout& l, scan_scratch& s,
               std::vector<std::int16_t>& dense, std::vector<std::uint8_t>& packed, std::vector<std::uint32_t>& starts) {
  for (int k = 0; k < l.components; ++k) {
    const std::uint32_t c0 = l.first_col(k), c1 = l.end_col(k);
    dense.clear();
    for (std::uint32_t by = l.first_row(k); by < l.end_row(k); ++by) {
      JBLOCKARRAY row = (*c.mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(&c), arrays[k], by, 1, FALSE);
      const auto* first = reinterpret_cast<const std::int16_t*>(row[0][c0]);
      dense.insert(dense.end(), first, first + static_cast<std::size_t>(c1 - c0) * 64);
    }
    const JQUANT_TBL* q = c.comp_info[k].quant_table;
    if (q == nullptr) return false;
    std::int64_t gain[64];
    gain_table(*q, gain);
    for (std::size_t b = 0; b < dense.size(); b += 64) {
      std::int64_t bound = 0;
      for (int z = 0; z < 64; ++z) {
        const std::int64_t v = dense[b + kNatural[static_cast<std::size_t>(z)]];
        bound += (v < 0 ? -v : v) * gain[z];
      }
      if (bound > kMostGain) {
        std::uint16_t steps[64];
        for (int i = 0; i < 64; ++i) steps[i] = q->quantval[i];
        if (!ops::jpeg_block_same_on_every_host(dense.data() + b, steps, l.dct[k])) return false;
      }
    }
    packed.clear();
    starts.clear();
    ops::pack_jpeg_blocks(dense, packed, &starts);
    byte_run& run = s.comp[k];
    if (!packed.empty()) std::memcpy(run.room(packed.size()), packed.data(), packed.size());
    run.n = packed.size();
    run.starts = starts;
  }
  return true;
}

/// The image's geometry before its blocks are known: size, sampling, scale (8 / denom) and the
/// components' IDCT sizes (libjpeg's choice).
ops::jpeg_image shape_of(const jpeg_decompress_struct& c, unsigned denom) {
  ops::jpeg_image im{};
  im.width = c.image_width;
  im.height = c.image_height;
  const bool grey = c.num_components == 1;
  im.components = static_cast<std::uint8_t>(c.num_components);
  im.max_h = static_cast<std::uint8_t>(grey ? 1 : c.max_h_samp_factor);
  im.max_v = static_cast<std::uint8_t>(grey ? 1 : c.max_v_samp_factor);
  im.scale = static_cast<std::uint8_t>(8 / denom);
  for (int k = 0; k < c.num_components && k < 3; ++k) {
    im.comp[k].h = static_cast<std::uint8_t>(grey ? 1 : c.comp_info[k].h_samp_factor);
    im.comp[k].v = static_cast<std::uint8_t>(grey ? 1 : c.comp_info[k].v_samp_factor);
  }
  ops::jpeg_component_scales(im);
  return im;
}

/// Why a scaled decode of `im` is left to the host decode, or nothing: a component whose IDCT is
/// larger than the image's scale (libjpeg's way to spare upsampling) yet still upsampled. libjpeg's
/// crop (jpeg_crop_scanline) sizes such a component's row from the unscaled ratio, so the host
/// decode's right edge is not the whole image's there. No common layout has one (4:2:0 at 1/2 has
/// 8x8 chroma that is not upsampled; 4:2:2 and 4:4:0 keep the image's scale).
const char* scaled_refusal(const ops::jpeg_image& im) {
  for (int k = 0; k < im.components; ++k) {
    const ops::jpeg_component& c = im.comp[k];
    if (c.dct > im.scale && (im.max_h * im.scale != c.h * c.dct || im.max_v * im.scale != c.v * c.dct))
      return "sampling factors whose scaled decode upsamples a component of a larger IDCT";
  }
  return nullptr;
}

/// The quantization tables of the components (shared ones once) and `out`'s geometry, from its
/// shape (shape_of) and the window `w` (in the decode's pixels).
bool describe(const jpeg_decompress_struct& c, const layout& l, const image_region& w, bool whole, const scan_scratch& s,
              const ops::jpeg_image& shape, jpeg_packed& out) {
  ops::jpeg_image& im = out.image;
  im = shape;
  im.mcu_x = l.x0;
  im.mcu_y = l.y0;
  if (!whole) {
    im.crop_x = static_cast<std::uint32_t>(w.x);
    im.crop_y = static_cast<std::uint32_t>(w.y);
    im.crop_width = static_cast<std::uint32_t>(w.width);
    im.crop_height = static_cast<std::uint32_t>(w.height);
  }
  const JQUANT_TBL* tables[MAX_COMPONENTS];
  int count = 0;
  out.quant.clear();
  std::uint64_t first = 0;
  for (int k = 0; k < l.components; ++k) {
    // The table libjpeg latched when the component's first scan began (its reader), or the one
    // its number names now (the walker's scan has not begun).
    const int t = c.comp_info[k].quant_tbl_no;
    const JQUANT_TBL* q = c.comp_info[k].quant_table;
    if (q == nullptr && t >= 0 && t < NUM_QUANT_TBLS) q = c.quant_tbl_ptrs[t];
    if (q == nullptr) return false;
    const JQUANT_TBL* const* seen = std::find_if(tables, tables + count, [q](const JQUANT_TBL* t) {
      return std::memcmp(t->quantval, q->quantval, sizeof q->quantval) == 0;
    });
    if (seen == tables + count) {
      tables[count++] = q;
      for (int i = 0; i < 64; ++i) out.quant.push_back(q->quantval[i]);
    }
    im.comp[k] = {static_cast<std::uint8_t>(l.h[k]), static_cast<std::uint8_t>(l.v[k]), static_cast<std::uint8_t>(seen - tables),
                  l.end_col(k) - l.first_col(k), l.end_row(k) - l.first_row(k), first, shape.comp[k].dct};
    first += s.comp[k].starts.size();
  }
  return true;
}

/// The components' blocks one after another into `out`.
void gather(const scan_scratch& s, int components, jpeg_packed& out) {
  std::size_t total = 0, blocks = 0;
  for (int k = 0; k < components; ++k) total += s.comp[k].n, blocks += s.comp[k].starts.size();
  out.bytes.resize(total);
  out.starts.resize(blocks);
  std::size_t at = 0, b = 0;
  for (int k = 0; k < components; ++k) {
    const byte_run& run = s.comp[k];
    if (run.n > 0) std::memcpy(out.bytes.data() + at, run.v.data(), run.n);
    for (const std::uint32_t st : run.starts) out.starts[b++] = static_cast<std::uint32_t>(at + st);
    at += run.n;
  }
}

struct pack_state : detail::decompress_state {
  std::string reason;
  std::vector<std::int16_t> dense;
  std::vector<std::uint8_t> packed;
  std::vector<std::uint32_t> starts;
};

constexpr const char* kPastRange = "a block whose samples may pass the IDCT's range limit";

jpeg_pack_result fell_back(jpeg_fallback f, std::string reason) { return {f, std::move(reason)}; }

image_region checked_window(const jpeg_decompress_struct& c, const std::optional<image_region>& window, const std::string& what) {
  const image_region whole{0, 0, c.image_height, c.image_width};
  if (!window) return whole;
  const image_region& w = *window;
  if (w.x < 0 || w.y < 0 || w.width <= 0 || w.height <= 0 || w.x + w.width > whole.width || w.y + w.height > whole.height)
    throw pinfeed::invalid_argument(what + ": window " + std::to_string(w.width) + "x" + std::to_string(w.height) + " at (" +
                                    std::to_string(w.x) + ", " + std::to_string(w.y) + ") is empty or not inside the " +
                                    std::to_string(whole.width) + "x" + std::to_string(whole.height) + " image");
  return w;
}

unsigned checked_denom(unsigned d, const std::string& what) {
  if (d != 1 && d != 2 && d != 4 && d != 8)
    throw pinfeed::invalid_argument(what + ": scale_denom " + std::to_string(d) + " (1, 2, 4 or 8: libjpeg's scales with reduced IDCTs)");
  return d;
}

/// The window of `o` in the pixels of the decode at `shape`'s scale (scaled_region(), as
/// decode_image_region() takes it); the whole image where `o` has none.
image_region decode_window(const jpeg_decompress_struct& c, const jpeg_pack_options& o, const ops::jpeg_image& shape,
                           const std::string& what) {
  if (!o.window) return image_region{0, 0, ops::jpeg_scaled_height(shape), ops::jpeg_scaled_width(shape)};
  return scaled_region(checked_window(c, o.window, what), c.image_width, c.image_height, o.scale_denom);
}

/// The blocks the walk stores for window `w` of the decode at `shape`.
layout walk_layout(const jpeg_decompress_struct& c, const image_region& w, const ops::jpeg_image& shape) {
  int dct[3] = {8, 8, 8};
  for (int k = 0; k < c.num_components && k < 3; ++k) dct[k] = shape.comp[k].dct;
  return layout_for(c, w, shape.scale, dct);
}

}  // namespace

struct jpeg_scan_tag;  // the thread's walker scratch, pack_jpeg()'s and jpeg_scan_intact()'s

namespace detail {

bool jpeg_scan_intact(std::span<const std::byte> bytes, std::string& why) {
  scan_scratch& s = pinfeed::detail::thread_scratch<scan_scratch, loaders::jpeg_scan_tag>();
  const auto st = std::make_unique<decompress_state>();
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st->cinfo), st->err);
  if (setjmp(st->err.jump)) {
    why = st->err.message;
    return false;
  }
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  jpeg_decompress_struct& c = st->cinfo;
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&c, TRUE);
  mcu_plan plan;
  if (plan_scan(c, s, plan)) {
    const auto* scan = reinterpret_cast<const std::byte*>(c.src->next_input_byte);
    const int dct[3] = {8, 8, 8};
    layout l = layout_for(c, image_region{0, 0, 1, 1}, 8, dct);
    l.x0 = l.x1 = l.y0 = 0;  // no block wanted
    l.y1 = plan.mcus_h;      // every MCU row walked
    (void)walk_scan(&c, plan, l, s, 0);  // storing nothing, it ends early only by a jump
    // libjpeg reads on to the end-of-image marker (jpeg_finish_decompress), and a file cut short
    // after its last MCU fails there: its 0xFF 0xD9 must follow the scan (entropy-coded data
    // never holds one: a 0xFF there is followed by 0x00 or a restart marker).
    const std::byte* end = bytes.data() + bytes.size();
    for (const std::byte* p = scan; p + 1 < end; ++p)
      if (p[0] == std::byte{0xFF} && p[1] == std::byte{0xD9}) return true;
    why = "no end-of-image marker after the scan (the file is cut short)";
    return false;
  }
  (void)jpeg_read_coefficients(&c);
  jpeg_finish_decompress(&c);
  return true;
}

}  // namespace detail

jpeg_pack_result pack_jpeg(std::span<const std::byte> bytes, const std::string& what, const jpeg_pack_options& options,
                           jpeg_packed& out) {
  if (bytes.size() < 2 || bytes[0] != std::byte{0xFF} || bytes[1] != std::byte{0xD8})
    return fell_back(jpeg_fallback::not_jpeg, "no start-of-image marker");
  scan_scratch& s = pinfeed::detail::thread_scratch<scan_scratch, struct jpeg_scan_tag>();
  for (auto& run : s.comp) run.clear();
  for (auto& rows : s.rows)
    for (auto& run : rows) run.clear();
  const auto st = std::make_unique<pack_state>();
  detail::install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st->cinfo), st->err);
  if (setjmp(st->err.jump)) return fell_back(jpeg_fallback::corrupt, st->err.message);
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  jpeg_decompress_struct& c = st->cinfo;
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&c, TRUE);
  if (options.max_pixels > 0 && std::int64_t{c.image_width} * c.image_height > options.max_pixels)
    throw pinfeed::runtime_error(what + ": " + std::to_string(c.image_width) + "x" + std::to_string(c.image_height) +
                                 " pixels, more than the limit of " + std::to_string(options.max_pixels));
  if (const jpeg_fallback f = detail::refuse_for_device(c, st->reason); f != jpeg_fallback::none) return fell_back(f, st->reason);
  const ops::jpeg_image shape = shape_of(c, checked_denom(options.scale_denom, what));
  if (const char* why = options.scale_denom == 1 ? nullptr : scaled_refusal(shape)) return fell_back(jpeg_fallback::sampling, why);
  const image_region w = decode_window(c, options, shape, what);
  const layout l = walk_layout(c, w, shape);
  mcu_plan plan;
  out.walked = plan_scan(c, s, plan);
  if (out.walked) {
    const walk_end e = walk_scan(&c, plan, l, s, options.max_bytes);
    if (e == walk_end::past_63) return fell_back(jpeg_fallback::corrupt, "a zero run past the block's 64th coefficient");
    if (e == walk_end::past_range) return fell_back(jpeg_fallback::range, kPastRange);
    if (e == walk_end::too_large)
      return fell_back(jpeg_fallback::too_large, "more than " + std::to_string(options.max_bytes) + " bytes of blocks");
  } else {
    if (!pack_read(c, jpeg_read_coefficients(&c), l, s, st->dense, st->packed, st->starts))
      return fell_back(jpeg_fallback::range, kPastRange);
  }
  // Before jpeg_finish_decompress(), which frees the tables libjpeg latched.
  if (!describe(c, l, w, !options.window.has_value(), s, shape, out))
    return fell_back(jpeg_fallback::corrupt, "a quantization table not defined");
  if (!out.walked) jpeg_finish_decompress(&c);
  if (std::any_of(out.quant.begin(), out.quant.end(), [](std::uint16_t q) { return q == 0 || q > 32767; }))
    return fell_back(jpeg_fallback::quantization, "a quantization step of 0 or past 32767");
  gather(s, l.components, out);
  if (options.max_bytes > 0 && out.slot_bytes() > options.max_bytes)
    return fell_back(jpeg_fallback::too_large, std::to_string(out.slot_bytes()) + " bytes, more than the " +
                                                   std::to_string(options.max_bytes) + " allowed");
  return {};
}

/// The probe's libjpeg state, its own copy of the file and tables, and the walk to make: the MCU
/// rows pack_jpeg() walks, no block stored.
struct jpeg_entropy_probe::state : detail::decompress_state {
  std::string what;
  std::vector<std::byte> bytes;
  scan_scratch scratch;
  mcu_plan plan;
  layout rows{};
  [[noreturn]] void failed() const { throw pinfeed::runtime_error(what + ": " + err.message); }
};

jpeg_entropy_probe::jpeg_entropy_probe(std::span<const std::byte> bytes, const std::string& what, const jpeg_pack_options& options) {
  jpeg_packed packed;
  const jpeg_pack_result r = pack_jpeg(bytes, what, options, packed);
  if (r.fallback != jpeg_fallback::none)
    throw pinfeed::runtime_error(what + ": the host half does not walk it (" + to_string(r.fallback) + ": " + r.reason + ")");
  if (!packed.walked) throw pinfeed::runtime_error(what + ": not one baseline scan of every component (libjpeg's reader reads it)");
  s_ = std::make_unique<state>();
  state& st = *s_;
  st.what = what;
  st.bytes.assign(bytes.begin(), bytes.end());
  install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&st.cinfo), st.err);
  if (setjmp(st.err.jump)) st.failed();
  jpeg_create_decompress(&st.cinfo);
  st.created = true;
  jpeg_decompress_struct& c = st.cinfo;
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(st.bytes.data()), static_cast<unsigned long>(st.bytes.size()));
  jpeg_read_header(&c, TRUE);
  const ops::jpeg_image shape = shape_of(c, options.scale_denom);
  st.rows = walk_layout(c, decode_window(c, options, shape, what), shape);
  st.rows.x0 = st.rows.x1 = 0;  // no block stored; rows down to the one after the window's last
  if (!plan_scan(c, st.scratch, st.plan)) throw pinfeed::logic_error(what + ": pack_jpeg walked a scan plan_scan refuses");
}

jpeg_entropy_probe::~jpeg_entropy_probe() = default;

void jpeg_entropy_probe::decode() {
  state& st = *s_;
  if (setjmp(st.err.jump)) st.failed();
  (void)walk_scan(&st.cinfo, st.plan, st.rows, st.scratch, 0);
}

jpeg_entropy_counts jpeg_entropy_probe::count() {
  state& st = *s_;
  if (setjmp(st.err.jump)) st.failed();
  const walk_counts n = count_scan(&st.cinfo, st.plan, std::min(st.rows.y1 + 1, st.plan.mcus_h));
  return {n.blocks, n.symbols, n.bits};
}

}  // namespace pinfeed::loaders
