// The random steps (color_jitter, random_grayscale, random_rotation, random_affine,
// random_gaussian_blur, random_erasing) and the policies: every output is the pipeline of
// deterministic steps that explain() names for that sample; what they draw follows torchvision's
// distributions (chi-square or counts over 20,000 samples, p printed); the refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "step_checks.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

std::vector<std::uint8_t> textured(std::int64_t h, std::int64_t w, int c, std::uint64_t seed) {
  std::vector<std::uint8_t> img(static_cast<std::size_t>(h * w * c));
  philox_stream rng(seed, 0, 0);
  for (std::size_t i = 0; i < img.size(); ++i) img[i] = static_cast<std::uint8_t>((i * 7 + rng.below(90)) % 256);
  return img;
}

/// Runs `steps` (a parsed pipeline of deterministic steps) over an image.
std::vector<std::uint8_t> run_pipeline(const pipeline& p, std::vector<std::uint8_t> img, image_spec spec) {
  for (const auto& step : p.steps()) {
    const image_spec out_spec = step->output_spec(spec);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(out_spec.height * out_spec.width * out_spec.channels));
    step->apply({reinterpret_cast<std::byte*>(img.data()), spec}, {reinterpret_cast<std::byte*>(out.data()), out_spec},
                philox_stream(0, 0, 0));
    img = std::move(out);
    spec = out_spec;
  }
  return img;
}

/// Numbers in a text, in order.
std::vector<double> numbers_in(const std::string& s) {
  std::vector<double> out;
  static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it) out.push_back(std::stod(it->str()));
  return out;
}

}  // namespace

TEST_CASE("random_steps.every_output_is_the_pipeline_its_explanation_names") {
  for (const char* spelling :
       {"hflip(0.5)", "color_jitter(0.4,0.4,0.4,0.1)", "color_jitter(0.8,0,0.5,0.5)", "random_grayscale(0.5)", "random_rotation(45)",
        "random_rotation(180,interpolation=bilinear)", "random_affine(30,0.2,0.1,0.8,1.2,10)",
        "random_affine(5,0,0.3,1,1,0,128,interpolation=bilinear)", "random_gaussian_blur(5,0.1,3)", "random_erasing(0.7)",
        "random_erasing(1,0.02,0.5,0.3,3.3,value=200)", "trivial_augment", "rand_augment(3,15)", "auto_augment(svhn)",
        "trivial_augment(interpolation=bilinear,fill=77)"}) {
    CAPTURE(spelling);
    const pipeline p = parse_pipeline(spelling);
    const auto& step = *p.steps()[0];
    int explained_empty = 0;
    for (const int c : {3, 1}) {
      for (std::uint64_t index = 0; index < 150; ++index) {
        const image_spec spec{23, 30, c, dtype::u8};
        const auto img = textured(23, 30, c, index);
        const philox_stream rng(9, 2, index);
        std::vector<std::uint8_t> got(img.size());
        step.apply({reinterpret_cast<std::byte*>(const_cast<std::uint8_t*>(img.data())), spec},
                   {reinterpret_cast<std::byte*>(got.data()), spec}, rng);
        const std::string why = step.explain(spec, rng);
        CAPTURE(why);
        explained_empty += why.empty();
        const auto want = run_pipeline(parse_pipeline(why), img, spec);
        CHECK(got == want);
        if (got != want) break;
      }
    }
    MESSAGE(std::string(spelling) << ": " << explained_empty << " of 300 samples as they were");
  }
}

