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

namespace {
std::vector<std::uint8_t> pattern_images(const image_batch_shape& s) {
  std::vector<std::uint8_t> in(s.pixels() * 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>((i * 37 + i / 7) % 256);
  return in;
}
float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// ImageNet's mean and std, with the YCbCr conversion in front.
normalize_params imagenet_ycbcr() {
  normalize_params p;
  p.mean = {0.485f, 0.456f, 0.406f};
  p.std = {0.229f, 0.224f, 0.225f};
  p.ycbcr = true;
  return p;
}
}  // namespace

TEST_CASE("normalize.scale_layout_hwc_to_chw") {
  const image_batch_shape shape{2, 3, 4};
  const auto in = pattern_images(shape);
  std::vector<float> out(in.size(), -1.f);
  normalize_hwc_to_chw_host({in.data(), out.data(), shape}, {});
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t y = 0; y < 3; ++y)
      for (std::size_t x = 0; x < 4; ++x)
        for (std::size_t c = 0; c < 3; ++c) {
          const float v = in[((n * 3 + y) * 4 + x) * 3 + c];
          const float got = out[((n * 3 + c) * 3 + y) * 4 + x];
          CHECK(got == std::fma(v, 1.0f / 255.0f, 0.0f));
          CHECK(got == doctest::Approx(v / 255.0f).epsilon(1e-6));
        }
}

TEST_CASE("normalize.mean_std") {
  normalize_params p;
  p.mean = {0.485f, 0.456f, 0.406f};
  p.std = {0.229f, 0.224f, 0.225f};
  const std::uint8_t in[6] = {0, 128, 255, 10, 20, 30};
  float out[6];
  normalize_hwc_to_chw_host({in, out, {1, 1, 2}}, p);
  for (int x = 0; x < 2; ++x)
    for (int c = 0; c < 3; ++c)
      CHECK(out[c * 2 + x] == doctest::Approx((in[x * 3 + c] / 255.0f - p.mean[c]) / p.std[c]).epsilon(1e-5));
}

TEST_CASE("normalize.hflip_and_ycbcr") {
  const image_batch_shape shape{1, 2, 3};
  const auto in = pattern_images(shape);
  normalize_params plain, flip;
  flip.hflip = true;
  std::vector<float> a(in.size()), b(in.size());
  normalize_hwc_to_chw_host({in.data(), a.data(), shape}, plain);
  normalize_hwc_to_chw_host({in.data(), b.data(), shape}, flip);
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t y = 0; y < 2; ++y)
      for (std::size_t x = 0; x < 3; ++x) CHECK(b[(c * 2 + y) * 3 + x] == a[(c * 2 + y) * 3 + (2 - x)]);

  // The article's ConvertColor then Scale: (A @ rgb + [0, 128, 128]) / 255.
  normalize_params ycc;
  ycc.ycbcr = true;
  std::vector<float> y(in.size());
  normalize_hwc_to_chw_host({in.data(), y.data(), shape}, ycc);
  const double A[3][3] = {{0.299, 0.587, 0.114}, {-0.16874, -0.33126, 0.5}, {0.5, -0.41869, -0.08131}};
  for (std::size_t p = 0; p < 6; ++p)
    for (int c = 0; c < 3; ++c) {
      const double rgb[3] = {double(in[3 * p]), double(in[3 * p + 1]), double(in[3 * p + 2])};
      const double expect = (A[c][0] * rgb[0] + A[c][1] * rgb[1] + A[c][2] * rgb[2] + (c ? 128.0 : 0.0)) / 255.0;
      CHECK(y[c * 6 + p] == doctest::Approx(expect).epsilon(1e-5));
    }
  // Pure grey has no chroma: Cb = Cr = 128 -> 128/255 (up to float rounding of the matrix rows).
  const std::uint8_t grey[3] = {90, 90, 90};
  float g[3];
  normalize_hwc_to_chw_host({grey, g, {1, 1, 1}}, ycc);
  CHECK(g[0] == doctest::Approx(90.0 / 255).epsilon(1e-5));
  CHECK(g[1] == doctest::Approx(128.0 / 255).epsilon(1e-5));
  CHECK(g[2] == doctest::Approx(128.0 / 255).epsilon(1e-5));
}

TEST_CASE("normalize.half_and_bfloat16_outputs_round_the_float_result") {
  const image_batch_shape shape{3, 5, 7};
  const auto in = pattern_images(shape);
  normalize_params p = imagenet_ycbcr();
  std::vector<float> f32(in.size());
  normalize_hwc_to_chw_host({in.data(), f32.data(), shape}, p);
  for (dtype t : {dtype::f16, dtype::bf16}) {
    p.out = t;
    std::vector<std::uint16_t> h(in.size());
    normalize_hwc_to_chw_host({in.data(), h.data(), shape}, p);
    for (std::size_t i = 0; i < h.size(); ++i)
      REQUIRE(h[i] == (t == dtype::f16 ? float_to_half(f32[i]) : float_to_bfloat16(f32[i])));
  }
}

