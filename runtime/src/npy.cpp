#include "pinfeed/runtime/npy.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pinfeed/runtime/exception.hpp"

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
  throw pinfeed::invalid_argument("write_npy: dtype " + std::string(dtype_name(t)) + " has no .npy equivalent");
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
          throw pinfeed::runtime_error("Fortran-ordered arrays are not supported (fortran_order must be False)");
        have_order = true;
      } else if (key == "shape") {
        out.shape = shape_tuple();
        have_shape = true;
      } else {
        throw pinfeed::runtime_error("unexpected header key '" + key + "'");
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
      throw pinfeed::runtime_error("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  static dtype parse_descr(const std::string& d) {
    for (const auto& row : kDescr)
      if (d == row.text) return row.type;
    if (d.size() == 3 && d[0] == '<' && d[1] == 'u' && d[2] == '1') return dtype::u8;
    if (d.size() == 3 && d[0] == '<' && d[1] == 'i' && d[2] == '1') return dtype::i8;
    if (!d.empty() && d[0] == '>') throw pinfeed::runtime_error("big-endian dtype '" + d + "' is not supported");
    throw pinfeed::runtime_error("unsupported dtype '" + d + "'");
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw pinfeed::runtime_error("malformed header at character " + std::to_string(pos_) + ": " + what);
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

npy_array parse_npy(std::span<const std::byte> bytes, const std::string& origin) {
  auto fail = [&](const std::string& what) -> pinfeed::runtime_error {
    return pinfeed::runtime_error("npy file '" + origin + "': " + what);
  };
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::uint64_t file_size = bytes.size();
  if (file_size < 6 || std::memcmp(p, kMagic, 6) != 0) throw fail("not an .npy file (bad magic string)");
  if (file_size < 8) throw fail("truncated before the version");
  const unsigned major = p[6], minor = p[7];
  std::uint64_t header_len = 0, prefix = 10;
  if (major == 1) {
    if (file_size < 10) throw fail("truncated before the header length");
    header_len = p[8] | (static_cast<std::uint64_t>(p[9]) << 8);
  } else if (major == 2 || major == 3) {
    if (file_size < 12) throw fail("truncated before the header length");
    header_len = p[8] | (static_cast<std::uint64_t>(p[9]) << 8) | (static_cast<std::uint64_t>(p[10]) << 16) |
                 (static_cast<std::uint64_t>(p[11]) << 24);
    prefix = 12;
  } else {
    throw fail("unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (header_len > file_size - prefix)
    throw fail("header length " + std::to_string(header_len) + " runs past the end of the file");
  npy_array out;
  try {
    parse_npy_header(std::string(reinterpret_cast<const char*>(p + prefix), header_len), out);
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
  const auto* data = bytes.data() + prefix + header_len;
  out.data.assign(data, data + expected);
  return out;
}

npy_array read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw pinfeed::runtime_error("npy file '" + path + "': cannot open for reading");
  in.seekg(0, std::ios::end);
  const auto file_size = in.tellg();
  if (file_size < 0) throw pinfeed::runtime_error("npy file '" + path + "': cannot tell its size");
  in.seekg(0);
  std::vector<std::byte> bytes(static_cast<std::size_t>(file_size));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), file_size)) throw pinfeed::runtime_error("npy file '" + path + "': read error");
  return parse_npy(bytes, path);
}

std::vector<std::byte> format_npy(const npy_array& a) {
  std::size_t count = 1;
  for (auto d : a.shape) {
    if (d < 0) throw pinfeed::invalid_argument("write_npy: negative dimension " + std::to_string(d));
    if (d != 0 && count > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(d))
      throw pinfeed::invalid_argument("write_npy: the shape's element count overflows");
    count *= static_cast<std::size_t>(d);
  }
  if (count > std::numeric_limits<std::size_t>::max() / dtype_size(a.type))
    throw pinfeed::invalid_argument("write_npy: the shape's byte count overflows");
  if (count * dtype_size(a.type) != a.data.size())
    throw pinfeed::invalid_argument("write_npy: shape needs " + std::to_string(count * dtype_size(a.type)) +
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
  std::vector<std::byte> out;
  out.reserve(total + a.data.size());
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  put(kMagic, 6);
  const unsigned char version[2] = {static_cast<unsigned char>(v2 ? 2 : 1), 0};
  put(version, 2);
  const std::size_t len = dict.size();
  const unsigned char b[4] = {static_cast<unsigned char>(len & 0xFF), static_cast<unsigned char>((len >> 8) & 0xFF),
                              static_cast<unsigned char>((len >> 16) & 0xFF), static_cast<unsigned char>((len >> 24) & 0xFF)};
  put(b, v2 ? 4 : 2);
  put(dict.data(), dict.size());
  put(a.data.data(), a.data.size());
  return out;
}

void write_npy(const std::string& path, const npy_array& a) {
  const auto bytes = format_npy(a);
  detail::write_whole_file(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                           "npy file '" + path + "': cannot write");
}

}  // namespace pinfeed
