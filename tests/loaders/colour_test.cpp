// The colour and histogram steps (pinfeed/ops/colour.hpp): facts of torchvision v2's arithmetic
// that the header states, the parser's refusals, and every step against torchvision v2 itself
// (tests/loaders/colour/torchvision_colour.py writes the inputs and torchvision's outputs).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/colour.hpp"
#include "pinfeed/runtime/npy.hpp"
#include "test_util.hpp"
#include "torchvision_compare.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;

using test::run_step;

TEST_CASE("colour.the_header_states_torchvisions_arithmetic") {
  // grey's weights add to 0.9999: white becomes 254, and a grey pixel x becomes x - 1.
  std::vector<std::uint8_t> white(3 * 4, 255);
  CHECK(run_step("grayscale", white, 2, 2, 3) == std::vector<std::uint8_t>(4, 254));
  std::vector<std::uint8_t> mid(3, 128);
  CHECK(run_step("grayscale(3)", mid, 1, 1, 3) == std::vector<std::uint8_t>(3, 127));
  // autocontrast divides by (hi - lo) / 255 in float32: a range of 1 puts the top at 254.
  std::vector<std::uint8_t> two{10, 11, 10, 11};
  CHECK(run_step("autocontrast", two, 2, 2, 1) == std::vector<std::uint8_t>{0, 254, 0, 254});
  // ... and a range of 255 at 255; a flat channel stays as it is.
  std::vector<std::uint8_t> full{0, 255, 0, 255};
  CHECK(run_step("autocontrast", full, 2, 2, 1) == std::vector<std::uint8_t>{0, 255, 0, 255});
  CHECK(run_step("autocontrast", std::vector<std::uint8_t>(4, 9), 2, 2, 1) == std::vector<std::uint8_t>(4, 9));
  // solarize compares in float32: a threshold of 238.0000010 is 238, so 238 is inverted.
  CHECK(run_step("solarize(238.00000101725262)", {237, 238}, 1, 2, 1) == std::vector<std::uint8_t>{237, 17});
  CHECK(run_step("posterize(3)", {255, 0x9F}, 1, 2, 1) == std::vector<std::uint8_t>{0xE0, 0x80});
  CHECK(run_step("posterize(8)", {255, 0x9F}, 1, 2, 1) == std::vector<std::uint8_t>{255, 0x9F});
  CHECK(run_step("invert", {0, 1, 254}, 1, 1, 3) == std::vector<std::uint8_t>{255, 254, 1});
  CHECK(run_step("brightness(2.5)", {0, 50, 200}, 1, 1, 3) == std::vector<std::uint8_t>{0, 125, 255});
  // Equalize: fewer than 255 pixels besides the top value's leaves a channel as it is.
  std::vector<std::uint8_t> small(100);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::uint8_t>(i);
  CHECK(run_step("equalize", small, 10, 10, 1) == small);
  // 510 pixels of 0, 255 of 1 and 1 of 200: step = (766 - 1) / 255 = 3, lut[1] = (510 + 1) / 3 = 170,
  // lut[200] = (765 + 1) / 3 = 255 (clamped from 255).
  std::vector<std::uint8_t> hist(766, 0);
  std::fill(hist.begin() + 510, hist.begin() + 765, 1);
  hist[765] = 200;
  const auto eq = run_step("equalize", hist, 1, 766, 1);
  CHECK(eq[0] == 0);
  CHECK(eq[600] == 170);
  CHECK(eq[765] == 255);
  // Sharpness: the border as it is, the inside blended with the 3 x 3 blur (S / 13 rounded).
  std::vector<std::uint8_t> dot(9, 0);
  dot[4] = 130;  // S = 650, b = 50; factor 0: b; factor 2: 2 x - b = 210
  CHECK(run_step("sharpness(0)", dot, 3, 3, 1)[4] == 50);
  CHECK(run_step("sharpness(2)", dot, 3, 3, 1)[4] == 210);
  CHECK(run_step("sharpness(0)", dot, 3, 3, 1)[0] == 0);
  CHECK(run_step("sharpness(0)", {9, 200, 3, 4}, 2, 2, 1) == std::vector<std::uint8_t>{9, 200, 3, 4});  // 2 x 2: as it is
  // Saturation leaves a grey image as it is; grayscale of one channel is the channel.
  CHECK(run_step("saturation(0.2)", {9, 200}, 1, 2, 1) == std::vector<std::uint8_t>{9, 200});
  int channels = 0;
  CHECK(run_step("grayscale(3)", {9, 200}, 1, 2, 1, &channels) == std::vector<std::uint8_t>{9, 9, 9, 200, 200, 200});
  CHECK(channels == 3);
  // In place gives what a separate output gives (the steps that allow it).
  std::vector<std::uint8_t> img(3 * 5 * 4);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<std::uint8_t>(i * 37 % 251);
  for (const char* s : {"brightness(1.3)", "contrast(0.4)", "saturation(1.6)", "posterize(5)", "solarize(99)", "autocontrast",
                        "equalize", "invert"}) {
    CAPTURE(s);
    const pipeline p = parse_pipeline(s);
    REQUIRE(p.steps()[0]->in_place());
    auto copy = img;
    const image_spec spec{5, 4, 3, dtype::u8};
    p.steps()[0]->apply({reinterpret_cast<std::byte*>(copy.data()), spec}, {reinterpret_cast<std::byte*>(copy.data()), spec},
                        philox_stream(0, 0, 0));
    CHECK(copy == run_step(s, img, 5, 4, 3));
  }
}

