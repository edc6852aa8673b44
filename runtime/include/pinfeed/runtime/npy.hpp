#pragma once
/// @file npy.hpp
/// NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian, C order).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed {

/// An array read from or written to an .npy file.
struct npy_array {
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  ///< C order, little-endian

  [[nodiscard]] std::size_t elements() const noexcept;
  template <class T>
  [[nodiscard]] const T* as() const noexcept { return reinterpret_cast<const T*>(data.data()); }
};

/// Reads `path`. Throws std::runtime_error naming the path and the problem for: a missing or
/// unreadable file, a bad magic string or version, a malformed header, Fortran order, a big-endian
/// or unsupported dtype, a negative or overflowing shape, and data shorter or longer than the shape
/// says.
[[nodiscard]] npy_array read_npy(const std::string& path);
/// The same for the bytes of an .npy file already in memory; `origin` names them in errors.
[[nodiscard]] npy_array parse_npy(std::span<const std::byte> bytes, const std::string& origin);

/// Writes `array` to `path` (format 1.0, or 2.0 when the header needs it). Throws
/// std::invalid_argument when data and shape disagree, std::runtime_error naming the path when the
/// file cannot be written.
void write_npy(const std::string& path, const npy_array& array);
/// The bytes write_npy() writes. Throws std::invalid_argument when data and shape disagree.
[[nodiscard]] std::vector<std::byte> format_npy(const npy_array& array);

/// Parses the header dictionary text of an .npy file (exposed for tests and fuzzing).
void parse_npy_header(const std::string& header, npy_array& out);

}  // namespace pinfeed
