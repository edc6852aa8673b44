#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "pinfeed/ops/normalize.hpp"

using namespace pinfeed::ops;

TEST_CASE("normalize.scale_layout_hwc_to_chw") {
  const image_batch_shape shape{2, 3, 4};
  std::vector<std::uint8_t> in(shape.pixels() * 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>((i * 37) % 256);
  std::vector<float> out(in.size(), -1.f);
  normalize_hwc_to_chw(in.data(), out.data(), shape, {});
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
  const image_batch_shape shape{1, 1, 2};
  const std::uint8_t in[6] = {0, 128, 255, 10, 20, 30};
  float out[6];
  normalize_hwc_to_chw(in, out, shape, p);
  for (int x = 0; x < 2; ++x)
    for (int c = 0; c < 3; ++c)
      CHECK(out[c * 2 + x] == doctest::Approx((in[x * 3 + c] / 255.0f - p.mean[c]) / p.std[c]).epsilon(1e-5));
}

TEST_CASE("normalize.bad_input") {
  normalize_params p;
  p.std[1] = 0.0f;
  float out[3];
  const std::uint8_t in[3] = {1, 2, 3};
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw(in, out, {1, 1, 1}, p), doctest::Contains("std[1]"),
                       std::invalid_argument);
  p.std[1] = NAN;
  CHECK_THROWS_AS(normalize_hwc_to_chw(in, out, {1, 1, 1}, p), std::invalid_argument);
  CHECK_THROWS_WITH_AS(normalize_hwc_to_chw(nullptr, out, {1, 1, 1}, {}), doctest::Contains("null"),
                       std::invalid_argument);
  CHECK_NOTHROW(normalize_hwc_to_chw(nullptr, nullptr, {0, 5, 5}, {}));  // empty batch: nothing to do
  // The device entry point validates before launching anything (no GPU needed to reach the throw).
  CHECK_THROWS_AS(normalize_hwc_to_chw_device(nullptr, nullptr, {1, 1, 1}, {}, nullptr), std::invalid_argument);
}
