#include "pinfeed/runtime/random.hpp"

#include <algorithm>
#include <cstring>
#include <span>

#include "detail/philox_x86.hpp"

namespace pinfeed {
namespace {

/// Philox4x32-10 of `blocks` consecutive counters (first, c1, c2, c3) into stream-order words, eight
/// independent blocks interleaved: the portable code, whose rounds the compiler can overlap or
/// vectorize with the baseline instruction set (SSE2, NEON). Same bits as philox4x32_10().
void philox_words_portable(std::uint32_t first, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0,
                           std::uint32_t k1, std::size_t blocks, std::uint32_t* out) noexcept {
  constexpr std::size_t kLanes = 8;
  std::size_t j = 0;
  for (; j + kLanes <= blocks; j += kLanes) {
    std::uint32_t x0[kLanes], x1[kLanes], x2[kLanes], x3[kLanes];
    for (std::size_t l = 0; l < kLanes; ++l) {
      x0[l] = first + static_cast<std::uint32_t>(j + l);
      x1[l] = c1;
      x2[l] = c2;
      x3[l] = c3;
    }
    std::uint32_t ka = k0, kb = k1;
    for (int round = 0; round < 10; ++round) {
      for (std::size_t l = 0; l < kLanes; ++l) {
        const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x0[l], p1 = std::uint64_t{kPhiloxM1} * x2[l];
        x0[l] = static_cast<std::uint32_t>(p1 >> 32) ^ x1[l] ^ ka;
        x1[l] = static_cast<std::uint32_t>(p1);
        x2[l] = static_cast<std::uint32_t>(p0 >> 32) ^ x3[l] ^ kb;
        x3[l] = static_cast<std::uint32_t>(p0);
      }
      ka += kPhiloxW0;
      kb += kPhiloxW1;
    }
    for (std::size_t l = 0; l < kLanes; ++l) {
      std::uint32_t* o = out + 4 * (j + l);
      o[0] = x0[l];
      o[1] = x1[l];
      o[2] = x2[l];
      o[3] = x3[l];
    }
  }
  for (; j < blocks; ++j) {
    const philox_block b = philox4x32_10(philox_block{{first + static_cast<std::uint32_t>(j), c1, c2, c3}}, k0, k1);
    std::memcpy(out + 4 * j, b.v, 16);
  }
}

/// The x86 kernels of `level`, widest first: each takes what it can of the range left (a multiple
/// of its `multiple`) and the portable code takes the rest. None on other CPUs.
std::span<const detail::philox_kernels* const> x86_kernels([[maybe_unused]] simd_level level) noexcept {
#if defined(__x86_64__)
  static constexpr const detail::philox_kernels* widest_first[] = {&detail::philox_avx512, &detail::philox_avx2,
                                                                   &detail::philox_sse2};
  if (level == simd_level::avx512) return {widest_first, 2};  // AVX-512, then AVX2 for a multiple of 8
  if (level == simd_level::avx2) return {widest_first + 1, 1};
  return {widest_first + 2, 1};
#else
  return {};
#endif
}

}  // namespace

void philox_words(const philox_stream& s, std::uint32_t first_block, std::size_t blocks, std::uint32_t* out) noexcept {
  const philox_block c = s.counter(0);
  std::size_t j = 0;
  for (const detail::philox_kernels* k : x86_kernels(simd_level_in_use())) {
    const std::size_t n = (blocks - j) / k->multiple * k->multiple;
    k->words(c, first_block + static_cast<std::uint32_t>(j), n, s.key_lo(), s.key_hi(), out + 4 * j);
    j += n;
  }
  philox_words_portable(first_block + static_cast<std::uint32_t>(j), c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(),
                        blocks - j, out + 4 * j);
}

void philox_element_words(const philox_stream& s, const std::uint32_t* elements, std::size_t count,
                          std::uint32_t* out) noexcept {
  std::size_t j = 0;
  for (const detail::philox_kernels* k : x86_kernels(simd_level_in_use())) {
    const std::size_t n = (count - j) / k->multiple * k->multiple;
    k->element_words(s.counter(0), elements + j, n, s.key_lo(), s.key_hi(), out + j);
    j += n;
  }
  for (; j < count; ++j) out[j] = s.word_at(elements[j]);
}

void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept {
  const std::size_t full_blocks = out.size() / 16;
  std::size_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(out.data()) % alignof(std::uint32_t) == 0) {
    // Aligned: the words go straight into the output (x86, aarch64 and CUDA are little-endian).
    philox_words(stream, 0, full_blocks, reinterpret_cast<std::uint32_t*>(out.data()));
    done = full_blocks;
  }
  constexpr std::size_t kChunkBlocks = 256;  // 4 KiB of words on the stack at a time
  std::uint32_t words[4 * kChunkBlocks];
  const std::size_t blocks = (out.size() + 15) / 16;
  for (std::size_t b = done; b < blocks; b += kChunkBlocks) {
    const std::size_t n = std::min(kChunkBlocks, blocks - b);
    philox_words(stream, static_cast<std::uint32_t>(b), n, words);
    const std::size_t offset = 16 * b;
    std::memcpy(out.data() + offset, words, std::min(16 * n, out.size() - offset));
  }
}

}  // namespace pinfeed