TEST_CASE("random_steps.draws_follow_torchvisions_distributions") {
  constexpr int samples = 20000;
  const image_spec spec{224, 200, 3, dtype::u8};
  const auto explain = [&](const char* spelling, std::uint64_t index) {
    return parse_pipeline(spelling).steps()[0]->explain(spec, philox_stream(21, 0, index));
  };
  {  // random_rotation(40): the angle uniform over [-40, 40).
    std::vector<double> bins(16);
    for (int i = 0; i < samples; ++i) {
      const double a = numbers_in(explain("random_rotation(40)", static_cast<std::uint64_t>(i)))[0];
      REQUIRE(a >= -40.0);
      REQUIRE(a < 40.0);
      bins[static_cast<std::size_t>((a + 40.0) / 5.0)] += 1;
    }
    test::check_uniform("random_rotation(40): angle in 16 bins", bins);
  }
  {  // random_affine(30, 0.2, 0.1, 0.8, 1.2, 10): each parameter within its own range, the scale
     // uniform over [0.8, 1.2); the translations whole pixels within 0.2 x 200 and 0.1 x 224.
    std::vector<double> scales(8);
    for (int i = 0; i < samples; ++i) {
      const auto d = numbers_in(explain("random_affine(30,0.2,0.1,0.8,1.2,10)", static_cast<std::uint64_t>(i)));
      REQUIRE(d.size() >= 5);
      REQUIRE(std::abs(d[0]) <= 30.0);
      REQUIRE(std::abs(d[1]) <= 40.0);
      REQUIRE(std::abs(d[2]) <= 22.0);
      REQUIRE(d[1] == std::nearbyint(d[1]));
      REQUIRE(d[3] >= 0.8);
      REQUIRE(d[3] < 1.2);
      REQUIRE(std::abs(d[4]) <= 10.0);
      scales[static_cast<std::size_t>((d[3] - 0.8) / 0.05)] += 1;
    }
    test::check_uniform("random_affine: the scale in 8 bins", scales);
  }
  {  // color_jitter(0.5, 0.5, 0.5, 0.2): each order of the four equally likely; the factors in range.
    std::map<std::string, double> orders;
    std::vector<double> brightness(10);
    for (int i = 0; i < samples; ++i) {
      const std::string e = explain("color_jitter(0.5,0.5,0.5,0.2)", static_cast<std::uint64_t>(i));
      std::vector<std::pair<std::size_t, std::string>> at;
      for (const char* name : {"brightness", "contrast", "saturation", "hue"}) at.emplace_back(e.find(name), name);
      std::sort(at.begin(), at.end());
      std::string order;
      for (const auto& [pos, name] : at) order += name + " ";
      orders[order] += 1;
      const double b = numbers_in(e.substr(e.find("brightness(")))[0];
      REQUIRE(b >= 0.5);
      REQUIRE(b < 1.5);
      brightness[static_cast<std::size_t>((b - 0.5) * 10)] += 1;
      const double h = numbers_in(e.substr(e.find("hue(")))[0];
      REQUIRE(std::abs(h) <= 0.2);
    }
    REQUIRE(orders.size() == 24);
    std::vector<double> counts;
    for (const auto& [k, v] : orders) counts.push_back(v);
    test::check_uniform("color_jitter: the 24 orders", counts);
    test::check_uniform("color_jitter: the brightness factor in 10 bins", brightness);
  }
  {  // random_grayscale(0.3) and random_erasing(0.25): applied with their probability.
    for (const auto& [spelling, p] : std::vector<std::pair<const char*, double>>{{"random_grayscale(0.3)", 0.3}, {"random_erasing(0.25)", 0.25}}) {
      double applied = 0;
      for (int i = 0; i < samples; ++i) applied += !explain(spelling, static_cast<std::uint64_t>(i)).empty();
      const double e = samples * p;
      const double x = (applied - e) * (applied - e) / e + (applied - e) * (applied - e) / (samples - e);
      const double pv = test::chi_square_p(x, 1);
      MESSAGE(std::string(spelling) << ": applied " << applied << " of " << samples << ", chi-square " << x << ", p = " << pv);
      CHECK(pv > 0.001);
    }
  }
  {  // random_erasing(1): the box inside the image, its area within the scale range (rounded), its
     // aspect within the ratio range (rounded), its left edge uniform over the places it can take.
    double placed = 0;
    for (int i = 0; i < samples; ++i) {
      const std::string e = explain("random_erasing(1)", static_cast<std::uint64_t>(i));
      if (e.empty()) continue;
      const auto v = numbers_in(e);
      REQUIRE(v.size() >= 4);
      const double y = v[0], x = v[1], h = v[2], w = v[3];
      CHECK(y + h <= 224);
      CHECK(x + w <= 200);
      CHECK(h < 224);  // torchvision's rule: strictly inside
      CHECK(w < 200);
      CHECK(h * w <= 0.33 * 224 * 200 * 1.2 + 2 * (h + w));
      CHECK(h * w >= 0.02 * 224 * 200 * 0.8 - 2 * (h + w));
      if (h >= 2 && w >= 2) {
        CHECK(h / w <= 3.3 * (h + 1) / (h - 1) * (w + 1) / (w - 1));
        CHECK(h / w >= 0.3 * (h - 1) / (h + 1) * (w - 1) / (w + 1));
      }
      placed += 1;
    }
    CHECK(placed > samples * 0.99);  // the box fits within 10 tries almost always at 224 x 200
  }
  {  // A box as large as a side is refused (strictly inside, as torchvision's): on 20 x 20 with 90-99%
     // of the area and a square-ish aspect, sides of 19 pass and sides of 20 try again.
    const image_spec small{20, 20, 3, dtype::u8};
    const auto big = parse_pipeline("random_erasing(1,0.9,0.99,0.9,1.1)").steps()[0];
    int nineteen = 0;
    for (int i = 0; i < 2000; ++i) {
      const auto v = numbers_in(big->explain(small, philox_stream(22, 0, static_cast<std::uint64_t>(i))));
      if (v.empty()) continue;
      CHECK(v[2] < 20);
      CHECK(v[3] < 20);
      nineteen += v[2] == 19 && v[3] == 19;
    }
    CHECK(nineteen > 100);
  }
}

