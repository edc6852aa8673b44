// pinfeed's scan walker (jpeg_walk.hpp). Nothing here owns anything across a call that may jump
// (decode_block and before_mcu report errors through libjpeg's error_exit): the buffers live in
// the caller's scan_scratch.
#include "jpeg_walk.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <csetjmp>
#include <new>

#include "jpeg_error_jump.hpp"
#include "pinfeed/ops/detail/jpeg_compact.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"

namespace pinfeed::loaders::detail {

using namespace entropy;

namespace {

/// The IDCT's gain from each coefficient to a sample, in 1/4096ths, rounded up: a sample before
/// the range limit is at most sum |coefficient x step x gain| in magnitude, gain(u, v) =
/// C(u) C(v) m(u) m(v) / 4 with C(0) = 1/sqrt(2), C(u) = 1 and m(u) = max over x of
/// |cos((2x + 1) u pi / 16)|. Natural order.
const std::array<std::int64_t, 64>& idct_gain() {
  static const std::array<std::int64_t, 64> gain = [] {
    std::array<std::int64_t, 64> g{};
    const auto factor = [](int u) {
      double most = 0;
      for (int x = 0; x < 8; ++x) most = std::max(most, std::fabs(std::cos((2 * x + 1) * u * 3.14159265358979323846 / 16)));
      return (u == 0 ? 1 / std::sqrt(2.0) : 1.0) * most;
    };
    for (int u = 0; u < 8; ++u)
      for (int v = 0; v < 8; ++v) g[static_cast<std::size_t>(u * 8 + v)] = static_cast<std::int64_t>(std::ceil(factor(u) * factor(v) / 4 * 4096));
    return g;
  }();
  return gain;
}

/// Whether the compact block of `size` bytes at `block` decodes the same on every host at IDCT size `dct`.
bool same_on_every_host(const std::uint8_t* block, std::size_t size, const std::uint16_t* quant, int dct) {
  std::int16_t dense[64];
  ops::unpack_jpeg_blocks({block, size}, 1, dense);
  return ops::jpeg_block_same_on_every_host(dense, quant, dct);
}

/// Writes the coefficients decode_block() gives as one block of the compact form, and bounds its
/// samples (kMostGain).
struct compact_sink {
  std::uint8_t* p;
  const std::int64_t* gain;  ///< the component's gain_table
  std::int64_t bound = 0;
  std::int32_t last = -1;  ///< the zigzag index written last
  bool past_63 = false;  ///< a nonzero value past index 63 (a corrupt zero run): libjpeg keeps it at 63
  void put(int k, int v) {
    const auto c = static_cast<std::int16_t>(v);
    if (c == 0) return;
    if (k > 63) {
      past_63 = true;
      return;
    }
    bound += (c < 0 ? -std::int64_t{c} : std::int64_t{c}) * gain[k];
    p = ops::jpeg::pack_coefficient(p, last, k, c);
    last = k;
  }
};

std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) { return static_cast<std::uint32_t>((a + b - 1) / b); }

/// libjpeg's standard Huffman tables (the JPEG standard's K.3: DC and AC, luminance and
/// chrominance), as its compressor's defaults hold them.
struct standard_tables {
  JHUFF_TBL dc[2], ac[2];
};
const standard_tables& standard() {
  static const standard_tables tables = [] {
    standard_tables t{};
    jpeg_compress_struct c{};
    jpeg_error_jump err{};
    install_error_jump(*reinterpret_cast<jpeg_common_struct*>(&c), err);
    if (setjmp(err.jump)) {  // only libjpeg's allocator failing
      jpeg_destroy_compress(&c);
      throw std::bad_alloc();
    }
    jpeg_create_compress(&c);
    c.in_color_space = JCS_RGB;
    c.input_components = 3;
    jpeg_set_defaults(&c);
    for (int k = 0; k < 2; ++k) {
      t.dc[k] = *c.dc_huff_tbl_ptrs[k];
      t.ac[k] = *c.ac_huff_tbl_ptrs[k];
    }
    jpeg_destroy_compress(&c);
    return t;
  }();
  return tables;
}

/// The table a scan uses: the file's, or where the file defines none, libjpeg's standard one for
/// slots 0 and 1 (libjpeg's decoder installs those for Motion-JPEG frames, which leave them out);
/// nothing for other slots (libjpeg refuses those files).
const JHUFF_TBL* huffman_table(const JHUFF_TBL* defined, int slot, bool dc) {
  if (defined != nullptr) return defined;
  if (slot > 1) return nullptr;
  return dc ? &standard().dc[slot] : &standard().ac[slot];
}

/// Decodes one MCU at (mx, my), writing the blocks of `l` compact.
void walk_mcu(j_decompress_ptr cinfo, reader& in, restarts& rst, const mcu_plan& p, const layout& l, scan_scratch& s,
              std::uint32_t mx, std::uint32_t my, bool& past_63, bool& past_range) {
  const bool wanted = my >= l.y0 && my < l.y1 && mx >= l.x0 && mx < l.x1;
  for (int b = 0; b < p.blocks; ++b) {
    const int k = p.comp[b];
    const std::uint32_t bx = mx * static_cast<std::uint32_t>(l.h[k]) + static_cast<std::uint32_t>(p.dx[b]);
    const std::uint32_t by = my * static_cast<std::uint32_t>(l.v[k]) + static_cast<std::uint32_t>(p.dy[b]);
    if (!wanted || bx >= l.wib[k] || by >= l.hib[k]) {
      skip_sink skip;
      decode_block(cinfo, in, *p.dc[b], *p.ac[b], rst.last_dc[p.scan[b]], skip);
      continue;
    }
    byte_run& run = l.v[k] == 1 ? s.comp[k] : s.rows[k][p.dy[b]];
    compact_sink sink{run.room(kMostBlockBytes), p.gain[k]};
    decode_block(cinfo, in, *p.dc[b], *p.ac[b], rst.last_dc[p.scan[b]], sink);
    *sink.p++ = ops::jpeg::kEndOfBlock;
    run.starts.push_back(static_cast<std::uint32_t>(run.n));
    run.n = static_cast<std::size_t>(sink.p - run.v.data());
    past_63 = past_63 || sink.past_63;
    if (sink.bound > kMostGain && !past_range)
      past_range = !same_on_every_host(run.v.data() + run.starts.back(), run.n - run.starts.back(), p.quant[k], l.dct[k]);
  }
}

}  // namespace

