#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/random.hpp"

using pinfeed::philox_block;
using pinfeed::philox_stream;

TEST_CASE("philox.known_answers") {
  // Known-answer vectors of Philox4x32-10 published with the Random123 library.
  struct kat {
    philox_block ctr;
    std::uint32_t k0, k1;
    philox_block expect;
  };
  const std::array<kat, 3> cases{{
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  }};
  for (const auto& c : cases) {
    const philox_block out = pinfeed::philox4x32_10(c.ctr, c.k0, c.k1);
    for (int i = 0; i < 4; ++i) CHECK(out.v[i] == c.expect.v[i]);
  }
}

TEST_CASE("philox.stream.pure_function_of_seed_epoch_index") {
  auto first = [](std::uint64_t seed, std::uint32_t epoch, std::uint64_t index, std::uint32_t sub = 0) {
    philox_stream s(seed, epoch, index, sub);
    return std::array<std::uint32_t, 6>{s.next_u32(), s.next_u32(), s.next_u32(),
                                        s.next_u32(), s.next_u32(), s.next_u32()};
  };
  CHECK(first(7, 1, 42) == first(7, 1, 42));
  CHECK(first(7, 1, 42) != first(8, 1, 42));
  CHECK(first(7, 1, 42) != first(7, 2, 42));
  CHECK(first(7, 1, 42) != first(7, 1, 43));
  CHECK(first(7, 1, 42) != first(7, 1, 42, 1));
  CHECK(first(7, 1, 42) != first(7, 1, 42 + (std::uint64_t{1} << 32)));  // high index bits count
  CHECK(first(1ull << 40, 0, 0) != first(0, 0, 0));                        // high seed bits count

  philox_stream a(1, 2, 3);
  const philox_block b0 = a.block_at(0), b1 = a.block_at(1);
  for (int i = 0; i < 4; ++i) CHECK(a.next_u32() == b0.v[i]);
  for (int i = 0; i < 4; ++i) CHECK(a.next_u32() == b1.v[i]);
}

TEST_CASE("philox.stream.uniform_and_below_ranges") {
  philox_stream s(123, 0, 9);
  std::array<int, 10> hist{};
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const float u = s.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    const std::uint32_t k = s.below(10);
    REQUIRE(k < 10u);
    ++hist[k];
  }
  // Chi-square with 9 degrees of freedom; the 0.999 quantile is 27.88 (fixed seed: deterministic).
  double chi2 = 0;
  for (int h : hist) chi2 += (h - kDraws / 10.0) * (h - kDraws / 10.0) / (kDraws / 10.0);
  CHECK(chi2 < 27.88);
}

TEST_CASE("philox.fill_random_bytes.layout_and_tail") {
  philox_stream s(5, 6, 7);
  std::vector<std::byte> out(16 * 3 + 5);
  pinfeed::fill_random_bytes(s, out);
  for (std::uint32_t blk = 0; blk < 4; ++blk) {
    const philox_block b = s.block_at(blk);
    for (std::size_t j = 0; j < 16 && 16 * blk + j < out.size(); ++j) {
      const auto expect = static_cast<std::byte>((b.v[j / 4] >> (8 * (j % 4))) & 0xFF);
      CHECK(out[16 * blk + j] == expect);
    }
  }
  // A prefix of a longer fill equals the shorter fill.
  std::vector<std::byte> longer(200);
  pinfeed::fill_random_bytes(s, longer);
  CHECK(std::equal(out.begin(), out.end(), longer.begin()));
}

TEST_CASE("philox.simd_levels_equal_scalar") {
  const auto support = pinfeed::cpu_simd_support();
  const std::string note = std::string("this CPU supports ") + pinfeed::to_string(support);
  MESSAGE(note);
  const philox_stream s(0xDEADBEEFCAFEull, 3, 77777, 2);
  std::vector<std::uint32_t> elements{0, 1, 2, 3, 4, 99, 1000003, 7, 7, 4000000000u, 12, 13, 14, 15, 16, 17, 18,
                                      19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 5};
  for (std::uint32_t e = 0; e < 35; ++e) elements.push_back(e * 2654435761u);
  auto run = [&](pinfeed::simd_level level) {
    pinfeed::set_simd_level(level);
    std::vector<std::uint32_t> words(4 * 123);
    pinfeed::philox_words(s, 5, 123, words.data());
    // Every count up to 70: each vector width alone, two interleaved, and the scalar tail.
    std::vector<std::uint32_t> ew(elements.size());  // the whole list first, then every prefix
    pinfeed::philox_element_words(s, elements.data(), elements.size(), ew.data());
    for (std::size_t count = 0; count < elements.size(); ++count) {
      std::vector<std::uint32_t> part(count);
      pinfeed::philox_element_words(s, elements.data(), count, part.data());
      ew.insert(ew.end(), part.begin(), part.end());
    }
    std::vector<std::byte> bytes(70001);
    pinfeed::fill_random_bytes(s, bytes);
    return std::make_tuple(words, ew, bytes);
  };
  const auto scalar = run(pinfeed::simd_level::scalar);
  for (auto level : {pinfeed::simd_level::avx2, pinfeed::simd_level::avx512}) {
    if (level > support) continue;
    CAPTURE(pinfeed::to_string(level));
    const auto vec = run(level);
    CHECK(std::get<0>(scalar) == std::get<0>(vec));
    CHECK(std::get<1>(scalar) == std::get<1>(vec));
    CHECK(std::get<2>(scalar) == std::get<2>(vec));
  }
  pinfeed::set_simd_level(support);
  CHECK(pinfeed::simd_level_in_use() == support);
  // And the scalar words equal the definition.
  for (std::uint32_t j = 0; j < 123; ++j)
    for (int w = 0; w < 4; ++w) REQUIRE(std::get<0>(scalar)[4 * j + w] == s.block_at(5 + j).v[w]);
  for (std::size_t j = 0; j < elements.size(); ++j) REQUIRE(std::get<1>(scalar)[j] == s.word_at(elements[j]));
}

TEST_CASE("philox.fill_random_bytes_unaligned_output") {
  const philox_stream s(8, 1, 3);
  std::vector<std::byte> aligned(1001), storage(1002);
  pinfeed::fill_random_bytes(s, aligned);
  const std::span<std::byte> shifted(storage.data() + 1, 1001);  // not 4-byte aligned
  pinfeed::fill_random_bytes(s, shifted);
  CHECK(std::equal(aligned.begin(), aligned.end(), shifted.begin()));
}
