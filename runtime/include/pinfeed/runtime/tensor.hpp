#pragma once
/// @file tensor.hpp
/// Element types, field declarations and non-owning tensor views.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pinfeed {

/// Element type of a field.
enum class dtype : std::uint8_t { u8, i8, u16, i16, i32, u32, i64, u64, f16, bf16, f32, f64 };

/// Bytes per element of `t`.
[[nodiscard]] std::size_t dtype_size(dtype t) noexcept;
/// The short name of `t` ("uint8", "int64", "float32", ...).
[[nodiscard]] std::string_view dtype_name(dtype t) noexcept;
/// Parses a name produced by dtype_name (also "u8", "i64", "f32", ...). Throws std::invalid_argument
/// naming the text when it is not a known type.
[[nodiscard]] dtype parse_dtype(std::string_view name);

/// A named field of every sample, with its per-sample shape and element type declared up front
/// (a batch of B samples has shape [B, shape...]).
struct field_spec {
  std::string name;
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape;  ///< per sample; empty = scalar

  [[nodiscard]] std::size_t elements() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept { return elements() * dtype_size(type); }
};

/// Checks a field list: non-empty, unique non-empty names, positive extents. Throws
/// std::invalid_argument naming the field and the bad value.
void validate_fields(std::span<const field_spec> fields);

/// Where a tensor's memory lives.
struct memory_location {
  enum class kind : std::uint8_t { host, cuda } where = kind::host;
  int device = -1;  ///< CUDA device index when where == cuda
  [[nodiscard]] bool is_cuda() const noexcept { return where == kind::cuda; }
};

/// A non-owning view of one field of a batch: `data` has shape `shape` (C order) and type `type`.
struct tensor_view {
  void* data = nullptr;
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape;
  memory_location location;

  [[nodiscard]] std::size_t elements() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept { return elements() * dtype_size(type); }
};

}  // namespace pinfeed