TEST_CASE("colour.each_factory_makes_the_step_its_spelling_makes") {
  // Contract: the C++ factories are the parser's steps: the same name, the same pixels.
  const std::pair<std::shared_ptr<transform>, const char*> made[] = {
      {make_brightness(1.3), "brightness(1.3)"}, {make_contrast(0.4), "contrast(0.4)"},
      {make_saturation(1.6), "saturation(1.6)"}, {make_hue(-0.2), "hue(-0.2)"},
      {make_sharpness(1.8), "sharpness(1.8)"},   {make_posterize(3), "posterize(3)"},
      {make_solarize(99), "solarize(99)"},       {make_autocontrast(), "autocontrast"},
      {make_equalize(), "equalize"},             {make_invert(), "invert"},
      {make_grayscale(3), "grayscale(3)"},       {make_grayscale(), "grayscale"}};
  std::vector<std::uint8_t> img(3 * 6 * 5);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<std::uint8_t>(i * 53 % 241);
  for (const auto& [step, spelling] : made) {
    CAPTURE(spelling);
    const auto parsed = parse_pipeline(spelling).steps()[0];
    CHECK(step->name() == parsed->name());
    const image_spec in{6, 5, 3, dtype::u8};
    const image_spec out = step->output_spec(in);
    REQUIRE(out.bytes() == parsed->output_spec(in).bytes());
    std::vector<std::uint8_t> a(out.bytes()), b(out.bytes());
    auto src = img;
    step->apply({reinterpret_cast<std::byte*>(src.data()), in}, {reinterpret_cast<std::byte*>(a.data()), out}, philox_stream(0, 0, 0));
    src = img;
    parsed->apply({reinterpret_cast<std::byte*>(src.data()), in}, {reinterpret_cast<std::byte*>(b.data()), out}, philox_stream(0, 0, 0));
    CHECK(a == b);
  }
}

TEST_CASE("colour.bad_values_are_refused_at_parse_time_with_a_caret") {
  for (const auto& [text, says] : std::map<std::string, std::string>{
           {"crop(8),posterize(9)", "posterize: bits must be a whole number from 1 to 8, got 9"},
           {"posterize(0)", "bits must be a whole number from 1 to 8, got 0"},
           {"posterize(2.5)", "got 2.5"},
           {"solarize(256)", "solarize: the threshold must be in [0, 255], got 256"},
           {"brightness(-1)", "brightness: the factor must be finite and not negative, got -1"},
           {"sharpness(-0.5)", "sharpness: the factor must be finite and not negative"},
           {"contrast(-0.1)", "contrast: the factor must be finite and not negative, got -0.1"},
           {"saturation(-2)", "saturation: the factor must be finite and not negative, got -2"},
           {"grayscale(2)", "grayscale: 1 or 3 output channels, got 2"},
           {"hue(0.6)", "hue: the factor must be in [-0.5, 0.5], got 0.6"},
           {"invert(1)", "invert"},
           {"contrast", "contrast"}}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS((void)parse_pipeline(text), doctest::Contains(says.c_str()), std::invalid_argument);
  }
  try {
    (void)parse_pipeline("crop(8),posterize(9)");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("\n  crop(8),posterize(9)\n" + std::string(20, ' ') + "^") != std::string::npos);  // under the 9
  }
  // Under the value itself, not where the argument list opens, when spaces come before it.
  for (const char* text : {"posterize( 9)", "solarize(  300)", "hue( 0.75)"}) {
    CAPTURE(text);
    const std::string s = text;
    std::string what;
    try {
      (void)parse_pipeline(s);
    } catch (const std::invalid_argument& e) {
      what = e.what();
    }
    const std::size_t value_at = s.find_first_not_of(' ', s.find('(') + 1);
    CHECK(what.find("\n  " + s + "\n" + std::string(2 + value_at, ' ') + "^") != std::string::npos);
  }
  // A float image and a 4-channel image are refused by the step, naming it.
  CHECK_THROWS_WITH_AS((void)parse_pipeline("invert").steps()[0]->output_spec({4, 4, 3, dtype::f32}),
                       doctest::Contains("invert"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("hue(0.1)").steps()[0]->output_spec({4, 4, 1, dtype::u8}),
                       doctest::Contains("hue(0.1): needs 3 channels (a grey image has no hue)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_pipeline("equalize").steps()[0]->output_spec({4, 4, 4, dtype::u8}),
                       doctest::Contains("equalize: needs 1 or 3 channels"), std::invalid_argument);
  // The ops themselves name what is wrong.
  std::uint8_t px[3] = {1, 2, 3};
  CHECK_THROWS_WITH_AS(ops::invert_u8(px, 1, 2, px), doctest::Contains("invert: images of 1 or 3 channels, not 2"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::sharpness_u8(px, 1, 1, 3, 1.0, px), doctest::Contains("must not be the input"),
                       std::invalid_argument);
}

TEST_CASE("colour.every_step_equals_torchvision_v2") {
  (void)test::compare_with_torchvision("loaders/colour/torchvision_colour.py", true);
}