// The compiler's IEEE half type: _Float16 on x86-64, __fp16 on aarch64 (GCC 12 has no _Float16 in
// C++ there); both convert from float with round to nearest even.
#if defined(__aarch64__)
using compiler_half = __fp16;
#else
using compiler_half = _Float16;
#endif

TEST_CASE("normalize.float_to_half_matches_the_compiler_conversion") {
  // Every 97th float bit pattern (about 44 million values) against the compiler's half conversion.
  std::uint64_t mismatches = 0;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 97) {
    const float f = bits_to_float(static_cast<std::uint32_t>(b));
    const compiler_half ref = static_cast<compiler_half>(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    const std::uint16_t got = float_to_half(f);
    if (std::isnan(f)) mismatches += (got & 0x7C00u) != 0x7C00u || (got & 0x3FFu) == 0;
    else mismatches += got != rb;
  }
  CHECK(mismatches == 0);
  CHECK(float_to_half(1.0f) == 0x3C00);
  CHECK(float_to_half(65504.0f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);        // the midpoint to infinity rounds to even: inf
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);   // a tie rounds to even (zero)
  CHECK(float_to_half(std::ldexp(3.0f, -25)) == 0x0002);   // 1.5 units: tie to even (2)
  CHECK(float_to_half(-0.0f) == 0x8000);
}

TEST_CASE("normalize.float_to_bfloat16") {
  CHECK(float_to_bfloat16(1.0f) == 0x3F80);
  CHECK(float_to_bfloat16(bits_to_float(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(float_to_bfloat16(bits_to_float(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(float_to_bfloat16(bits_to_float(0x3F808001u)) == 0x3F81);
  CHECK(float_to_bfloat16(bits_to_float(0x7F7FFFFFu)) == 0x7F80);  // max float rounds to inf
  CHECK((float_to_bfloat16(NAN) & 0x7FC0) == 0x7FC0);
  // bfloat16 is the top half of a float: exact values survive.
  for (std::uint32_t top : {0x0000u, 0x4049u, 0xC2F7u, 0x0001u})
    CHECK(float_to_bfloat16(bits_to_float(top << 16)) == top);
}

TEST_CASE("normalize.bad_input") {
  normalize_params p;
  p.std[1] = 0.0f;
  float out[3];
  const std::uint8_t in[3] = {1, 2, 3};
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_host({in, out, {1, 1, 1}}, p), doctest::Contains("std[1]"), std::invalid_argument);
  p.std[1] = NAN;
  CHECK_THROWS_AS(normalize_hwc_to_chw_host({in, out, {1, 1, 1}}, p), std::invalid_argument);
  normalize_params q;
  q.out = dtype::i32;
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_host({in, out, {1, 1, 1}}, q), doctest::Contains("int32"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_host({nullptr, out, {1, 1, 1}}, {}), doctest::Contains("null"),
                       std::invalid_argument);
  CHECK_NOTHROW(normalize_hwc_to_chw_host({nullptr, nullptr, {0, 5, 5}}, {}));
  // The device entry point validates before launching anything (no GPU needed to reach the throw).
  CHECK_THROWS_AS(normalize_hwc_to_chw_device({nullptr, nullptr, {1, 1, 1}}, {}, nullptr), std::invalid_argument);
  // Both versions store whole floats (halves): an output off its alignment is named (the device
  // version before any launch).
  alignas(8) std::byte buf[16];
  normalize_params half;
  half.out = dtype::f16;
  CHECK_NOTHROW(normalize_hwc_to_chw_host({in, buf + 4, {1, 1, 1}}, {}));
  CHECK_NOTHROW(normalize_hwc_to_chw_host({in, buf + 2, {1, 1, 1}}, half));
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_host({in, buf + 1, {1, 1, 1}}, {}),
                       doctest::Contains("normalize: the output must be aligned to 4 bytes (its element size)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_host({in, buf + 3, {1, 1, 1}}, half),
                       doctest::Contains("aligned to 2 bytes (its element size); address"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw_device({in, buf + 1, {1, 1, 1}}, {}, nullptr),
                       doctest::Contains("normalize: the output must be aligned to 4 bytes"), std::invalid_argument);
}

TEST_CASE("normalize.fma_instruction_and_libm_paths_agree") {
  const image_batch_shape shape{2, 19, 23};
  const auto in = pattern_images(shape);
  normalize_params p = imagenet_ycbcr();
  p.hflip = true;
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    p.out = t;
    std::vector<std::byte> portable(in.size() * dtype_size(t)), fast(in.size() * dtype_size(t));
    set_simd_level(simd_level::scalar);
    normalize_hwc_to_chw_host({in.data(), portable.data(), shape}, p);
    set_simd_level(cpu_simd_support());
    normalize_hwc_to_chw_host({in.data(), fast.data(), shape}, p);
    CHECK(portable == fast);
  }
}
