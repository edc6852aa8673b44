#pragma once
/// @file tensor.hpp
/// Element types, field declarations and non-owning tensor views.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pinfeed/runtime/exception.hpp"

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

/// Dimensions a field may have per sample (a batch adds one).
inline constexpr std::size_t kMaxFieldRank = 7;

/// The shape of a tensor_view: up to kMaxFieldRank + 1 extents held inline, so handing out a view
/// allocates nothing.
class tensor_shape {
 public:
  static constexpr std::size_t kCapacity = kMaxFieldRank + 1;
  tensor_shape() noexcept = default;
  tensor_shape(std::initializer_list<std::int64_t> extents) {
    for (auto e : extents) push_back(e);
  }
  /// Appends an extent; throws std::length_error past kCapacity.
  void push_back(std::int64_t extent) {
    if (size_ == kCapacity)
      throw pinfeed::length_error("tensor_shape holds at most " + std::to_string(kCapacity) + " extents");
    extents_[size_++] = extent;
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::int64_t operator[](std::size_t i) const noexcept { return extents_[i]; }
  [[nodiscard]] std::int64_t back() const noexcept { return extents_[size_ - 1]; }
  [[nodiscard]] const std::int64_t* data() const noexcept { return extents_.data(); }
  [[nodiscard]] const std::int64_t* begin() const noexcept { return extents_.data(); }
  [[nodiscard]] const std::int64_t* end() const noexcept { return extents_.data() + size_; }
  friend bool operator==(const tensor_shape& a, const tensor_shape& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const tensor_shape& a, const std::vector<std::int64_t>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::array<std::int64_t, kCapacity> extents_{};
  std::size_t size_ = 0;
};

/// The dtype of a C++ element type (the integer and float types; f16 and bf16 have none).
template <class T>
inline constexpr bool has_dtype_v = false;
template <class T>
inline constexpr dtype dtype_of_v = dtype::u8;
#define PINFEED_DTYPE_OF(T, D)                    \
  template <>                                     \
  inline constexpr bool has_dtype_v<T> = true;    \
  template <>                                     \
  inline constexpr dtype dtype_of_v<T> = dtype::D;
PINFEED_DTYPE_OF(std::uint8_t, u8)
PINFEED_DTYPE_OF(std::int8_t, i8)
PINFEED_DTYPE_OF(std::uint16_t, u16)
PINFEED_DTYPE_OF(std::int16_t, i16)
PINFEED_DTYPE_OF(std::int32_t, i32)
PINFEED_DTYPE_OF(std::uint32_t, u32)
PINFEED_DTYPE_OF(std::int64_t, i64)
PINFEED_DTYPE_OF(std::uint64_t, u64)
PINFEED_DTYPE_OF(float, f32)
PINFEED_DTYPE_OF(double, f64)
#undef PINFEED_DTYPE_OF

/// A named field of every sample, with its per-sample shape and element type declared up front
/// (a batch of B samples has shape [B, shape...]).
struct field_spec {
  std::string name{};
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape{};  ///< per sample; empty = scalar
  /// Variable-size: each sample holds between 0 and shape[0] elements (one dimension), claimed
  /// with sample::claim(). A slot keeps such a field as an arena of batch_size x shape[0] elements
  /// (the stated worst case per sample, counted in the memory budget) and each sample's place in it
  /// (batch::extents()); only the arena's used part is copied to the device.
  bool variable = false;
  /// The source's own working field (the packed JPEGs of decoding on the device, say): in the
  /// batch like any other, but not part of the sample, so checksum_line() leaves it out and a
  /// batch's line does not depend on how the source made it.
  bool scratch = false;
  /// Made on the loader's GPU after the copy, by the source (source::after_copy: the float images
  /// its own device steps make from copied pixels, say): it has no host memory and is not copied,
  /// so a sample's bytes() of it are empty and slot_view::host has null for it. A loader on the CPU
  /// refuses a source with such a field. Fixed-size only.
  bool device_only = false;

  [[nodiscard]] std::size_t elements() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept { return elements() * dtype_size(type); }
};

/// Checks a field list: non-empty, unique non-empty names, at most kMaxFieldRank dimensions,
/// positive extents. Throws std::invalid_argument naming the field and the bad value.
void validate_fields(std::span<const field_spec> fields);

/// Where a tensor's memory lives.
struct memory_location {
  enum class kind : std::uint8_t { host, cuda } where = kind::host;
  int device = -1;  ///< CUDA device index when where == cuda
  [[nodiscard]] bool is_cuda() const noexcept { return where == kind::cuda; }
};

/// A typed, non-owning view of one field of a batch: elements of T in C order, shape
/// [samples, per-sample shape...]. Device memory stays device memory: the pointers and spans are
/// for kernels then, not for the host to read.
template <class T>
class typed_view {
 public:
  typed_view() = default;
  typed_view(T* data, const tensor_shape& shape, memory_location location) noexcept
      : data_(data), shape_(shape), location_(location) {}
  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] const tensor_shape& shape() const noexcept { return shape_; }
  [[nodiscard]] memory_location location() const noexcept { return location_; }
  /// Samples: the first extent (0 for a view with no shape).
  [[nodiscard]] std::size_t size() const noexcept { return shape_.empty() ? 0 : static_cast<std::size_t>(shape_[0]); }
  /// Elements of one sample: the product of the other extents (1 for a scalar field).
  [[nodiscard]] std::size_t sample_elements() const noexcept {
    std::size_t n = 1;
    for (std::size_t d = 1; d < shape_.size(); ++d) n *= static_cast<std::size_t>(shape_[d]);
    return n;
  }
  /// Every element of the field, all samples.
  [[nodiscard]] std::span<T> elements() const noexcept { return {data_, size() * sample_elements()}; }
  /// Sample i's elements. Throws std::out_of_range naming i and the number of samples.
  [[nodiscard]] std::span<T> sample(std::size_t i) const {
    if (i >= size())
      throw pinfeed::out_of_range("typed_view::sample: index " + std::to_string(i) + " is past the view's " +
                              std::to_string(size()) + " samples");
    return {data_ + i * sample_elements(), sample_elements()};
  }

 private:
  T* data_ = nullptr;
  tensor_shape shape_;
  memory_location location_;
};

/// A non-owning view of one field of a batch: `data` has shape `shape` (C order) and type `type`.
struct tensor_view {
  void* data = nullptr;
  dtype type = dtype::u8;
  tensor_shape shape;
  memory_location location;

