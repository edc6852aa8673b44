#pragma once
/// @file random.hpp
/// Bulk Philox output on the host (SSE2, AVX2 or AVX-512 as the CPU allows, the same words as the
/// portable code) and on the device. Byte 16*i + j of a byte fill is byte j (little-endian words)
/// of block i.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/philox.hpp"

namespace pinfeed {

/// Words of blocks [first_block, first_block + blocks) in stream order:
/// out[4*j + w] = word w of block first_block + j. Thread-safe.
void philox_words(const philox_stream& stream, std::uint32_t first_block, std::size_t blocks,
                  std::uint32_t* out) noexcept;

/// Element-indexed words: out[j] = stream.word_at(elements[j]) for j < count. Thread-safe.
void philox_element_words(const philox_stream& stream, const std::uint32_t* elements, std::size_t count,
                          std::uint32_t* out) noexcept;

/// Fills `out` on the host. Thread-safe (the stream is taken by value).
void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept;

/// The widest vector code the host paths use: scalar, AVX2 or AVX-512. Chosen at run time from
/// the CPU's flags (scalar on CPUs other than x86-64) and capped by the environment variable
/// PINFEED_SIMD=scalar|avx2|avx512 when it is set; every level produces the same bits (tests
/// compare them). `scalar` is the code any CPU of the architecture runs: on x86-64 it uses SSE2,
/// which is part of x86-64 itself; elsewhere it is portable C++ that the compiler may vectorize.
enum class simd_level : int { scalar = 0, avx2 = 1, avx512 = 2 };
/// The level the CPU supports.
[[nodiscard]] simd_level cpu_simd_support() noexcept;
/// "scalar", "avx2" or "avx512"; throws std::invalid_argument naming any other value.
[[nodiscard]] simd_level parse_simd_level(std::string_view name);
/// Caps the level used process-wide (tests and benchmarks); levels above the CPU's are clamped.
void set_simd_level(simd_level level) noexcept;
[[nodiscard]] simd_level simd_level_in_use() noexcept;
[[nodiscard]] std::string to_string(simd_level level);

/// Fills `bytes` bytes at device pointer `d_out` on `stream` with the same bytes fill_random_bytes()
/// gives. Asynchronous: does not synchronize. Throws cuda_error if the launch fails and
/// std::invalid_argument for a null pointer with bytes > 0.
void fill_random_bytes_device(philox_stream stream, void* d_out, std::size_t bytes, cudaStream_t cuda_stream);

}  // namespace pinfeed
