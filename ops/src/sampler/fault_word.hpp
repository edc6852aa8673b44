#pragma once
// The 64-bit word in which the GPU sampler's kernels report what they found inconsistent, and its
// fields as the host reads them back: bit 63 set, kind in 62..60, class + 1 in 59..58 (0: no
// class), row in 57..32, a count or slot in 31..0.

#include <cstdint>

#include "params.hpp"

namespace pinfeed::ops::gpu_sampler {

PINFEED_SAMPLER_HD constexpr unsigned long long encode_fault(sampler_fault_kind kind, std::int64_t row, int c,
                                                             std::uint32_t value) {
  return (1ull << 63) | (static_cast<unsigned long long>(kind) << 60) |
         (static_cast<unsigned long long>(c + 1) << 58) | (static_cast<unsigned long long>(row & 0x3FFFFFF) << 32) |
         value;
}

constexpr sampler_fault_kind fault_kind_of(std::uint64_t word) { return static_cast<sampler_fault_kind>((word >> 60) & 7); }
/// 0: positives, 1: negatives, -1: no class.
constexpr int fault_class(std::uint64_t word) { return static_cast<int>((word >> 58) & 3) - 1; }
constexpr std::int64_t fault_row(std::uint64_t word) { return static_cast<std::int64_t>((word >> 32) & 0x3FFFFFF); }
constexpr std::uint32_t fault_value(std::uint64_t word) { return static_cast<std::uint32_t>(word); }

}  // namespace pinfeed::ops::gpu_sampler
