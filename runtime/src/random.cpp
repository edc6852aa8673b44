#include "pinfeed/runtime/random.hpp"

#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/log.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define PINFEED_X86 1
// GCC 12's AVX-512 headers read _mm512_undefined_* values and warn about them (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#else
#define PINFEED_X86 0
#endif

namespace pinfeed {
namespace {

simd_level detect() noexcept {
#if PINFEED_X86
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return simd_level::avx512;
  if (__builtin_cpu_supports("avx2")) return simd_level::avx2;
#endif
  return simd_level::scalar;  // other CPUs run the portable paths (same bits)
}

/// The CPU's level, capped by PINFEED_SIMD when it is set. A bad value is reported and ignored here
/// (this runs inside noexcept calls); the command line checks it up front with parse_simd_level().
simd_level initial_level() noexcept {
  const simd_level cpu = cpu_simd_support();
  const char* env = std::getenv("PINFEED_SIMD");
  if (env == nullptr || *env == '\0') return cpu;
  try {
    const simd_level want = parse_simd_level(env);
    if (static_cast<int>(want) > static_cast<int>(cpu))
      log(log_level::warn, std::string("PINFEED_SIMD=") + env + ": this CPU supports " + to_string(cpu) +
                               " at most; using " + to_string(cpu));
    return static_cast<simd_level>(std::min(static_cast<int>(want), static_cast<int>(cpu)));
  } catch (const std::exception& e) {
    log(log_level::error, std::string(e.what()) + "; using " + to_string(cpu));
    return cpu;
  }
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

#if PINFEED_X86

/// Sixteen Philox4x32-10 blocks at once (AVX-512), in registers: lane l has counter
/// {c0[l], c1, c2, c3}; x[w] holds word w of every lane.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) inline void philox_x16_regs(
    __m512i x0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0, std::uint32_t k1,
    __m512i x[4]) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kPhiloxM1));
  __m512i x1 = _mm512_set1_epi32(static_cast<int>(c1));
  __m512i x2 = _mm512_set1_epi32(static_cast<int>(c2));
  __m512i x3 = _mm512_set1_epi32(static_cast<int>(c3));
  std::uint32_t ka = k0, kb = k1;
  for (int round = 0; round < 10; ++round) {
    const __m512i e0 = _mm512_mul_epu32(x0, m0), o0 = _mm512_mul_epu32(_mm512_srli_epi64(x0, 32), m0);
    const __m512i e1 = _mm512_mul_epu32(x2, m1), o1 = _mm512_mul_epu32(_mm512_srli_epi64(x2, 32), m1);
    const __m512i lo0 = _mm512_mask_blend_epi32(0xAAAA, e0, _mm512_slli_epi64(o0, 32));
    const __m512i hi0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e0, 32), o0);
    const __m512i lo1 = _mm512_mask_blend_epi32(0xAAAA, e1, _mm512_slli_epi64(o1, 32));
    const __m512i hi1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e1, 32), o1);
    x0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), _mm512_set1_epi32(static_cast<int>(ka)));
    x1 = lo1;
    x2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), _mm512_set1_epi32(static_cast<int>(kb)));
    x3 = lo0;
    ka += kPhiloxW0;
    kb += kPhiloxW1;
  }
  x[0] = x0;
  x[1] = x1;
  x[2] = x2;
  x[3] = x3;
}

/// The same with the lane counters from memory and the words stored as out[w][l].
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void philox_x16(
    const std::uint32_t c0[16], std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0,
    std::uint32_t k1, std::uint32_t out[4][16]) {
  __m512i x[4];
  philox_x16_regs(_mm512_loadu_si512(c0), c1, c2, c3, k0, k1, x);
  for (int w = 0; w < 4; ++w) _mm512_storeu_si512(out[w], x[w]);
}

/// Stream-order words of 16 consecutive blocks (64 words), transposed in registers.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void philox_words_x16(
    const philox_block& c, std::uint32_t first, std::uint32_t k0, std::uint32_t k1, std::uint32_t* out) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i x[4];
  philox_x16_regs(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)), lanes), c.v[1], c.v[2], c.v[3], k0, k1, x);
  // 4x4 transposes of words inside each 128-bit quarter: quarter q of r[k] = block 4q+k's words.
  const __m512i ab_lo = _mm512_unpacklo_epi32(x[0], x[1]), ab_hi = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i cd_lo = _mm512_unpacklo_epi32(x[2], x[3]), cd_hi = _mm512_unpackhi_epi32(x[2], x[3]);
  const __m512i r0 = _mm512_unpacklo_epi64(ab_lo, cd_lo), r1 = _mm512_unpackhi_epi64(ab_lo, cd_lo);
  const __m512i r2 = _mm512_unpacklo_epi64(ab_hi, cd_hi), r3 = _mm512_unpackhi_epi64(ab_hi, cd_hi);
  // Then a 4x4 transpose of the quarters: output vector q = blocks 4q..4q+3.
  const __m512i t0 = _mm512_shuffle_i32x4(r0, r1, 0x44), t1 = _mm512_shuffle_i32x4(r2, r3, 0x44);
  const __m512i t2 = _mm512_shuffle_i32x4(r0, r1, 0xEE), t3 = _mm512_shuffle_i32x4(r2, r3, 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(t0, t1, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));
}