  [[nodiscard]] std::size_t elements() const noexcept;
  [[nodiscard]] std::size_t bytes() const noexcept { return elements() * dtype_size(type); }
  /// The data as elements of T, checked against the view's type: throws std::invalid_argument
  /// naming both when they differ. (Device memory stays device memory: the pointer is for kernels.)
  template <class T>
  [[nodiscard]] T* as() const {
    static_assert(has_dtype_v<std::remove_const_t<T>>, "tensor_view::as<T>: T has no pinfeed dtype");
    if (dtype_of_v<std::remove_const_t<T>> != type)
      throw pinfeed::invalid_argument("tensor_view::as: the view holds " + std::string(dtype_name(type)) + ", not " +
                                  std::string(dtype_name(dtype_of_v<std::remove_const_t<T>>)));
    return static_cast<T*>(data);
  }
  /// The view as elements of T with its shape and per-sample slices, checked like as<T>(): throws
  /// std::invalid_argument naming `what` (e.g. "batch field 'image'"), the view's type and T's.
  template <class T>
  [[nodiscard]] typed_view<T> typed(std::string_view what = "tensor_view") const {
    static_assert(has_dtype_v<std::remove_const_t<T>>, "tensor_view::typed<T>: T has no pinfeed dtype");
    if (dtype_of_v<std::remove_const_t<T>> != type)
      throw pinfeed::invalid_argument(std::string(what) + " holds " + std::string(dtype_name(type)) + ", not " +
                                  std::string(dtype_name(dtype_of_v<std::remove_const_t<T>>)));
    return typed_view<T>(static_cast<T*>(data), shape, location);
  }
};

}  // namespace pinfeed