TEST_CASE("random_steps.random_erasing_with_a_value_per_channel_fills_each_channel_with_its_own") {
  // Through the C++ API (the text form has no per-channel values): one value per channel of an
  // RGB image is taken, each channel's box filled with its own; a count that is not the image's
  // channels is refused by output_spec, naming both.
  const auto step = make_random_erasing(1, 0.1, 0.3, 0.5, 2.0, {10, 200, 37});
  const image_spec rgb{24, 20, 3, dtype::u8};
  CHECK(step->output_spec(rgb).channels == 3);
  int erased = 0;
  for (std::uint64_t i = 0; i < 20; ++i) {
    const philox_stream rng(5, 0, i);
    const auto v = numbers_in(step->explain(rgb, rng));
    if (v.size() < 4) continue;
    ++erased;
    const auto y0 = static_cast<std::int64_t>(v[0]), x0 = static_cast<std::int64_t>(v[1]);
    const auto h = static_cast<std::int64_t>(v[2]), w = static_cast<std::int64_t>(v[3]);
    const std::vector<std::uint8_t> in = textured(24, 20, 3, i);
    std::vector<std::uint8_t> out(in.size());
    step->apply({const_cast<std::byte*>(reinterpret_cast<const std::byte*>(in.data())), rgb},
                {reinterpret_cast<std::byte*>(out.data()), rgb}, rng);
    for (std::int64_t y = 0; y < 24; ++y)
      for (std::int64_t x = 0; x < 20; ++x)
        for (int k = 0; k < 3; ++k) {
          const auto at = static_cast<std::size_t>((y * 20 + x) * 3 + k);
          const bool inside = y >= y0 && y < y0 + h && x >= x0 && x < x0 + w;
          CHECK(out[at] == (inside ? std::uint8_t{k == 0 ? 10 : k == 1 ? 200 : 37} : in[at]));
        }
  }
  CHECK(erased > 10);  // p = 1: a box almost always fits
  CHECK_THROWS_WITH_AS((void)step->output_spec({24, 20, 1, dtype::u8}), doctest::Contains("3 values for an image of 1 channels"),
                       pinfeed::invalid_argument);
  const auto two = make_random_erasing(1, 0.1, 0.3, 0.5, 2.0, {10, 200});
  CHECK_THROWS_WITH_AS((void)two->output_spec(rgb), doctest::Contains("2 values for an image of 3 channels"), pinfeed::invalid_argument);
}

