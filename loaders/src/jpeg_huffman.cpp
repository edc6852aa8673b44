#include "jpeg_huffman.hpp"

#if PINFEED_HAVE_JPEG_HUFFMAN
#include <array>
#include <type_traits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <jerror.h>
#include <jpegint.h>

// How it is fast, against libjpeg-turbo 2.1's decoder:
// - a 10-bit lookahead (libjpeg: 8), so nearly every code is one table read;
// - for AC codes whose code and extra bits fit in those 10 bits, the table entry holds the
//   zero run, the coefficient's value and the bits to drop: one read decodes a coefficient;
// - where none of the next 8 bytes is 0xFF, the bit buffer refills without a branch, and one
//   refill serves up to four short codes, which keeps it off the chain from table read to table
//   read.
// The behaviour on valid streams is libjpeg's, bit for bit (tests compare every coefficient's
// effect, the pixels, on many streams). On corrupt streams it is stricter: where libjpeg-turbo's
// fast path reads a code that is in no table as symbol 0 without a word, this decoder stops with
// libjpeg's "bad Huffman code" error.

namespace pinfeed::loaders::detail {
namespace {

constexpr int kLook = 10;  // lookahead bits
constexpr int kMaxTables = NUM_HUFF_TBLS;

/// Zig-zag position -> natural (row-major) position, padded so that a corrupt zero run that
/// pushes the position past 63 writes coefficient 63, as libjpeg does.
/// Also the sink of the zero "coefficient" that the fast table's end-of-block entry stores at
/// zig-zag position k + 63 (see table::fast).
constexpr std::array<std::uint8_t, 128> kNatural = [] {
  std::array<std::uint8_t, 128> n{};
  int k = 0;
  for (int s = 0; s < 15; ++s)  // anti-diagonals x + y = s, alternating direction
    for (int i = 0; i <= s; ++i) {
      const int x = (s % 2 == 1) ? s - i : i, y = s - x;
      if (x < 8 && y < 8) n[static_cast<std::size_t>(k++)] = static_cast<std::uint8_t>(y * 8 + x);
    }
  for (std::size_t i = 64; i < n.size(); ++i) n[i] = 63;
  return n;
}();
static_assert(kNatural[1] == 1 && kNatural[2] == 8 && kNatural[3] == 16 && kNatural[63] == 63 && kNatural[127] == 63);

struct table {
  // The DHT contents the derived fields were built from (a cache key: most files share tables).
  std::array<std::uint8_t, 17> bits{};
  std::array<std::uint8_t, 256> huffval{};
  bool built = false, ac = false;
  /// Codes of up to kLook bits: (length << 8) | symbol, indexed by the next kLook bits; 0: longer.
  std::array<std::uint16_t, 1 << kLook> look{};
  /// Code plus extra bits within kLook: value * 65536 + (zero run << 8) + bits; 0: none.
  /// DC: every symbol (run 0). AC: every symbol, where the zero run of ZRL is 15 and its value
  /// 0 (skip 15, store a zero: 16 positions), and end-of-block stores a zero 63 positions on,
  /// which ends the block: a zero stored at a position not yet reached changes nothing, and
  /// positions past 63 land on 63, as a corrupt run does in libjpeg.
  std::array<std::int32_t, 1 << kLook> fast{};
  std::array<std::int32_t, 18> maxcode{};   // largest code of each length; -1: none
  std::array<std::int32_t, 17> valoffset{};  // symbol index = code + valoffset[length]
};

constexpr int extend(int v, int s) { return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v; }

/// Builds `t` from a DHT table; false where the table is bogus (as libjpeg's check).
bool build(table& t, const JHUFF_TBL& h, bool ac) {
  if (t.built && t.ac == ac && std::memcmp(t.bits.data(), h.bits, 17) == 0 &&
      std::memcmp(t.huffval.data(), h.huffval, 256) == 0)
    return true;
  t.built = false;
  std::memcpy(t.bits.data(), h.bits, 17);
  std::memcpy(t.huffval.data(), h.huffval, 256);
  t.ac = ac;
  std::array<std::uint16_t, 257> code_of{};
  std::array<std::uint8_t, 257> length_of{};
  int p = 0;
  std::int32_t code = 0;
  for (int l = 1; l <= 16; ++l) {
    const int n = h.bits[l];
    if (p + n > 256) return false;
    t.valoffset[static_cast<std::size_t>(l)] = p - code;
    for (int i = 0; i < n; ++i, ++p, ++code) {
      code_of[static_cast<std::size_t>(p)] = static_cast<std::uint16_t>(code);
      length_of[static_cast<std::size_t>(p)] = static_cast<std::uint8_t>(l);
    }
    t.maxcode[static_cast<std::size_t>(l)] = n ? code - 1 : -1;
    if (code >= (std::int32_t{1} << l)) return false;  // all-ones code, or too many codes
    code <<= 1;
  }
  t.maxcode[17] = 0x7FFFFFFF;
  if (!ac)
    for (int i = 0; i < p; ++i)
      if (h.huffval[i] > 15) return false;
  t.look.fill(0);
  for (int i = 0; i < p; ++i) {
    const int l = length_of[static_cast<std::size_t>(i)];
    if (l > kLook) continue;
    const int base = code_of[static_cast<std::size_t>(i)] << (kLook - l);
    for (int j = 0; j < (1 << (kLook - l)); ++j)
      t.look[static_cast<std::size_t>(base + j)] = static_cast<std::uint16_t>((l << 8) | h.huffval[i]);
  }
  for (int i = 0; i < (1 << kLook); ++i) {
    const int e = t.look[static_cast<std::size_t>(i)];
    std::int32_t f = 0;
    if (e != 0) {
      const int l = e >> 8, sym = e & 0xFF;
      int run = ac ? sym >> 4 : 0;
      const int s = ac ? sym & 15 : sym;
      if (ac && s == 0 && run != 15) run = 63;  // end of block
      if (l + s <= kLook) {
        const int v = s ? extend((i >> (kLook - l - s)) & ((1 << s) - 1), s) : 0;
        f = v * 65536 + (run << 8) + (l + s);
      }
    }
    t.fast[static_cast<std::size_t>(i)] = f;
  }
  t.built = true;
  return true;
}

/// The bit reader: `buf` holds `nbits` bits, first bit at the top. At a marker (or the end of the
/// data) it stops advancing and feeds zero bits, counted in `pad`: consuming any of them is the
/// "premature end of data segment" error, checked after every block.
struct reader {
  const JOCTET* p;
  const JOCTET* end;
  std::uint64_t buf;
  int nbits;
  int pad;

