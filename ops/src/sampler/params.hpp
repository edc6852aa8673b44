#pragma once
// What the GPU sampler's host code and kernels share: the key digits, the per-row state the kernels
// keep in temp storage, and the parameters of a call. Plain types, readable by the host compiler.

#include <cstdint>

#include "pinfeed/ops/sampler.hpp"

#if defined(__CUDACC__)
#define PINFEED_SAMPLER_HD __host__ __device__
#else
#define PINFEED_SAMPLER_HD
#endif

namespace pinfeed::ops::gpu_sampler {

// Digits of the 32-bit key, most significant first: bits 31..21, 20..10, 9..0.
PINFEED_SAMPLER_HD constexpr int digit_bits(int pass) { return pass < 2 ? 11 : 10; }
PINFEED_SAMPLER_HD constexpr int digit_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
constexpr std::uint32_t kMaxBins = 2048;
constexpr std::uint32_t kCandidateCap = 8192;  // candidates per row and class kept after the first pass
constexpr std::uint32_t kRowCandidates = 512;  // candidates per class kept in shared memory (a block per row)

enum class class_mode : std::uint32_t { none = 0, all = 1, select = 2 };

struct class_state {
  std::uint32_t mode;       // class_mode
  std::uint32_t want;       // items of this class to take
  std::uint32_t k_rem;      // items still to take inside the current bucket
  std::uint32_t prefix;     // digits chosen so far
  std::uint32_t bucket;     // items in the chosen bucket (after the last pass: items equal to T)
  std::uint32_t candidates; // items in the first bucket (candidate count)
  std::uint32_t cand_used;  // candidates written (capped at the capacity)
  std::uint32_t pad;
};

struct row_state {
  unsigned long long positives, negatives;
  std::uint32_t taken;        // items appended to the row's selection
  std::uint32_t tie_base;  // where the ties go (tie pass of several blocks per row)
  std::uint32_t pad[2];
  class_state cls[2];
};

struct params_dev {
  std::int64_t rows, n, k, target;
  std::int64_t negative_label, ignore_label;
  std::uint64_t seed;
  std::uint32_t offset;
  sampler_mode mode;
  std::uint32_t cand_cap;
  int blocks_per_row;
  std::int64_t chunk;  // items per block of a row, a multiple of 4
  int index_bits;      // bits needed for an index < n
  unsigned long long* fault;  // host-mapped fault word of this device (null: not reported)
};

/// The order key of an unused slot when one row is sorted device-wide: above every real key.
PINFEED_SAMPLER_HD constexpr std::uint64_t padding_key(int index_bits) {
  return 32 + index_bits >= 64 ? ~0ull : 1ull << (32 + index_bits);
}
/// The bits the device-wide sort of one row looks at (the real keys and the padding key).
constexpr int padded_sort_bits(int index_bits) { return 32 + index_bits >= 64 ? 64 : 33 + index_bits; }

}  // namespace pinfeed::ops::gpu_sampler
