// gaussian_blur (pinfeed/ops/blur.hpp): the kernel and the reflection the header states, the
// parser's refusals with their carets, and every case against torchvision v2 itself
// (tests/loaders/blur/torchvision_blur.py writes the inputs and torchvision's outputs).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/blur.hpp"
#include "test_util.hpp"
#include "step_checks.hpp"
#include "torchvision_compare.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;
using test::run_step;

TEST_CASE("blur.the_header_states_torchvisions_kernel_and_reflection") {
  // One tap: the image as it is.
  CHECK(ops::gaussian_kernel1d(1, 0.3) == std::vector<float>{1.0f});
  // Three taps, sigma 1: x = -1/sqrt2, 0, 1/sqrt2, so the weights are softmax(-0.5, 0, -0.5).
  const auto k3 = ops::gaussian_kernel1d(3, 1.0);
  REQUIRE(k3.size() == 3);
  CHECK(k3[0] == doctest::Approx(0.27406862).epsilon(1e-6));
  CHECK(k3[1] == doctest::Approx(0.45186276).epsilon(1e-6));
  CHECK(k3[0] == k3[2]);
  // Symmetric and summing to 1 at every size.
  for (int k = 1; k <= 31; k += 2) {
    const auto w = ops::gaussian_kernel1d(k, 0.15 * k + 0.35);
    double sum = 0;
    for (int i = 0; i < k; ++i) {
      CHECK(w[static_cast<std::size_t>(i)] == w[static_cast<std::size_t>(k - 1 - i)]);
      sum += w[static_cast<std::size_t>(i)];
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }
  // A dot in the middle spreads as the kernel's outer product: 255 x 0.45186^2 = 52.07, 255 x
  // 0.45186 x 0.27407 = 31.58, 255 x 0.27407^2 = 19.15.
  std::vector<std::uint8_t> dot(25, 0);
  dot[12] = 255;
  const auto b = run_step("gaussian_blur(3,1)", dot, 5, 5, 1);
  CHECK(b[12] == 52);
  CHECK(b[7] == 32);
  CHECK(b[11] == 32);
  CHECK(b[6] == 19);
  CHECK(b[0] == 0);
  // Reflection repeats no edge: a bright first sample of a row sees itself once (0.45186 x 255 =
  // 115.2); an edge repeated would give (0.45186 + 0.27407) x 255 = 185.
  const auto r = run_step("gaussian_blur(3,1,1,1)", {255, 0, 0, 0}, 1, 4, 1);
  CHECK(r == std::vector<std::uint8_t>{115, 70, 0, 0});
  // A flat image stays flat, whatever the kernel.
  for (const char* s : {"gaussian_blur(9,0.3)", "gaussian_blur(5)", "gaussian_blur(3,7,9,0.5)"}) {
    CAPTURE(s);
    CHECK(run_step(s, std::vector<std::uint8_t>(3 * 10 * 11, 77), 10, 11, 3) == std::vector<std::uint8_t>(3 * 10 * 11, 77));
  }
  // In place gives what a separate output gives.
  std::vector<std::uint8_t> img(3 * 7 * 6);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<std::uint8_t>(i * 37 % 251);
  auto copy = img;
  ops::gaussian_blur_u8(copy.data(), 7, 6, 3, 5, 3, 1.2, 0.7, copy.data());
  CHECK(copy == run_step("gaussian_blur(5,1.2,3,0.7)", img, 7, 6, 3));
  // The spelling reads back as the same step; sigma 0 is torchvision's default, 0.15 k + 0.35.
  CHECK(parse_pipeline("gaussian_blur(5)").steps()[0]->name() == "gaussian_blur(5,1.1)");
  CHECK(parse_pipeline("gaussian_blur(3,0,7,2)").steps()[0]->name() == "gaussian_blur(3,0.8,7,2)");
  const std::string n = parse_pipeline("gaussian_blur(3,0.25,7,2)").steps()[0]->name();
  CHECK(parse_pipeline(n).steps()[0]->name() == n);
}

TEST_CASE("blur.bad_values_are_refused_with_a_caret_under_the_value") {
  for (const auto& [text, where] : std::map<std::string, std::size_t>{{"gaussian_blur(4)", 14},
                                                                      {"gaussian_blur(0,1)", 14},
                                                                      {"crop(8),gaussian_blur(3,-1)", 24},
                                                                      {"gaussian_blur(3, 1, 6, 1)", 20},
                                                                      {"gaussian_blur(3,1,5,-2)", 20},
                                                                      {"gaussian_blur(3,1,5)", 18}}) {
    test::check_refused_at(text, "gaussian_blur: ", where);
  }

  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(4)"), doctest::Contains("odd whole number from 1 to 1023, got 4"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(3,-0.5)"), doctest::Contains("sigma must be greater than 0"),
                       std::invalid_argument);
  // A sigma is computed with as a float32: one that rounds to 0 or past its range is refused.
  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(3,1e-50)"), doctest::Contains("greater than 0 and a float32's"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("random_gaussian_blur(3,0.5,1e39)"), doctest::Contains("sigma's greatest must be finite"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)make_gaussian_blur(3, 2), doctest::Contains("got 2"), bad_transform_argument);
  // Contract: random_gaussian_blur(K) draws sigma from torchvision's default range, [0.1, 2.0].
  CHECK(parse_pipeline("random_gaussian_blur(5)").steps()[0]->name() == "random_gaussian_blur(5,0.1,2)");
  CHECK(parse_pipeline("random_gaussian_blur(5,0.3,1.5)").steps()[0]->name() == "random_gaussian_blur(5,0.3,1.5)");
  // An image not larger than the reflected border, a float image and 4 channels: refused by name.
  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(9)").steps()[0]->output_spec({4, 20, 3, dtype::u8}),
                       doctest::Contains("taller than 4 pixels"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(3)").steps()[0]->output_spec({4, 4, 3, dtype::f32}),
                       doctest::Contains("gaussian_blur(3,0.8)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("gaussian_blur(3)").steps()[0]->output_spec({4, 4, 4, dtype::u8}),
                       doctest::Contains("needs 1 or 3 channels"), std::invalid_argument);
  std::uint8_t px[12] = {};
  CHECK_THROWS_WITH_AS(ops::gaussian_blur_u8(px, 2, 2, 3, 5, 5, 1.0, 1.0, px), doctest::Contains("5x5 kernel reflects 2 columns"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::gaussian_blur_u8(px, 2, 2, 3, 3, 3, 0.0, 1.0, px), doctest::Contains("sigma"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::gaussian_blur_u8(px, 2, 2, 2, 3, 3, 1.0, 1.0, px), doctest::Contains("1 or 3 channels, not 2"),
                       std::invalid_argument);
}

TEST_CASE("blur.every_case_equals_torchvision_v2") {
  (void)test::compare_with_torchvision("loaders/blur/torchvision_blur.py", false);
}
