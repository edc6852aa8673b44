// The warps (pinfeed/ops/geometry.hpp): facts of torchvision's conventions that the header
// states, the parser's refusals with their carets, and every case against torchvision v2 itself
// (tests/loaders/geometry/torchvision_geometry.py writes the inputs and torchvision's outputs).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/geometry.hpp"
#include "test_util.hpp"
#include "step_checks.hpp"
#include "torchvision_compare.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;
using test::run_step;

TEST_CASE("geometry.the_header_states_torchvisions_conventions") {
  // 2 x 3, one channel: 1 2 3 / 4 5 6.
  const std::vector<std::uint8_t> img{1, 2, 3, 4, 5, 6};
  CHECK(run_step("rotate(0)", img, 2, 3, 1) == img);
  CHECK(run_step("rotate(180)", img, 2, 3, 1) == std::vector<std::uint8_t>{6, 5, 4, 3, 2, 1});
  CHECK(run_step("rotate(-180)", img, 2, 3, 1) == std::vector<std::uint8_t>{6, 5, 4, 3, 2, 1});
  CHECK(run_step("rotate(720)", img, 2, 3, 1) == img);
  // A square image turns a quarter counter-clockwise for 90 (torch.rot90): 1 2 / 3 4 -> 2 4 / 1 3.
  CHECK(run_step("rotate(90)", {1, 2, 3, 4}, 2, 2, 1) == std::vector<std::uint8_t>{2, 4, 1, 3});
  CHECK(run_step("rotate(-90)", {1, 2, 3, 4}, 2, 2, 1) == std::vector<std::uint8_t>{3, 1, 4, 2});
  // Translations move the picture by whole pixels, the rest 0 (no fill) or the fill.
  CHECK(run_step("translate_x(1)", img, 2, 3, 1) == std::vector<std::uint8_t>{0, 1, 2, 0, 4, 5});
  CHECK(run_step("translate_x(-1.9)", img, 2, 3, 1) == std::vector<std::uint8_t>{2, 3, 0, 5, 6, 0});  // truncated to -1
  CHECK(run_step("translate_y(1,9)", img, 2, 3, 1) == std::vector<std::uint8_t>{9, 9, 9, 1, 2, 3});
  CHECK(run_step("affine(0,1,0,1,0,0)", img, 2, 3, 1) == std::vector<std::uint8_t>{0, 1, 2, 0, 4, 5});
  // Bilinear with fill 0 blends the border toward 0 twice (the mask trick): half a pixel of shift
  // gives 0.5 x (value x 0.5) at the edge; without a fill once.
  const std::vector<std::uint8_t> flat(4 * 4, 200);
  const auto once = run_step("affine(0,0.5,0,1,0,0,interpolation=bilinear)", flat, 4, 4, 1);
  const auto twice = run_step("affine(0,0.5,0,1,0,0,0,interpolation=bilinear)", flat, 4, 4, 1);
  CHECK(once[0] == 100);
  CHECK(twice[0] == 50);
  CHECK(once[1] == 200);
  CHECK(twice[1] == 200);
  // Nearest with a fill of 255 keeps a white image white under any turn; bilinear does not: its
  // mask blend, ((v - 255) k) + 255 with v = 255 k, darkens where a pixel is partly outside.
  const std::vector<std::uint8_t> white(3 * 9 * 7, 255);
  CHECK(run_step("rotate(33,255)", white, 9, 7, 3) == white);
  CHECK(run_step("shear_x(0.7,255)", white, 9, 7, 3) == white);
  const auto edge = run_step("rotate(33,255,interpolation=bilinear)", white, 9, 7, 3);
  CHECK(*std::min_element(edge.begin(), edge.end()) < 255);
  CHECK(edge[3 * (4 * 7 + 3)] == 255);  // the middle
  // The spelling reads back as the same step.
  for (const char* s : {"rotate(30)", "rotate(30,128,interpolation=bilinear)", "affine(10,2,-3,1.1,5,-4)", "shear_y(0.25,7)",
                        "translate_x(-3,interpolation=bilinear)"}) {
    CAPTURE(s);
    CHECK(parse_pipeline(s).steps()[0]->name() == s);
  }
  CHECK(parse_pipeline("rotate( 30 , interpolation = nearest )").steps()[0]->name() == "rotate(30)");
  // The warps use their values in double: the spelling keeps every bit (30.000000001 is 30 as a float).
  CHECK(parse_pipeline("rotate(30.000000001)").steps()[0]->name() == "rotate(30.000000001)");
  // The matrix: torchvision's inverse for a pure rotation about the middle.
  const auto m = ops::inverse_affine_matrix(0, 0, 90, 0, 0, 1, 0, 0);
  CHECK(m[0] == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(m[1] == doctest::Approx(1.0));
  CHECK(m[3] == doctest::Approx(-1.0));
}

TEST_CASE("geometry.bad_values_are_refused_with_a_caret_under_the_value") {
  for (const auto& [text, where] : std::map<std::string, std::size_t>{{"rotate(30,300)", 10},
                                                                      {"affine(1,2,3,0,5,6)", 13},
                                                                      {"affine(1,2,3,-1,5,6,7)", 13},
                                                                      {"affine(0,0,0,1e-320,0,0)", 13},
                                                                      {"affine(0,1e308,1e308,0.5,0,0)", 21},
                                                                      {"rotate(30,interpolation=cubic)", 24},
                                                                      {"rotate(30,interp=bilinear)", 10},
                                                                      {"shear_x(0.3,interpolation=nearest,interpolation=bilinear)", 34},
                                                                      {"translate_y(2,-1)", 14},
                                                                      {"rotate(interpolation=bilinear,30)", 30}}) {
    test::check_refused_at(text, "", where);
  }

  // A warp whose inverse overflows would fail every sample at run time: refused when parsed, and
  // one just inside the doubles' range is taken.
  CHECK_THROWS_WITH_AS((void)parse_pipeline("affine(0,0,0,1e-320,0,0)"),
                       doctest::Contains("with translation (0, 0) has no finite inverse warp"),
                       std::invalid_argument);
  CHECK_NOTHROW((void)parse_pipeline("affine(0,0,0,1e-300,0,0)"));
  CHECK_THROWS_WITH_AS((void)parse_pipeline("random_affine(10,0.5,0,1e-320,1e-320,0)"),
                       doctest::Contains("random_affine: the least scale 9.99989e-321 has no finite inverse warp"), std::invalid_argument);
  CHECK_NOTHROW((void)parse_pipeline("random_affine(10,0.5,0,1e-200,1,0)"));
  CHECK_THROWS_WITH_AS((void)parse_pipeline("rotate(30,interpolation=cubic)"),
                       doctest::Contains("interpolation must be one of nearest, bilinear, not 'cubic'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("rotate(30,interp=bilinear)"), doctest::Contains("its options: interpolation"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("rotate(30,1,2)"), doctest::Contains("rotate takes 1 to 2 argument(s), got 3"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)make_rotate(10, 256.0), doctest::Contains("the fill must be in [0, 255], got 256"),
                       bad_transform_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("rotate(3)").steps()[0]->output_spec({4, 4, 3, dtype::f32}),
                       doctest::Contains("rotate(3)"), std::invalid_argument);
  std::uint8_t px[12] = {};
  CHECK_THROWS_WITH_AS(ops::rotate_u8(px, 2, 2, 3, 10, ops::interpolation::nearest, std::nullopt, px),
                       doctest::Contains("must not be the input"), std::invalid_argument);
  std::uint8_t out[12] = {};
  CHECK_THROWS_WITH_AS(ops::affine_u8(px, 2, 2, 3, 10, 0, 0, 0.0, 0, 0, ops::interpolation::nearest, std::nullopt, out),
                       doctest::Contains("scale must be finite and greater than 0"), std::invalid_argument);
}

TEST_CASE("geometry.every_case_equals_torchvision_v2") {
  (void)test::compare_with_torchvision("loaders/geometry/torchvision_geometry.py", true);
}
