#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>


#include "pinfeed/runtime/npy.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {

/// A path in this test run's scratch directory (removed at exit).
std::string temp_path(const std::string& name) {
  static const test::temp_dir scratch;
  return (scratch.path / name).string();
}

/// Writes an .npy file by hand: version 1 header `dict` (padded), then `data_bytes` bytes.
std::string handmade(const std::string& name, const std::string& dict, std::size_t data_bytes, int major = 1) {
  const std::string path = temp_path(name);
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY", 6);
  out.put(static_cast<char>(major));
  out.put(0);
  const std::size_t len = header.size();
  out.put(static_cast<char>(len & 0xFF));
  out.put(static_cast<char>((len >> 8) & 0xFF));
  if (major != 1) {
    out.put(0);
    out.put(0);
  }
  out << header;
  for (std::size_t i = 0; i < data_bytes; ++i) out.put(static_cast<char>(i));
  return path;
}

}  // namespace

TEST_CASE("npy.roundtrip") {
  for (auto shape : {std::vector<std::int64_t>{5}, std::vector<std::int64_t>{3, 4}, std::vector<std::int64_t>{},
                     std::vector<std::int64_t>{2, 0, 3}, std::vector<std::int64_t>{2, 3, 4, 5}}) {
    for (auto t : {dtype::i64, dtype::i32, dtype::u8, dtype::f32, dtype::f64, dtype::i16}) {
      npy_array a;
      a.type = t;
      a.shape = shape;
      a.data.resize(a.elements() * dtype_size(t));
      for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::byte>(i * 7);
      const auto path = temp_path("rt.npy");
      write_npy(path, a);
      const auto b = read_npy(path);
      CHECK(b.type == t);
      CHECK(b.shape == shape);
      CHECK(b.data == a.data);
      // Files are laid out as numpy does: data starts on a 64-byte boundary.
      CHECK(std::filesystem::file_size(path) % 64 == a.data.size() % 64);
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("npy.reads_numpy_style_headers") {
  auto p = handmade("v1.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 48);
  auto a = read_npy(p);
  CHECK(a.type == dtype::i64);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(static_cast<int>(a.data[5]) == 5);
  std::filesystem::remove(p);
  p = handmade("v2.npy", "{\"descr\":\"<i4\",\"shape\":(7,),\"fortran_order\":False}", 28, 2);
  a = read_npy(p);
  CHECK(a.type == dtype::i32);
  CHECK(a.shape == std::vector<std::int64_t>{7});
  std::filesystem::remove(p);
}

TEST_CASE("npy.bad_files_name_path_and_problem") {
  auto expect = [](const std::string& path, const char* needle) {
    CAPTURE(needle);
    CHECK_THROWS_WITH_AS((void)read_npy(path), doctest::Contains(needle), std::runtime_error);
    CHECK_THROWS_WITH_AS((void)read_npy(path), doctest::Contains(path.c_str()), std::runtime_error);
    std::filesystem::remove(path);
  };
  expect(temp_path("missing.npy"), "cannot open");
  {
    const auto p = temp_path("magic.npy");
    std::ofstream(p) << "PK\x03\x04 not numpy";
    expect(p, "bad magic");
  }
  expect(handmade("short.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }", 79), "truncated");
  expect(handmade("long.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 17), "1 more");
  expect(handmade("fortran.npy", "{'descr': '<i8', 'fortran_order': True, 'shape': (2,), }", 16), "Fortran");
  expect(handmade("big.npy", "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", 16), "big-endian");
  expect(handmade("complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16), "unsupported dtype '<c8'");
  expect(handmade("noshape.npy", "{'descr': '<i8', 'fortran_order': False, }", 16), "lacks");
  expect(handmade("badtuple.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2; 3), }", 48), "malformed");
  expect(handmade("negative.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (-2,), }", 16), "non-negative");
  expect(handmade("overflow.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,), }", 16),
         "overflows");
  expect(handmade("huge.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 16),
         "overflows");
  expect(handmade("version.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16, 9), "version 9");
  {
    const auto p = temp_path("header_past_end.npy");
    std::ofstream out(p, std::ios::binary);
    out.write("\x93NUMPY\x01\x00\xff\x7f{'descr'", 17);
    out.close();
    expect(p, "runs past the end");
  }
}

TEST_CASE("npy.write_rejects_inconsistent_arrays") {
  npy_array a;
  a.type = dtype::i64;
  a.shape = {3};
  a.data.resize(16);
  CHECK_THROWS_WITH_AS(write_npy(temp_path("x.npy"), a), doctest::Contains("needs 24 bytes, data has 16"),
                       std::invalid_argument);
  a.type = dtype::bf16;
  a.data.resize(6);
  CHECK_THROWS_WITH_AS(write_npy(temp_path("x.npy"), a), doctest::Contains("bfloat16"), std::invalid_argument);
  a.type = dtype::u8;
  a.data.resize(3);
  CHECK_THROWS_WITH_AS(write_npy("/nonexistent-dir/x.npy", a), doctest::Contains("/nonexistent-dir/x.npy"),
                       std::runtime_error);
}
