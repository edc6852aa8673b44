#include "pinfeed/runtime/tensor.hpp"

#include <array>
#include <set>
#include <stdexcept>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {
namespace {
struct dtype_row {
  dtype type;
  std::size_t size;
  std::string_view name, short_name;
};
constexpr std::array<dtype_row, 12> kTypes{{
    {dtype::u8, 1, "uint8", "u8"},       {dtype::i8, 1, "int8", "i8"},
    {dtype::u16, 2, "uint16", "u16"},    {dtype::i16, 2, "int16", "i16"},
    {dtype::i32, 4, "int32", "i32"},     {dtype::u32, 4, "uint32", "u32"},
    {dtype::i64, 8, "int64", "i64"},     {dtype::u64, 8, "uint64", "u64"},
    {dtype::f16, 2, "float16", "f16"},   {dtype::bf16, 2, "bfloat16", "bf16"},
    {dtype::f32, 4, "float32", "f32"},   {dtype::f64, 8, "float64", "f64"},
}};
std::size_t product(std::span<const std::int64_t> shape) noexcept {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}
}  // namespace

std::size_t dtype_size(dtype t) noexcept { return kTypes[static_cast<std::size_t>(t)].size; }
std::string_view dtype_name(dtype t) noexcept { return kTypes[static_cast<std::size_t>(t)].name; }

dtype parse_dtype(std::string_view name) {
  for (const auto& row : kTypes)
    if (name == row.name || name == row.short_name) return row.type;
  throw pinfeed::invalid_argument("unknown dtype '" + std::string(name) + "'");
}

std::size_t field_spec::elements() const noexcept { return product(shape); }
std::size_t tensor_view::elements() const noexcept { return product({shape.begin(), shape.end()}); }

void validate_fields(std::span<const field_spec> fields) {
  if (fields.empty()) throw pinfeed::invalid_argument("a source must declare at least one field");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    if (f.name.empty()) throw pinfeed::invalid_argument("field " + std::to_string(i) + " has an empty name");
    if (f.shape.size() > kMaxFieldRank)
      throw pinfeed::invalid_argument("field '" + f.name + "' has " + std::to_string(f.shape.size()) +
                                  " dimensions; at most " + std::to_string(kMaxFieldRank) + " are supported");
    if (!seen.insert(f.name).second)
      throw pinfeed::invalid_argument("field name '" + f.name + "' is declared twice");
    for (std::size_t d = 0; d < f.shape.size(); ++d)
      if (f.shape[d] <= 0)
        throw pinfeed::invalid_argument("field '" + f.name + "' has extent " + std::to_string(f.shape[d]) +
                                    " in dimension " + std::to_string(d) + " (must be positive)");
    if (f.variable && f.device_only)
      throw pinfeed::invalid_argument("field '" + f.name + "' is both variable-size and device_only: a field made on the device has a fixed size");
    if (f.variable && f.shape.size() != 1)
      throw pinfeed::invalid_argument("variable-size field '" + f.name + "' has " + std::to_string(f.shape.size()) +
                                      " dimensions; it must have one (the most elements a sample holds)");
    // bytes() multiplies the extents: they must not overflow a size.
    std::size_t bytes = dtype_size(f.type);
    for (const auto e : f.shape)
      if (__builtin_mul_overflow(bytes, static_cast<std::size_t>(e), &bytes))
        throw pinfeed::invalid_argument("field '" + f.name + "' is too large: its bytes per sample overflow");
  }
}

}  // namespace pinfeed
