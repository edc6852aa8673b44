#include "jpeg_huffman.hpp"

#if PINFEED_HAVE_JPEG_HUFFMAN
#include <type_traits>

#include <jpegint.h>

#include "jpeg_entropy.hpp"

namespace pinfeed::loaders::detail {
namespace {

using namespace entropy;

struct decoder {
  reader in;
  restarts rst;
  int blocks;
  const table* dc[D_MAX_BLOCKS_IN_MCU];
  const table* ac[D_MAX_BLOCKS_IN_MCU];
  int component[D_MAX_BLOCKS_IN_MCU];
  table tables[2][kMaxTables];  // [dc, ac][table number]; kept between images
};

static_assert(std::is_trivially_destructible_v<decoder>, "a thread_local with a destructor registers it with glibc, which allocates (detail/thread_scratch.hpp)");
thread_local decoder state;
thread_local std::size_t scans = 0;

boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* mcu) {
  decoder& d = *static_cast<decoder*>(cinfo->client_data);
  reader in = d.in;
  before_mcu(cinfo, in, d.rst);
  if (mcu) {
    for (int b = 0; b < d.blocks; ++b) {
      block_sink sink{mcu[b][0]};
      decode_block(cinfo, in, *d.dc[b], *d.ac[b], d.rst.last_dc[d.component[b]], sink);
    }
  } else {
    skip_sink sink;
    for (int b = 0; b < d.blocks; ++b) decode_block(cinfo, in, *d.dc[b], *d.ac[b], d.rst.last_dc[d.component[b]], sink);
  }
  d.in = in;
  cinfo->src->next_input_byte = in.p;
  cinfo->src->bytes_in_buffer = static_cast<std::size_t>(in.end - in.p);
  return TRUE;
}

}  // namespace

bool use_pinfeed_huffman(j_decompress_ptr cinfo) {
  if (cinfo->progressive_mode || cinfo->arith_code || cinfo->data_precision != 8 || cinfo->entropy == nullptr ||
      cinfo->comps_in_scan != cinfo->num_components || cinfo->Ss != 0 || cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 ||
      cinfo->Al != 0 || cinfo->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || cinfo->input_scan_number != 1 ||
      cinfo->output_scanline != 0)
    return false;
  decoder& d = state;
  for (int b = 0; b < cinfo->blocks_in_MCU; ++b) {
    const int ci = cinfo->MCU_membership[b];
    const jpeg_component_info* comp = cinfo->cur_comp_info[ci];
    const int dn = comp->dc_tbl_no, an = comp->ac_tbl_no;
    if (dn < 0 || dn >= kMaxTables || an < 0 || an >= kMaxTables || !cinfo->dc_huff_tbl_ptrs[dn] ||
        !cinfo->ac_huff_tbl_ptrs[an])
      return false;  // libjpeg has already refused these; leave it to say so
    if (!build(d.tables[0][dn], *cinfo->dc_huff_tbl_ptrs[dn], false) ||
        !build(d.tables[1][an], *cinfo->ac_huff_tbl_ptrs[an], true))
      return false;
    d.dc[b] = &d.tables[0][dn];
    d.ac[b] = &d.tables[1][an];
    d.component[b] = ci;
  }
  d.blocks = cinfo->blocks_in_MCU;
  d.in = reader{cinfo->src->next_input_byte, cinfo->src->next_input_byte + cinfo->src->bytes_in_buffer, 0, 0, 0};
  d.rst.begin(cinfo->restart_interval);
  cinfo->client_data = &d;
  cinfo->entropy->decode_mcu = decode_mcu;
  ++scans;
  return true;
}

std::size_t pinfeed_huffman_scans() { return scans; }

}  // namespace pinfeed::loaders::detail

#else  // built without it: libjpeg-turbo's own decoder everywhere

namespace pinfeed::loaders::detail {
bool use_pinfeed_huffman(j_decompress_ptr) { return false; }
std::size_t pinfeed_huffman_scans() { return 0; }
}  // namespace pinfeed::loaders::detail

#endif
