#pragma once
/// @file checksum.hpp
/// Content digests of batches, to compare two runs exactly (`pinfeed run --checksums`).

#include <cstddef>
#include <cstdint>
#include <string>

#include "pinfeed/runtime/batch.hpp"

namespace pinfeed {

/// A 64-bit non-cryptographic hash of `bytes` bytes (word-wise multiply-rotate; stable across runs
/// and machines of the same endianness).
[[nodiscard]] std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed = 0) noexcept;

/// One line: "batch <epoch>:<index> n=<size> indices=<first>..<last> #<hash of indices> <field>=<hash> ...",
/// for every field but the source's scratch ones (field_spec::scratch); a variable-size field
/// hashed sample by sample, in batch order.
/// Device batches are copied to the host first: this synchronizes the batch's stream.
[[nodiscard]] std::string checksum_line(const batch& b);

}  // namespace pinfeed
