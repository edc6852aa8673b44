// encode: one-hot and bit planes on the host.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/random.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

TEST_CASE("encode.one_hot") {
  const std::int64_t labels[5] = {2, 0, -1, 4, 7};  // -1 and 7 are outside [0, 5): zero rows
  for (dtype t : {dtype::u8, dtype::f16, dtype::bf16, dtype::f32}) {
    std::vector<std::byte> out(5 * 5 * dtype_size(t), std::byte{0x55});
    one_hot_host({labels, dtype::i64, 5, 5, out.data(), t});
    for (int i = 0; i < 5; ++i)
      for (int c = 0; c < 5; ++c) {
        std::uint32_t v = 0;
        std::memcpy(&v, out.data() + (i * 5 + c) * dtype_size(t), dtype_size(t));
        const bool hot = labels[i] == c;
        const std::uint32_t one = t == dtype::u8 ? 1 : t == dtype::f16 ? 0x3C00 : t == dtype::bf16 ? 0x3F80 : 0x3F800000;
        CHECK(v == (hot ? one : 0u));
      }
  }
  const std::int32_t l32[2] = {1, 0};
  std::uint8_t o[4];
  one_hot_host({l32, dtype::i32, 2, 2, o, dtype::u8});
  CHECK(o[0] == 0);
  CHECK(o[1] == 1);
  CHECK(o[2] == 1);
  CHECK_THROWS_WITH_AS(one_hot_host({l32, dtype::i32, 2, 0, o, dtype::u8}), doctest::Contains("classes must be positive, got 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(one_hot_host({l32, dtype::f32, 2, 2, o, dtype::u8}), doctest::Contains("float32"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(one_hot_host({l32, dtype::i32, 2, 2, o, dtype::i64}), doctest::Contains("int64"), std::invalid_argument);
  CHECK_THROWS_AS(one_hot_host({nullptr, dtype::i32, 2, 2, o, dtype::u8}), std::invalid_argument);
  // Both versions load and store whole elements: misaligned labels or output are named (the
  // device version before any launch).
  alignas(8) std::byte lab[24] = {}, dst[40];
  CHECK_NOTHROW(one_hot_host({lab + 8, dtype::i64, 2, 2, dst + 4, dtype::f32}));
  CHECK_NOTHROW(one_hot_host({lab + 4, dtype::i32, 2, 2, dst + 1, dtype::u8}));
  CHECK_THROWS_WITH_AS(one_hot_host({lab + 4, dtype::i64, 2, 2, dst, dtype::f32}),
                       doctest::Contains("one_hot: the labels must be aligned to 8 bytes"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(one_hot_host({lab, dtype::i64, 2, 2, dst + 2, dtype::f32}),
                       doctest::Contains("one_hot: the output must be aligned to 4 bytes"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(one_hot_device({lab + 2, dtype::i32, 2, 2, dst, dtype::u8}, nullptr),
                       doctest::Contains("the labels must be aligned to 4 bytes"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(one_hot_device({lab, dtype::i64, 2, 2, dst + 1, dtype::bf16}, nullptr),
                       doctest::Contains("the output must be aligned to 2 bytes"), std::invalid_argument);
}

TEST_CASE("encode.bit_planes_roundtrip") {
  const bit_planes_shape s{2, 5};
  std::vector<std::uint8_t> packed(10);
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<std::uint8_t>(i * 29 + 3);
  std::vector<std::uint8_t> planes(2 * 8 * 5, 9);
  unpack_bits_host({packed.data(), planes.data(), s});
  for (std::size_t n = 0; n < 2; ++n)
    for (int b = 0; b < 8; ++b)
      for (std::size_t p = 0; p < 5; ++p) CHECK(planes[(n * 8 + b) * 5 + p] == ((packed[n * 5 + p] >> b) & 1));
  planes[3] = 200;  // nonzero counts as set
  std::vector<std::uint8_t> repacked(10);
  pack_bits_host({planes.data(), repacked.data(), s});
  CHECK(repacked[3] == (packed[3] | 1));
  repacked[3] = packed[3];
  CHECK(repacked == packed);
  CHECK_THROWS_WITH_AS(unpack_bits_host({nullptr, planes.data(), s}), doctest::Contains("unpack_bits"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pack_bits_host({planes.data(), nullptr, s}), doctest::Contains("pack_bits"), std::invalid_argument);
  CHECK_NOTHROW(pack_bits_host({nullptr, nullptr, {0, 5}}));
}
