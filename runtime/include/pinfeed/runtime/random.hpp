#pragma once
/// @file random.hpp
/// Bulk random bytes from a sample's Philox stream, identical on host and device: byte 16*i + j of
/// the output is byte j (little-endian words) of block i of the stream.

#include <cstddef>
#include <span>

#include <cuda_runtime_api.h>

#include "pinfeed/runtime/philox.hpp"

namespace pinfeed {

/// Fills `out` on the host. Thread-safe (the stream is taken by value).
void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept;

/// Fills `bytes` bytes at device pointer `d_out` on `stream` with the same bytes fill_random_bytes()
/// gives. Asynchronous: does not synchronise. Throws cuda_error if the launch fails and
/// std::invalid_argument for a null pointer with bytes > 0.
void fill_random_bytes_device(philox_stream stream, void* d_out, std::size_t bytes, cudaStream_t cuda_stream);

}  // namespace pinfeed