/// Each step of table `q` (natural order) times its gain, in zigzag order.
void gain_table(const JQUANT_TBL& q, std::int64_t* out) {
  for (int z = 0; z < 64; ++z) {
    const int n = kNatural[static_cast<std::size_t>(z)];
    out[z] = std::int64_t{q.quantval[n]} * idct_gain()[static_cast<std::size_t>(n)];
  }
}

/// The layout for `window` at `scale` (jpeg_walk.hpp).
layout layout_for(const jpeg_decompress_struct& c, const image_region& w, int scale, const int* dct) {
  layout l{};
  l.components = c.num_components;
  const bool grey = c.num_components == 1;
  const int mh = grey ? 1 : c.max_h_samp_factor, mv = grey ? 1 : c.max_v_samp_factor;
  for (int k = 0; k < l.components; ++k) {
    l.h[k] = grey ? 1 : c.comp_info[k].h_samp_factor;
    l.v[k] = grey ? 1 : c.comp_info[k].v_samp_factor;
    l.wib[k] = c.comp_info[k].width_in_blocks;
    l.hib[k] = c.comp_info[k].height_in_blocks;
    l.dct[k] = dct[k];
  }
  // An iMCU in the decode's pixels; one chroma sample (at most mh x mv of them) more on each side
  // than the window's (the upsampler's neighbours).
  const auto sc = static_cast<std::uint32_t>(scale);
  const std::uint32_t iw = sc * static_cast<std::uint32_t>(mh), ih = sc * static_cast<std::uint32_t>(mv);
  const auto first = [](std::int64_t at, int m, std::uint32_t size) {
    return at >= m ? static_cast<std::uint32_t>((at - m) / size) : 0u;
  };
  l.x0 = first(w.x, mh, iw);
  l.y0 = first(w.y, mv, ih);
  l.x1 = std::min(ceil_div(c.image_width, 8 * static_cast<std::uint64_t>(mh)), static_cast<std::uint32_t>((w.x + w.width - 1 + mh) / iw + 1));
  l.y1 = std::min(ceil_div(c.image_height, 8 * static_cast<std::uint64_t>(mv)), static_cast<std::uint32_t>((w.y + w.height - 1 + mv) / ih + 1));
  return l;
}

