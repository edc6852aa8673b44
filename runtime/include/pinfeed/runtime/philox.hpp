#pragma once
/// @file philox.hpp
/// Philox4x32-10 (Salmon et al., SC'11), one implementation for host and device code, and the
/// per-sample random stream of pinfeed: the stream of sample `index` in `epoch` under `seed` is a
/// pure function of those three values (and an optional substream id), so what a sample gets never
/// depends on the number of workers, on timing or on where it runs.

#include <cstdint>

#if defined(__CUDACC__)
#define PINFEED_HD __host__ __device__ __forceinline__
#else
#define PINFEED_HD inline
#endif

namespace pinfeed {

/// Four 32-bit words: a Philox counter or output block.
struct philox_block {
  std::uint32_t v[4];
};

/// Philox4x32's round multipliers and key increments (Salmon et al., SC'11). The host SIMD versions
/// (runtime/src/detail/philox_lanes.hpp) use the same constants.
inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// Philox4x32 with 10 rounds: maps (counter, key) to four uniformly distributed 32-bit words.
PINFEED_HD philox_block philox4x32_10(philox_block ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1, kW0 = kPhiloxW0, kW1 = kPhiloxW1;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr.v[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = philox_block{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

/// The counter-based random stream of one sample. Cheap to construct (no state beyond the
/// counter), copyable, not thread-safe: each thread uses its own copy.
///
/// Key = seed (64 bits). Counter = {block, index low 32, index high 16 | substream << 16, epoch}.
/// Sample indices up to 2^48 and 2^16 substreams per sample are distinct streams.
class philox_stream {
 public:
  PINFEED_HD philox_stream(std::uint64_t seed, std::uint32_t epoch, std::uint64_t index,
                           std::uint32_t substream = 0)
      : k0_(static_cast<std::uint32_t>(seed)), k1_(static_cast<std::uint32_t>(seed >> 32)),
        index_lo_(static_cast<std::uint32_t>(index)),
        index_hi_sub_((static_cast<std::uint32_t>(index >> 32) & 0xFFFFu) | (substream << 16)),
        epoch_(epoch) {}

  /// The block at position `block` of this stream (random access; does not advance).
  [[nodiscard]] PINFEED_HD philox_block block_at(std::uint32_t block) const {
    return philox4x32_10(counter(block), k0_, k1_);
  }
  /// The Philox counter of block `block` and the two key words (for vectorized generators).
  [[nodiscard]] PINFEED_HD philox_block counter(std::uint32_t block) const {
    return philox_block{{block, index_lo_, index_hi_sub_, epoch_}};
  }
  [[nodiscard]] PINFEED_HD std::uint32_t key_lo() const { return k0_; }
  [[nodiscard]] PINFEED_HD std::uint32_t key_hi() const { return k1_; }
  /// Word `i & 3` of block `i >> 2`: the i-th word of the stream (element-indexed keys).
  [[nodiscard]] PINFEED_HD std::uint32_t word_at(std::uint64_t i) const {
    return block_at(static_cast<std::uint32_t>(i >> 2)).v[i & 3];
  }
  /// The words next_u32 has taken so far: it returns word_at(position()) next (a stream read by
  /// next_u32, uniform and below alone).
  [[nodiscard]] PINFEED_HD std::uint64_t position() const { return std::uint64_t{block_} * 4 + used_ - 4; }
  /// The next four words; advances by one block.
  PINFEED_HD philox_block next4() { return block_at(block_++); }
  /// The next word.
  PINFEED_HD std::uint32_t next_u32() {
    if (used_ == 4) {
      buf_ = next4();
      used_ = 0;
    }
    return buf_.v[used_++];
  }
  /// A uniform float in [0, 1) with 24 random bits (exact integer arithmetic: same on host and device).
  PINFEED_HD float uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  /// A value in [0, n) by multiply-shift (bias below n / 2^32).
  PINFEED_HD std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(next_u32()) * n) >> 32);
  }

 private:
  std::uint32_t k0_, k1_, index_lo_, index_hi_sub_, epoch_;
  std::uint32_t block_ = 0;
  std::uint32_t used_ = 4;
  philox_block buf_{};
};

}  // namespace pinfeed
