#include "pinfeed/runtime/npy.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace pinfeed {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct descr_row {
  const char* text;
  dtype type;
};
// '|' (not applicable) for single bytes, '<' little-endian otherwise.
constexpr descr_row kDescr[] = {
    {"|u1", dtype::u8},  {"|i1", dtype::i8},  {"<u2", dtype::u16}, {"<i2", dtype::i16},
    {"<i4", dtype::i32}, {"<u4", dtype::u32}, {"<i8", dtype::i64}, {"<u8", dtype::u64},
    {"<f2", dtype::f16}, {"<f4", dtype::f32}, {"<f8", dtype::f64},
};

std::string descr_of(dtype t) {
  for (const auto& d : kDescr)
    if (d.type == t) return d.text;
  throw std::invalid_argument("write_npy: dtype " + std::string(dtype_name(t)) + " has no .npy equivalent");
}

/// A tiny parser for the Python-literal dict of an .npy header.
class header_parser {
 public:
  explicit header_parser(const std::string& s) : s_(s) {}

  void parse(npy_array& out) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        const std::string d = string_literal();
        out.type = parse_descr(d);
        have_descr = true;
      } else if (key == "fortran_order") {
        if (word() != "False")
          throw std::runtime_error("Fortran-ordered arrays are not supported (fortran_order must be False)");
        have_order = true;
      } else if (key == "shape") {
        out.shape = shape_tuple();
        have_shape = true;
      } else {
        throw std::runtime_error("unexpected header key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      if (peek() == '}') break;
      fail("expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape)
      throw std::runtime_error("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  static dtype parse_descr(const std::string& d) {
    for (const auto& row : kDescr)
      if (d == row.text) return row.type;
    if (d.size() == 3 && d[0] == '<' && d[1] == 'u' && d[2] == '1') return dtype::u8;
    if (d.size() == 3 && d[0] == '<' && d[1] == 'i' && d[2] == '1') return dtype::i8;
    if (!d.empty() && d[0] == '>') throw std::runtime_error("big-endian dtype '" + d + "' is not supported");
    throw std::runtime_error("unsupported dtype '" + d + "'");
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("malformed header at character " + std::to_string(pos_) + ": " + what);
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string v = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return v;
  }
  std::string word() {
    skip_ws();
    const std::size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::vector<std::int64_t> shape_tuple() {
    expect('(');
    std::vector<std::int64_t> shape;
    for (;;) {
      skip_ws();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a non-negative dimension");
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int digit = s_[pos_++] - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("dimension overflows int64");
        v = v * 10 + digit;
      }
      if (peek() == 'L') ++pos_;  // Python 2 longs
      shape.push_back(v);
      skip_ws();
      if (peek() == ',') ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in shape");
    }
  }

  const std::string& s_;
  std::size_t pos_ = 0;
};

}  // namespace

std::size_t npy_array::elements() const noexcept {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

void parse_npy_header(const std::string& header, npy_array& out) { header_parser(header).parse(out); }

npy_array read_npy(const std::string& path) {
  auto fail = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("npy file '" + path + "': " + what);
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail("cannot open for reading");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  char magic[6];
  std::uint8_t version[2];
  if (!in.read(magic, 6) || std::memcmp(magic, kMagic, 6) != 0) throw fail("not an .npy file (bad magic string)");
  if (!in.read(reinterpret_cast<char*>(version), 2)) throw fail("truncated before the version");
  std::uint64_t header_len = 0;
  std::uint64_t prefix = 10;
  if (version[0] == 1) {
    std::uint8_t b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw fail("truncated before the header length");
    header_len = b[0] | (static_cast<std::uint64_t>(b[1]) << 8);
  } else if (version[0] == 2 || version[0] == 3) {
    std::uint8_t b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw fail("truncated before the header length");
    header_len = b[0] | (static_cast<std::uint64_t>(b[1]) << 8) | (static_cast<std::uint64_t>(b[2]) << 16) |
                 (static_cast<std::uint64_t>(b[3]) << 24);
    prefix = 12;
  } else {
    throw fail("unsupported format version " + std::to_string(version[0]) + "." + std::to_string(version[1]));
  }
  if (prefix + header_len > file_size)
    throw fail("header length " + std::to_string(header_len) + " runs past the end of the file");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  npy_array out;
  try {
    parse_npy_header(header, out);
  } catch (const std::runtime_error& e) {
    throw fail(e.what());
  }
  std::uint64_t count = 1;
  for (auto d : out.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d))
      throw fail("shape overflows");
    count *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t esize = dtype_size(out.type);
  if (count > std::numeric_limits<std::uint64_t>::max() / esize) throw fail("shape overflows");
  const std::uint64_t expected = count * esize, available = file_size - prefix - header_len;
  if (available < expected)
    throw fail("truncated: the shape needs " + std::to_string(expected) + " bytes of data, the file has " +
               std::to_string(available));
  if (available > expected)
    throw fail("the shape needs " + std::to_string(expected) + " bytes of data but the file has " +
               std::to_string(available - expected) + " more");
  out.data.resize(expected);
  if (!in.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(expected)))
    throw fail("read error");
  return out;
}

void write_npy(const std::string& path, const npy_array& a) {
  std::size_t count = 1;
  for (auto d : a.shape) {
    if (d < 0) throw std::invalid_argument("write_npy: negative dimension " + std::to_string(d));
    count *= static_cast<std::size_t>(d);
  }
  if (count * dtype_size(a.type) != a.data.size())
    throw std::invalid_argument("write_npy: shape needs " + std::to_string(count * dtype_size(a.type)) +
                                " bytes, data has " + std::to_string(a.data.size()));
  std::string dict = "{'descr': '" + descr_of(a.type) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < a.shape.size(); ++i) dict += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
  dict += "), }";
  // Pad with spaces and a newline so data starts on a 64-byte boundary.
  const bool v2 = dict.size() + 11 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("npy file '" + path + "': cannot open for writing");
  out.write(kMagic, 6);
  const char version[2] = {static_cast<char>(v2 ? 2 : 1), 0};
  out.write(version, 2);
  const std::size_t len = dict.size();
  if (v2) {
    const char b[4] = {static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF),
                       static_cast<char>((len >> 16) & 0xFF), static_cast<char>((len >> 24) & 0xFF)};
    out.write(b, 4);
  } else {
    const char b[2] = {static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF)};
    out.write(b, 2);
  }
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(a.data.data()), static_cast<std::streamsize>(a.data.size()));
  if (!out) throw std::runtime_error("npy file '" + path + "': write failed");
}

}  // namespace pinfeed