/// The plan of the scan jpeg_read_header() stopped at, or false where it is not one baseline scan
/// of every component whose tables are all there (libjpeg's reader then reads the file).
bool plan_scan(const jpeg_decompress_struct& c, scan_scratch& s, mcu_plan& p) {
  if (c.progressive_mode || c.comps_in_scan != c.num_components || c.Ss != 0 || c.Se != DCTSIZE2 - 1 || c.Ah != 0 || c.Al != 0)
    return false;
  const bool interleaved = c.comps_in_scan > 1;
  for (int i = 0; i < c.comps_in_scan; ++i) {
    const jpeg_component_info* ci = c.cur_comp_info[i];
    const int dn = ci->dc_tbl_no, an = ci->ac_tbl_no;
    if (dn < 0 || dn >= NUM_HUFF_TBLS || an < 0 || an >= NUM_HUFF_TBLS) return false;
    const JHUFF_TBL* dt = huffman_table(c.dc_huff_tbl_ptrs[dn], dn, true);
    const JHUFF_TBL* at = huffman_table(c.ac_huff_tbl_ptrs[an], an, false);
    if (dt == nullptr || at == nullptr || !build(s.tables[0][dn], *dt, false) || !build(s.tables[1][an], *at, true)) return false;
    const int t = ci->quant_tbl_no;
    if (t < 0 || t >= NUM_QUANT_TBLS || c.quant_tbl_ptrs[t] == nullptr || ci->component_index < 0 || ci->component_index >= 3)
      return false;
    gain_table(*c.quant_tbl_ptrs[t], p.gain[ci->component_index]);
    for (int i = 0; i < 64; ++i) p.quant[ci->component_index][i] = c.quant_tbl_ptrs[t]->quantval[i];
    const int h = interleaved ? ci->h_samp_factor : 1, v = interleaved ? ci->v_samp_factor : 1;
    for (int dy = 0; dy < v; ++dy)
      for (int dx = 0; dx < h; ++dx) {
        if (p.blocks == D_MAX_BLOCKS_IN_MCU) return false;
        p.comp[p.blocks] = ci->component_index;
        p.scan[p.blocks] = i;
        p.dx[p.blocks] = dx;
        p.dy[p.blocks] = dy;
        p.dc[p.blocks] = &s.tables[0][dn];
        p.ac[p.blocks] = &s.tables[1][an];
        ++p.blocks;
      }
  }
  if (interleaved) {
    p.mcus_w = ceil_div(c.image_width, 8 * static_cast<std::uint64_t>(c.max_h_samp_factor));
    p.mcus_h = ceil_div(c.image_height, 8 * static_cast<std::uint64_t>(c.max_v_samp_factor));
  } else {
    p.mcus_w = c.cur_comp_info[0]->width_in_blocks;
    p.mcus_h = c.cur_comp_info[0]->height_in_blocks;
  }
  return true;
}

/// Walks the scan down to the iMCU row after the layout's last (libjpeg's upsampler reads the
/// next iMCU row as context, so the host decode of the window reads that far, and corrupt data
/// there fails it: the walker must not take what the host decode refuses); the components'
/// blocks end in s.comp.
walk_end walk_scan(j_decompress_ptr cinfo, const mcu_plan& p, const layout& l, scan_scratch& s, std::uint64_t max_bytes) {
  reader in{cinfo->src->next_input_byte, cinfo->src->next_input_byte + cinfo->src->bytes_in_buffer, 0, 0, 0};
  restarts rst{};
  rst.begin(cinfo->restart_interval);
  bool past_63 = false, past_range = false;
  for (std::uint32_t my = 0; my <= l.y1 && my < p.mcus_h; ++my) {
    for (std::uint32_t mx = 0; mx < p.mcus_w; ++mx) {
      before_mcu(cinfo, in, rst);
      walk_mcu(cinfo, in, rst, p, l, s, mx, my, past_63, past_range);
    }
    std::uint64_t total = 0;
    for (int k = 0; k < l.components; ++k) {
      for (int dy = 0; l.v[k] > 1 && dy < l.v[k]; ++dy) {
        s.comp[k].append(s.rows[k][dy]);
        s.rows[k][dy].clear();
      }
      total += s.comp[k].n + s.comp[k].starts.size() * sizeof(std::uint32_t);
    }
    if (past_63) return walk_end::past_63;
    if (past_range) return walk_end::past_range;
    if (max_bytes > 0 && total > max_bytes) return walk_end::too_large;
  }
  return walk_end::walked;
}

/// The blocks, symbols and scan bits of the first `rows` MCU rows, one symbol at a time (jpeg_walk.hpp).
walk_counts count_scan(j_decompress_ptr cinfo, const mcu_plan& p, std::uint32_t rows) {
  const JOCTET* start = cinfo->src->next_input_byte;
  reader in{start, start + cinfo->src->bytes_in_buffer, 0, 0, 0};
  restarts rst{};
  rst.begin(cinfo->restart_interval);
  walk_counts n;
  const auto extra = [&](int s) {  // a symbol's extra bits
    in.fill();
    in.drop(s);
  };
  for (std::uint32_t my = 0; my < rows && my < p.mcus_h; ++my)
    for (std::uint32_t mx = 0; mx < p.mcus_w; ++mx) {
      before_mcu(cinfo, in, rst);
      for (int b = 0; b < p.blocks; ++b, ++n.blocks) {
        in.fill();
        extra(decode_symbol(cinfo, in, *p.dc[b]));
        ++n.symbols;
        for (int k = 1; k < 64; ++n.symbols) {
          in.fill();
          const int sym = decode_symbol(cinfo, in, *p.ac[b]), run = sym >> 4, s = sym & 15;
          if (s == 0 && run != 15) {
            ++n.symbols;
            break;
          }
          extra(s);
          k += run + 1;
        }
        if (in.nbits < in.pad) corrupt(cinfo, JWRN_HIT_MARKER);
      }
    }
  n.bits = static_cast<std::uint64_t>(in.p - start) * 8 - static_cast<std::uint64_t>(in.nbits - in.pad);
  return n;
}

}  // namespace pinfeed::loaders::detail