  /// Byte by byte to 56..63 bits: stuffed zero bytes, markers and the end of the data.
  void refill() {
    while (nbits < 56) {
      unsigned c = 0;
      if (pad == 0 && p < end) {
        c = *p;
        if (c != 0xFF)
          ++p;
        else if (end - p >= 2 && p[1] == 0)
          p += 2;  // stuffed zero byte
        else
          c = 0, pad = 8;  // a marker: stay on its 0xFF
      } else {
        pad += 8;
      }
      buf |= static_cast<std::uint64_t>(c) << (56 - nbits);
      nbits += 8;
    }
  }
  /// To at least 56 bits, without a branch where the next 8 bytes hold no 0xFF (the usual case):
  /// the bits of a byte only partly taken are ORed in again, unchanged, next time.
  void fill() {
    if (pad == 0 && end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      w = __builtin_bswap64(w);
      const std::uint64_t x = ~w;
      if (((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL) == 0) [[likely]] {
        buf |= w >> nbits;
        p += (63 - nbits) >> 3;
        nbits |= 56;
        return;
      }
    }
    if (nbits < 56) refill();
  }
  [[nodiscard]] unsigned peek(int n) const { return static_cast<unsigned>(buf >> (64 - n)); }
  void drop(int n) {
    buf <<= n;
    nbits -= n;
  }
};

struct decoder {
  reader in;
  int last_dc[MAX_COMPS_IN_SCAN];
  unsigned restarts_to_go;
  int next_restart;
  int blocks;
  const table* dc[D_MAX_BLOCKS_IN_MCU];
  const table* ac[D_MAX_BLOCKS_IN_MCU];
  int component[D_MAX_BLOCKS_IN_MCU];
  table tables[2][kMaxTables];  // [dc, ac][table number]; kept between images
};

static_assert(std::is_trivially_destructible_v<decoder>, "a thread_local with a destructor registers it with glibc, which allocates (detail/thread_scratch.hpp)");
thread_local decoder state;
thread_local std::size_t scans = 0;

[[noreturn]] void corrupt(j_decompress_ptr cinfo, int code, int p0 = 0, int p1 = 0) {
  cinfo->err->msg_code = code;
  cinfo->err->msg_parm.i[0] = p0;
  cinfo->err->msg_parm.i[1] = p1;
  (*cinfo->err->error_exit)(reinterpret_cast<j_common_ptr>(cinfo));
  std::abort();  // error_exit must not return
}

/// A symbol of a code too long for the lookahead table (or a bad code): libjpeg's canonical walk.
int decode_long(j_decompress_ptr cinfo, reader& in, const table& t) {
  int l = kLook + 1;
  auto code = static_cast<std::int32_t>(in.peek(l));
  while (code > t.maxcode[static_cast<std::size_t>(l)]) {
    if (++l > 16) corrupt(cinfo, JWRN_HUFF_BAD_CODE);
    code = static_cast<std::int32_t>(in.peek(l));
  }
  in.drop(l);
  return t.huffval[static_cast<std::size_t>((code + t.valoffset[static_cast<std::size_t>(l)]) & 0xFF)];
}

inline int decode_symbol(j_decompress_ptr cinfo, reader& in, const table& t) {
  const int e = t.look[in.peek(kLook)];
  if (e == 0) return decode_long(cinfo, in, t);
  in.drop(e >> 8);
  return e & 0xFF;
}

template <bool Store>
inline void decode_block(j_decompress_ptr cinfo, reader& in, const table& dct, const table& act, int& last_dc,
                         JCOEF* block) {
  in.fill();  // a symbol and its extra bits take at most 16 + 15 bits
  int diff;
  if (const std::int32_t f = dct.fast[in.peek(kLook)]; f != 0) {
    diff = f >> 16;
    in.drop(f & 0xFF);
  } else {
    const int s = decode_symbol(cinfo, in, dct);
    diff = 0;
    if (s) {
      diff = extend(static_cast<int>(in.peek(s)), s);
      in.drop(s);
    }
  }
  // Wraps like libjpeg's on hostile streams that keep adding 2047.
  last_dc = static_cast<int>(static_cast<unsigned>(last_dc) + static_cast<unsigned>(diff));
  if constexpr (Store) block[0] = static_cast<JCOEF>(last_dc);
  // One fill (>= 56 bits) serves up to four short codes (<= 10 bits each): the fill's shift by
  // the bit count is then off the chain from one table read to the next for three of the four.
  int k = 1;
  while (k < 64) {
    in.fill();
    for (int i = 0; i < 4; ++i) {
      if (const std::int32_t f = act.fast[in.peek(kLook)]; f != 0) [[likely]] {
        k += (f >> 8) & 0xFF;
        in.drop(f & 0xFF);
        if constexpr (Store) block[kNatural[static_cast<std::size_t>(k)]] = static_cast<JCOEF>(f >> 16);
        if (++k >= 64) goto end_of_block;
        continue;
      }
      in.fill();  // a long code and its extra bits take up to 16 + 15 bits
      const int sym = decode_symbol(cinfo, in, act);
      const int run = sym >> 4, s = sym & 15;
      if (s) {
        k += run;
        const int v = extend(static_cast<int>(in.peek(s)), s);
        in.drop(s);
        if constexpr (Store) block[kNatural[static_cast<std::size_t>(k)]] = static_cast<JCOEF>(v);
        ++k;
      } else if (run == 15) {
        k += 16;
      } else {
        goto end_of_block;
      }
      break;  // refill before the next
    }
  }
end_of_block:
  if (in.nbits < in.pad) corrupt(cinfo, JWRN_HIT_MARKER);
}

void process_restart(j_decompress_ptr cinfo, decoder& d) {
  reader& in = d.in;
  // What is left of the interval's data is its final byte's padding, under 8 bits; any more is
  // data the MCUs did not use (libjpeg: extraneous bytes before the marker).
  if (in.nbits - in.pad >= 8 || (in.pad == 0 && (in.p >= in.end || *in.p != 0xFF)))
    corrupt(cinfo, JWRN_EXTRANEOUS_DATA, (in.nbits - in.pad) / 8, in.p < in.end ? *in.p : 0);
  while (in.p < in.end && *in.p == 0xFF) ++in.p;  // the marker's 0xFF and any fill bytes
  const int marker = in.p < in.end ? *in.p : 0;
  if (marker != JPEG_RST0 + d.next_restart) corrupt(cinfo, JWRN_MUST_RESYNC, marker, d.next_restart);
  ++in.p;
  in.buf = 0;
  in.nbits = 0;
  in.pad = 0;
  for (int& dc : d.last_dc) dc = 0;
  d.restarts_to_go = cinfo->restart_interval;
  d.next_restart = (d.next_restart + 1) & 7;
}

boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* mcu) {
  decoder& d = *static_cast<decoder*>(cinfo->client_data);
  if (cinfo->restart_interval) {
    if (d.restarts_to_go == 0) process_restart(cinfo, d);
    --d.restarts_to_go;
  }
  reader in = d.in;
  if (mcu)
    for (int b = 0; b < d.blocks; ++b)
      decode_block<true>(cinfo, in, *d.dc[b], *d.ac[b], d.last_dc[d.component[b]], mcu[b][0]);
  else
    for (int b = 0; b < d.blocks; ++b)
      decode_block<false>(cinfo, in, *d.dc[b], *d.ac[b], d.last_dc[d.component[b]], nullptr);
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
  for (int& dc : d.last_dc) dc = 0;
  d.restarts_to_go = cinfo->restart_interval;
  d.next_restart = 0;
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
