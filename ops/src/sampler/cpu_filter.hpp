#pragma once
// The CPU sampler's candidate filter: over one chunk of a row's labels and keys, the items whose
// key is at or below their class's threshold, in index order, with the classes counted.

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/random.hpp"

namespace pinfeed::ops::cpu_sampler {

constexpr std::size_t kChunk = 1024;  // items per key-generation chunk (a multiple of 16)

/// Appends (key << 32 | base + j) of every item j < len of class c (0 positive, 1 negative) with
/// key <= thr[c] to out[c] + added[c] and advances added[c] (`only` >= 0 restricts to one class);
/// counts every positive and negative into seen[]. Writes up to three entries past the appended
/// ones (out[] needs room for len + 4). `level`: the instruction set (x86; others: portable code).
template <class L>
void filter_chunk(simd_level level, const L* labels, const std::uint32_t* keys, std::size_t len, std::uint64_t base,
                  L neg, L ign, const std::uint32_t thr[2], int only, std::uint64_t* out[2], std::size_t added[2],
                  std::int64_t seen[2]);

extern template void filter_chunk<std::int32_t>(simd_level, const std::int32_t*, const std::uint32_t*, std::size_t,
                                                std::uint64_t, std::int32_t, std::int32_t, const std::uint32_t[2], int,
                                                std::uint64_t* [2], std::size_t[2], std::int64_t[2]);
extern template void filter_chunk<std::int64_t>(simd_level, const std::int64_t*, const std::uint32_t*, std::size_t,
                                                std::uint64_t, std::int64_t, std::int64_t, const std::uint32_t[2], int,
                                                std::uint64_t* [2], std::size_t[2], std::int64_t[2]);

}  // namespace pinfeed::ops::cpu_sampler
