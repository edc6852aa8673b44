#include "pinfeed/runtime/random.hpp"

#include <atomic>
#include <cstring>

#include <immintrin.h>

namespace pinfeed {
namespace {

std::atomic<bool>& simd_flag() {
  static std::atomic<bool> flag{__builtin_cpu_supports("avx2") != 0};
  return flag;
}

/// Eight Philox4x32-10 blocks at once: lane l has counter {c0[l], c1, c2, c3}. Writes word w of
/// lane l to out[w][l].
__attribute__((target("avx2"))) void philox_x8(const std::uint32_t c0[8], std::uint32_t c1, std::uint32_t c2,
                                                 std::uint32_t c3, std::uint32_t k0, std::uint32_t k1,
                                                 std::uint32_t out[4][8]) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c0));
  __m256i x1 = _mm256_set1_epi32(static_cast<int>(c1));
  __m256i x2 = _mm256_set1_epi32(static_cast<int>(c2));
  __m256i x3 = _mm256_set1_epi32(static_cast<int>(c3));
  std::uint32_t ka = k0, kb = k1;
  for (int round = 0; round < 10; ++round) {
    // 32x32 -> 64 products of even lanes, then of odd lanes, recombined into hi and lo words.
    const __m256i e0 = _mm256_mul_epu32(x0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
    const __m256i e1 = _mm256_mul_epu32(x2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
    const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
    const __m256i ka_v = _mm256_set1_epi32(static_cast<int>(ka)), kb_v = _mm256_set1_epi32(static_cast<int>(kb));
    x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), ka_v);
    x1 = lo1;
    x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), kb_v);
    x3 = lo0;
    ka += 0x9E3779B9u;
    kb += 0xBB67AE85u;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[0]), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[1]), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[2]), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[3]), x3);
}

}  // namespace

void set_philox_simd(bool enabled) noexcept {
  simd_flag().store(enabled && __builtin_cpu_supports("avx2") != 0, std::memory_order_relaxed);
}
bool philox_simd_enabled() noexcept { return simd_flag().load(std::memory_order_relaxed); }

void philox_words(const philox_stream& s, std::uint32_t first_block, std::size_t blocks, std::uint32_t* out) noexcept {
  std::size_t j = 0;
  if (philox_simd_enabled()) {
    const philox_block c = s.counter(0);
    std::uint32_t c0[8], w[4][8];
    for (; j + 8 <= blocks; j += 8) {
      for (std::uint32_t l = 0; l < 8; ++l) c0[l] = first_block + static_cast<std::uint32_t>(j) + l;
      philox_x8(c0, c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(), w);
      for (int l = 0; l < 8; ++l)
        for (int q = 0; q < 4; ++q) out[4 * (j + l) + q] = w[q][l];
    }
  }
  for (; j < blocks; ++j) {
    const philox_block b = s.block_at(first_block + static_cast<std::uint32_t>(j));
    std::memcpy(out + 4 * j, b.v, 16);
  }
}

void philox_element_words(const philox_stream& s, const std::uint32_t* elements, std::size_t count,
                          std::uint32_t* out) noexcept {
  std::size_t j = 0;
  if (philox_simd_enabled()) {
    const philox_block c = s.counter(0);
    std::uint32_t c0[8], w[4][8];
    for (; j + 8 <= count; j += 8) {
      for (int l = 0; l < 8; ++l) c0[l] = elements[j + l] >> 2;
      philox_x8(c0, c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(), w);
      for (int l = 0; l < 8; ++l) out[j + l] = w[elements[j + l] & 3][l];
    }
  }
  for (; j < count; ++j) out[j] = s.word_at(elements[j]);
}

void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept {
  constexpr std::size_t kChunkBlocks = 256;  // 4 KiB of words on the stack at a time
  std::uint32_t words[4 * kChunkBlocks];
  const std::size_t blocks = (out.size() + 15) / 16;
  for (std::size_t b = 0; b < blocks; b += kChunkBlocks) {
    const std::size_t n = std::min(kChunkBlocks, blocks - b);
    philox_words(stream, static_cast<std::uint32_t>(b), n, words);
    const std::size_t offset = 16 * b;
    std::memcpy(out.data() + offset, words, std::min(16 * n, out.size() - offset));  // little-endian
  }
}

}  // namespace pinfeed