/// Eight Philox4x32-10 blocks at once: lane l has counter {c0[l], c1, c2, c3}. Writes word w of
/// lane l to out[w][l].
__attribute__((target("avx2"))) void philox_x8(const std::uint32_t c0[8], std::uint32_t c1, std::uint32_t c2,
                                                 std::uint32_t c3, std::uint32_t k0, std::uint32_t k1,
                                                 std::uint32_t out[4][8]) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
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
    ka += kPhiloxW0;
    kb += kPhiloxW1;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[0]), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[1]), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[2]), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[3]), x3);
}
#endif  // PINFEED_X86

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

}  // namespace

simd_level parse_simd_level(std::string_view name) {
  if (name == "scalar") return simd_level::scalar;
  if (name == "avx2") return simd_level::avx2;
  if (name == "avx512") return simd_level::avx512;
  throw std::invalid_argument("SIMD level '" + std::string(name) + "' is not one of scalar, avx2, avx512");
}

simd_level cpu_simd_support() noexcept {
  static const simd_level level = detect();
  return level;
}
void set_simd_level(simd_level level) noexcept {
  level_ref().store(std::min(static_cast<int>(level), static_cast<int>(cpu_simd_support())), std::memory_order_relaxed);
}
simd_level simd_level_in_use() noexcept { return static_cast<simd_level>(level_ref().load(std::memory_order_relaxed)); }
const char* to_string(simd_level level) noexcept {
  switch (level) {
    case simd_level::scalar: return "scalar";
    case simd_level::avx2: return "avx2";
    case simd_level::avx512: return "avx512";
  }
  return "?";
}

void philox_words(const philox_stream& s, std::uint32_t first_block, std::size_t blocks, std::uint32_t* out) noexcept {
  std::size_t j = 0;
#if PINFEED_X86
  const simd_level level = simd_level_in_use();
  if (level == simd_level::avx512) {
    const philox_block c = s.counter(0);
    for (; j + 16 <= blocks; j += 16)
      philox_words_x16(c, first_block + static_cast<std::uint32_t>(j), s.key_lo(), s.key_hi(), out + 4 * j);
  }
  if (level >= simd_level::avx2) {
    const philox_block c = s.counter(0);
    std::uint32_t c0[8], w[4][8];
    for (; j + 8 <= blocks; j += 8) {
      for (std::uint32_t l = 0; l < 8; ++l) c0[l] = first_block + static_cast<std::uint32_t>(j) + l;
      philox_x8(c0, c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(), w);
      for (int l = 0; l < 8; ++l)
        for (int q = 0; q < 4; ++q) out[4 * (j + l) + q] = w[q][l];
    }
  }
#endif
  const philox_block c = s.counter(0);
  philox_words_portable(first_block + static_cast<std::uint32_t>(j), c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(),
                        blocks - j, out + 4 * j);
}

void philox_element_words(const philox_stream& s, const std::uint32_t* elements, std::size_t count,
                          std::uint32_t* out) noexcept {
  std::size_t j = 0;
#if PINFEED_X86
  const simd_level level = simd_level_in_use();
  if (level == simd_level::avx512) {
    const philox_block c = s.counter(0);
    alignas(64) std::uint32_t c0[16], w[4][16];
    for (; j + 16 <= count; j += 16) {
      for (int l = 0; l < 16; ++l) c0[l] = elements[j + l] >> 2;
      philox_x16(c0, c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(), w);
      for (int l = 0; l < 16; ++l) out[j + l] = w[elements[j + l] & 3][l];
    }
  }
  if (level >= simd_level::avx2) {
    const philox_block c = s.counter(0);
    std::uint32_t c0[8], w[4][8];
    for (; j + 8 <= count; j += 8) {
      for (int l = 0; l < 8; ++l) c0[l] = elements[j + l] >> 2;
      philox_x8(c0, c.v[1], c.v[2], c.v[3], s.key_lo(), s.key_hi(), w);
      for (int l = 0; l < 8; ++l) out[j + l] = w[elements[j + l] & 3][l];
    }
  }
#endif
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
