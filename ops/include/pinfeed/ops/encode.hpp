#pragma once
/// @file encode.hpp
/// Compact label and mask encodings expanded on the GPU: one-hot from class ids (ship int64 ids,
/// not one-hot rows) and binary maps packed 8 to a byte (ship 1 bit per pixel, not 8 or 32).

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed::ops {

/// One-hot rows: out[i, c] = 1 if labels[i] == c else 0, for i < count, c < classes.
/// labels: int32 or int64; out: u8, f16, bf16 or f32 (row-major [count, classes]).
/// A label outside [0, classes) (an ignore label, say) gives an all-zero row.
struct one_hot_args {
  const void* labels = nullptr;
  dtype label_type = dtype::i64;
  std::size_t count = 0;
  std::int64_t classes = 0;
  void* out = nullptr;
  dtype out_type = dtype::f32;
};
/// Host reference. Throws std::invalid_argument naming the bad value (types, classes <= 0, nulls,
/// labels or output not aligned to their element sizes).
void one_hot_host(const one_hot_args& a);
/// Device version, asynchronous on `stream`; the same checks, before launching anything.
void one_hot_device(const one_hot_args& a, cudaStream_t stream);

/// Bit planes: packed [count, pixels] uint8, bit b of a byte is map b (b = 0 least significant);
/// planes [count, 8, pixels] uint8 holding 0 or 1.
struct bit_planes_shape {
  std::size_t count = 0;   ///< images
  std::size_t pixels = 0;  ///< pixels per map (H * W)
};
/// What a pack or unpack call works on: `in` (packed for unpack, planes for pack) into `out`.
struct bit_planes_args {
  const std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  bit_planes_shape shape{};
};
/// packed -> planes. Host reference; throws std::invalid_argument on null pointers.
void unpack_bits_host(const bit_planes_args& a);
/// planes -> packed; any nonzero plane value counts as 1.
void pack_bits_host(const bit_planes_args& a);
/// Device versions, asynchronous on `stream`.
void unpack_bits_device(const bit_planes_args& a, cudaStream_t stream);
void pack_bits_device(const bit_planes_args& a, cudaStream_t stream);

}  // namespace pinfeed::ops
