#pragma once
// pinfeed's Huffman decoding of baseline JPEG scans, shared by the decoder plugged into libjpeg
// (jpeg_huffman.cpp) and the host half of hybrid decoding, which walks a scan itself
// (jpeg_scan.cpp). It needs only libjpeg's public header. Errors go through
// cinfo->err->error_exit with libjpeg's own message codes.
//
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

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <jpeglib.h>
#include <jerror.h>

namespace pinfeed::loaders::detail::entropy {

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
inline bool build(table& t, const JHUFF_TBL& h, bool ac) {
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


[[noreturn]] inline void corrupt(j_decompress_ptr cinfo, int code, int p0 = 0, int p1 = 0) {
  cinfo->err->msg_code = code;
  cinfo->err->msg_parm.i[0] = p0;
  cinfo->err->msg_parm.i[1] = p1;
  (*cinfo->err->error_exit)(reinterpret_cast<j_common_ptr>(cinfo));
  std::abort();  // error_exit must not return
}

/// A symbol of a code too long for the lookahead table (or a bad code): libjpeg's canonical walk.
inline int decode_long(j_decompress_ptr cinfo, reader& in, const table& t) {
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

/// Decodes one block's coefficients, giving each to `sink.put(k, value)` with its zigzag index k:
/// the DC value (k 0, the running sum), then the AC values in order. Zeros are given too: the
/// zero that a ZRL code stands for, and at an end of block a zero at k + 63 (past 63). Sinks
/// that store map k through kNatural, which sends every k past 63 to 63, as libjpeg does with a
/// corrupt zero run.
template <class Sink>
inline void decode_block(j_decompress_ptr cinfo, reader& in, const table& dct, const table& act, int& last_dc, Sink& sink) {
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
  sink.put(0, last_dc);
  // One fill (>= 56 bits) serves up to four short codes (<= 10 bits each): the fill's shift by
  // the bit count is then off the chain from one table read to the next for three of the four.
  int k = 1;
  while (k < 64) {
    in.fill();
    for (int i = 0; i < 4; ++i) {
      if (const std::int32_t f = act.fast[in.peek(kLook)]; f != 0) [[likely]] {
        k += (f >> 8) & 0xFF;
        in.drop(f & 0xFF);
        sink.put(k, f >> 16);
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
        sink.put(k, v);
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

/// Stores into a libjpeg block (natural order), as libjpeg's decoder does.
struct block_sink {
  JCOEF* block;
  void put(int k, int v) const { block[kNatural[static_cast<std::size_t>(k)]] = static_cast<JCOEF>(v); }
};
/// Only reads (blocks outside what is wanted).
struct skip_sink {
  void put(int, int) const {}
};

/// The restart state of a scan: MCUs left in the interval, the next marker's number, the
/// components' DC predictions.
struct restarts {
  unsigned to_go;
  int next;
  int last_dc[MAX_COMPS_IN_SCAN];
  void begin(unsigned interval) {
    to_go = interval;
    next = 0;
    for (int& dc : last_dc) dc = 0;
  }
};

/// Before each MCU: at the end of a restart interval, reads the marker (which must be the next
/// one, after no more data than the interval's last byte's padding) and starts the next interval.
inline void before_mcu(j_decompress_ptr cinfo, reader& in, restarts& r) {
  if (cinfo->restart_interval == 0) return;
  if (r.to_go == 0) {
    // What is left of the interval's data is its final byte's padding, under 8 bits; any more is
    // data the MCUs did not use (libjpeg: extraneous bytes before the marker).
    if (in.nbits - in.pad >= 8 || (in.pad == 0 && (in.p >= in.end || *in.p != 0xFF)))
      corrupt(cinfo, JWRN_EXTRANEOUS_DATA, (in.nbits - in.pad) / 8, in.p < in.end ? *in.p : 0);
    while (in.p < in.end && *in.p == 0xFF) ++in.p;  // the marker's 0xFF and any fill bytes
    const int marker = in.p < in.end ? *in.p : 0;
    if (marker != JPEG_RST0 + r.next) corrupt(cinfo, JWRN_MUST_RESYNC, marker, r.next);
    ++in.p;
    in.buf = 0;
    in.nbits = 0;
    in.pad = 0;
    for (int& dc : r.last_dc) dc = 0;
    r.to_go = cinfo->restart_interval;
    r.next = (r.next + 1) & 7;
  }
  --r.to_go;
}

}  // namespace pinfeed::loaders::detail::entropy