TEST_CASE("random_steps.bad_values_are_refused_with_a_caret") {
  for (const auto& [text, where, says] : std::vector<std::tuple<std::string, std::size_t, std::string>>{
           {"color_jitter(0.4,0.4,0.4,0.6)", 25, "hue must be in [0, 0.5], got 0.6"},
           {"color_jitter(-1)", 13, "brightness must be in [0, 1e+06], got -1"},
           {"random_grayscale(1.5)", 17, "p must be in [0, 1], got 1.5"},
           {"random_rotation(-3)", 16, "degrees must be >= 0, got -3"},
           {"random_rotation(30,300)", 19, "the fill must be in [0, 255], got 300"},
           {"random_affine(10,1.5,0,1,1,0)", 17, "a fraction of the size in [0, 1], got 1.5"},
           {"random_affine(10,0,0,1.2,1.1,0)", 21, "the scale range must be positive and increasing"},
           {"random_gaussian_blur(4)", 21, "odd whole number"},
           {"random_gaussian_blur(3,0,2)", 23, "sigma's least must be greater than 0"},
           {"random_gaussian_blur(3,1)", 23, "both sigma's least and greatest, or neither"},
           {"random_erasing(2)", 15, "p must be in [0, 1], got 2"},
           {"random_erasing(0.5,0.5,0.1,0.3,3.3)", 19, "the scale range must be within (0, 1] and increasing"},
           {"random_erasing(0.5,value=300)", 25, "the value must be in [0, 255] or random, got 300"},
           {"random_erasing(0.5,value=noise)", 25, "value must be a finite number or one of random, not 'noise'"},
           {"erase(1,2,3.5,4)", 10, "whole numbers, got 3.5"}}) {
    test::check_refused_at(text, says, where);
  }
  // The C++ API takes what the parser would refuse: a negative angle is an empty range [d, -d],
  // refused however small (down to the least negative double), as is a negative shear.
  for (const double d : {-3.0, -std::numeric_limits<double>::denorm_min()}) {
    CAPTURE(d);
    CHECK_THROWS_WITH_AS((void)make_random_rotation(d), doctest::Contains("random_rotation: the degrees' range is empty"),
                         pinfeed::invalid_argument);
    CHECK_THROWS_WITH_AS((void)make_random_affine(d, 0, 0, 1, 1, 0), doctest::Contains("random_affine: the degrees' range is empty"),
                         pinfeed::invalid_argument);
    CHECK_THROWS_WITH_AS((void)make_random_affine(0, 0, 0, 1, 1, d), doctest::Contains("random_affine: the shear's range is empty"),
                         pinfeed::invalid_argument);
  }
  CHECK_NOTHROW((void)make_random_rotation(0.0));
  CHECK_NOTHROW((void)make_random_affine(0, 0, 0, 1, 1, 0));
  // Numbers past the double's normal range read as strtod reads them: below it as they are (a name
  // with one reads back as the same step), past the largest refused as not finite.
  const std::string tiny = parse_pipeline("random_rotation(5e-324)").steps()[0]->name();
  CHECK(parse_pipeline(tiny).steps()[0]->name() == tiny);
  test::check_refused_at("random_rotation(1e999)", "expected a finite number", 16);
  test::check_refused_at("random_erasing(0.5,value=1e999)", "value must be a finite number", 25);
  // Names read back as the same step.
  for (const char* s : {"color_jitter(0.4,0.4,0.4,0.1)", "random_grayscale(0.1)", "random_rotation(30,0)",
                        "random_affine(10,0.1,0.2,0.9,1.1,5,0,interpolation=bilinear)", "random_gaussian_blur(5,0.1,2)",
                        "random_erasing(0.5,0.02,0.33,0.3,3.3)", "random_erasing(0.25,0.02,0.33,0.3,3.3,value=random)",
                        "erase(1,2,3,4,value=9)"}) {
    CAPTURE(s);
    CHECK(parse_pipeline(s).steps()[0]->name() == s);
  }
  // random_erasing after normalize explains itself as erase on a float image: erase takes it.
  const auto erased = parse_pipeline("erase(1,2,3,4,value=0)").steps()[0];
  CHECK(erased->output_spec({8, 8, 3, dtype::f32}).type == dtype::f32);
  std::vector<float> floats(8 * 8 * 3, -1.5f);
  erased->apply({reinterpret_cast<std::byte*>(floats.data()), {8, 8, 3, dtype::f32}},
                {reinterpret_cast<std::byte*>(floats.data()), {8, 8, 3, dtype::f32}}, philox_stream(0, 0, 0));
  CHECK(floats[(1 * 8 + 2) * 3] == 0.0f);
  CHECK(floats[(3 * 8 + 5) * 3 + 2] == 0.0f);  // the box's last pixel (rows 1-3, columns 2-5)
  CHECK(floats[(4 * 8 + 2) * 3] == -1.5f);      // the row below it
  // erase's box must lie inside the image.
  CHECK_THROWS_WITH_AS((void)parse_pipeline("erase(5,5,10,10)").steps()[0]->output_spec({12, 12, 3, dtype::u8}),
                       doctest::Contains("the box reaches past the image"), std::invalid_argument);
}

TEST_CASE("random_steps.a_known_size_is_checked_where_the_other_is_not_known") {
  // Contract: erase's box and gaussian_blur's reflected border are checked against each size the
  // input spec knows (a negative size is a variable-size dataset's: not known). A spec that knows
  // one size only is still checked on it, and never against the unknown one.
  const auto erase = parse_pipeline("erase(5,6,3,4)").steps()[0];  // rows 5-7, columns 6-9
  for (const image_spec in : {image_spec{8, -1, 3, dtype::u8}, image_spec{-1, 10, 3, dtype::u8}, image_spec{-1, -1, 3, dtype::u8}}) {
    CAPTURE(in.height);
    CAPTURE(in.width);
    CHECK(erase->output_spec(in).height == in.height);
  }
  for (const image_spec in : {image_spec{7, -1, 3, dtype::u8}, image_spec{-1, 9, 3, dtype::u8}}) {
    CAPTURE(in.height);
    CHECK_THROWS_WITH_AS((void)erase->output_spec(in), doctest::Contains("the box reaches past the image"), std::invalid_argument);
  }
  const auto blur = parse_pipeline("gaussian_blur(7,1,3,1)").steps()[0];  // a border of 3 columns and 1 row
  for (const image_spec in : {image_spec{2, -1, 3, dtype::u8}, image_spec{-1, 4, 3, dtype::u8}, image_spec{-1, -1, 3, dtype::u8}}) {
    CAPTURE(in.height);
    CHECK(blur->output_spec(in).width == in.width);
  }
  for (const image_spec in : {image_spec{1, -1, 3, dtype::u8}, image_spec{-1, 3, 3, dtype::u8}}) {
    CAPTURE(in.height);
    CHECK_THROWS_WITH_AS((void)blur->output_spec(in), doctest::Contains("the reflected border"), std::invalid_argument);
  }
}
