#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>


#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "test_util.hpp"
#include "transform_fixtures.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

using test::owned_image;
using test::random_image;
using test::run_step;

TEST_CASE("transforms.crop_windows") {
  auto im = random_image(8, 9, 1);
  const auto crop = make_random_crop(6);
  std::set<std::pair<int, int>> offsets;
  for (std::uint64_t i = 0; i < 400; ++i) {
    const auto out = run_step(*crop, im, philox_stream(3, 0, i, 100));
    CHECK(out.spec.height == 6);
    CHECK(out.spec.width == 6);
    // The output is exactly one window of the input; find which.
    int found = 0;
    for (int y0 = 0; y0 <= 2; ++y0)
      for (int x0 = 0; x0 <= 3; ++x0) {
        bool same = true;
        for (int y = 0; y < 6 && same; ++y)
          same = std::memcmp(out.bytes.data() + y * 6 * 3, im.bytes.data() + ((y0 + y) * 9 + x0) * 3, 18) == 0;
        if (same) {
          ++found;
          offsets.insert({y0, x0});
        }
      }
    REQUIRE(found == 1);
  }
  CHECK(offsets.size() == 12);  // every placement occurs
  // Same stream, same window.
  CHECK(run_step(*crop, im, philox_stream(3, 0, 7, 100)).bytes == run_step(*crop, im, philox_stream(3, 0, 7, 100)).bytes);
  const auto centre = run_step(*make_center_crop(4), im, philox_stream(0, 0, 0));
  for (int y = 0; y < 4; ++y) CHECK(std::memcmp(centre.bytes.data() + y * 12, im.bytes.data() + ((2 + y) * 9 + 2) * 3, 12) == 0);
  CHECK_THROWS_WITH_AS((void)make_random_crop(10)->output_spec(im.spec), doctest::Contains("smaller than the crop"),
                       std::invalid_argument);
  auto small = random_image(5, 20, 2);
  CHECK_THROWS_WITH_AS((void)make_random_crop(6)->output_spec(small.spec), doctest::Contains("input 5x20x3"),
                       std::invalid_argument);
  std::vector<std::byte> out(6 * 6 * 3);  // variable-size inputs reach apply(): it checks too
  CHECK_THROWS_WITH_AS(make_random_crop(6)->apply(small.view(), {out.data(), {6, 6, 3, dtype::u8}}, philox_stream(0, 0, 0)),
                       doctest::Contains("image 5x20"), std::runtime_error);
  CHECK_THROWS_AS(make_random_crop(0), std::invalid_argument);
}

TEST_CASE("transforms.mask_matches_convolve2d_reference") {
  for (double ratio : {0.0, 0.05, 0.25, 1.0}) {
    CAPTURE(ratio);
    auto im = random_image(31, 17, 4);
    const philox_stream rng(5, 1, 2, 101);
    const auto out = run_step(*make_random_mask(ratio), im, rng);
    // Reference: pick = word p < ratio * 2^32; dilated = convolve2d(pick, cross, 'same') > 0.
    const double limit = ratio * 4294967296.0;
    std::vector<int> pick(31 * 17);
    for (int p = 0; p < 31 * 17; ++p) pick[p] = static_cast<double>(rng.word_at(p)) < limit;
    std::size_t masked = 0;
    for (int y = 0; y < 31; ++y)
      for (int x = 0; x < 17; ++x) {
        int conv = 0;
        const int dy[5] = {0, -1, 1, 0, 0}, dx[5] = {0, 0, 0, -1, 1};
        for (int k = 0; k < 5; ++k) {
          const int yy = y + dy[k], xx = x + dx[k];
          if (yy >= 0 && yy < 31 && xx >= 0 && xx < 17) conv += pick[yy * 17 + xx];
        }
        for (int c = 0; c < 3; ++c) {
          const auto got = out.bytes[(y * 17 + x) * 3 + c];
          REQUIRE(got == (conv > 0 ? std::byte{0} : im.bytes[(y * 17 + x) * 3 + c]));
        }
        masked += conv > 0;
      }
    if (ratio == 0.0) CHECK(masked == 0);
    if (ratio == 1.0) CHECK(masked == 31 * 17);
  }
  // Interior pixels survive with probability (1 - r)^5: 23.7% at r = 0.25.
  auto big = random_image(256, 256, 9);
  const auto out = run_step(*make_random_mask(0.25), big, philox_stream(1, 0, 0, 101));
  std::size_t zero_pixels = 0;
  for (std::size_t p = 0; p < 256 * 256; ++p)
    zero_pixels += out.bytes[3 * p] == std::byte{0} && out.bytes[3 * p + 1] == std::byte{0} && out.bytes[3 * p + 2] == std::byte{0};
  CHECK(zero_pixels / 65536.0 == doctest::Approx(1 - std::pow(0.75, 5)).epsilon(0.02));
  CHECK_THROWS_WITH_AS(make_random_mask(1.5), doctest::Contains("ratio must be in [0, 1], got 1.5"), std::invalid_argument);
}

TEST_CASE("transforms.flip_and_pointwise_steps") {
  auto im = random_image(3, 4, 6);
  const auto flipped = run_step(*make_random_hflip(1.0), im, philox_stream(0, 0, 0));
  const auto same = run_step(*make_random_hflip(0.0), im, philox_stream(0, 0, 0));
  CHECK(same.bytes == im.bytes);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      CHECK(std::memcmp(flipped.bytes.data() + (y * 4 + x) * 3, im.bytes.data() + (y * 4 + 3 - x) * 3, 3) == 0);
  auto ycc = run_step(*make_convert_ycbcr(), im, philox_stream(0, 0, 0));
  CHECK(ycc.spec.type == dtype::f32);
  const auto* f = reinterpret_cast<const float*>(ycc.bytes.data());
  const auto* u = reinterpret_cast<const std::uint8_t*>(im.bytes.data());
  for (int p = 0; p < 12; ++p) {
    CHECK(f[3 * p] == doctest::Approx(0.299 * u[3 * p] + 0.587 * u[3 * p + 1] + 0.114 * u[3 * p + 2]).epsilon(1e-5));
    CHECK(f[3 * p + 1] == doctest::Approx(-0.16874 * u[3 * p] - 0.33126 * u[3 * p + 1] + 0.5 * u[3 * p + 2] + 128).epsilon(1e-5));
  }
  const auto scaled = run_step(*make_scale(), ycc, philox_stream(0, 0, 0));
  const auto* g = reinterpret_cast<const float*>(scaled.bytes.data());
  for (int i = 0; i < 36; ++i) CHECK(g[i] == f[i] * (1.0f / 255.0f));
  const auto normed = run_step(*make_normalize({0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}), scaled, philox_stream(0, 0, 0));
  const auto* h = reinterpret_cast<const float*>(normed.bytes.data());
  for (int i = 0; i < 36; ++i) CHECK(h[i] == doctest::Approx((g[i] - 0.5f) / 0.25f).epsilon(1e-5));
  CHECK_THROWS_WITH_AS(make_normalize({0, 0, 0}, {1, 0, 1}), doctest::Contains("std[1]"), std::invalid_argument);
}

TEST_CASE("transforms.parse_pipeline") {
  const auto p = parse_pipeline(" crop(256), mask(0.25) ,ycbcr,scale ");
  CHECK(p.to_string() == "crop(256),mask(0.25),ycbcr,scale(0.003921569)");
  CHECK(parse_pipeline(p.to_string()).to_string() == p.to_string());  // names round-trip
  CHECK(p.host_part().to_string() == "crop(256),mask(0.25)");
  CHECK(p.device_tail().to_string() == "ycbcr,scale(0.003921569)");
  CHECK(parse_pipeline("").empty());
  CHECK(parse_pipeline("hflip,center_crop(8),normalize(0.485,0.456,0.406,0.229,0.224,0.225)").steps().size() == 3);
  auto expect = [](const char* text, const char* needle, std::size_t caret) {
    CAPTURE(text);
    try {
      (void)parse_pipeline(text);
      FAIL("expected std::invalid_argument");
    } catch (const std::invalid_argument& e) {
      const std::string w = e.what();
      CHECK(w.find(needle) != std::string::npos);
      CHECK(w.find(std::string(text)) != std::string::npos);
      CHECK(w.find("\n  " + std::string(caret, ' ') + "^") != std::string::npos);  // the caret under the token
    }
  };
  expect("crop(256),blur(3)", "unknown transform 'blur'", 10);
  expect("crop(25x)", "expected ',' or ')'", 7);
  expect("crop(abc)", "expected a number", 5);
  expect("crop(256", "expected ',' or ')'", 8);
  expect("crop(256) mask(0.1)", "expected ',' between transforms", 10);
  expect("crop(1.5)", "positive integer", 5);
  expect("mask(2)", "ratio must be in [0, 1], got 2", 5);
  expect("ycbcr(1)", "takes 0 argument(s), got 1", 6);
  expect("crop,", "takes 1 argument(s), got 0", 4);
  expect(",crop(3)", "expected a transform name", 0);
}

namespace {
/// A transform of a trainer's own: inverts uint8 pixels.
class invert_transform final : public transform {
 public:
  std::string name() const override { return "invert"; }
  image_spec output_spec(const image_spec& in) const override { return in; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    for (std::size_t i = 0; i < in.spec.bytes(); ++i) out.data[i] = static_cast<std::byte>(255 - static_cast<int>(in.data[i]));
  }
};
}  // namespace

TEST_CASE("transforms.registry_takes_a_transform_of_ones_own") {
  const auto names = transform_names();
  for (const char* n : {"crop", "random_crop", "center_crop", "resize", "rrc", "mask", "hflip", "ycbcr", "scale", "normalize"})
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  register_transform({{"invert_test"}, 0, 0, "invert_test", [](std::span<const double>) {
                        return std::shared_ptr<transform>(std::make_shared<invert_transform>());
                      }});
  const pipeline p = parse_pipeline("crop(4),invert_test");
  REQUIRE(p.steps().size() == 2);
  std::vector<std::byte> in(8 * 8 * 3, std::byte{10}), mid(4 * 4 * 3), out(4 * 4 * 3);
  p.steps()[0]->apply({in.data(), {8, 8, 3, dtype::u8}}, {mid.data(), {4, 4, 3, dtype::u8}}, philox_stream(0, 0, 0));
  p.steps()[1]->apply({mid.data(), {4, 4, 3, dtype::u8}}, {out.data(), {4, 4, 3, dtype::u8}}, philox_stream(0, 0, 0));
  CHECK(out[0] == std::byte{245});
  CHECK_THROWS_WITH_AS(parse_pipeline("invert_test(2)"), doctest::Contains("takes 0 argument(s), got 1"),
                       std::invalid_argument);
  const auto make = [](std::span<const double>) { return std::shared_ptr<transform>(); };
  CHECK_THROWS_WITH_AS(register_transform({{"flip_x", "crop"}, 0, 0, "flip_x", make}),
                       doctest::Contains("'crop' is taken by crop(N)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(register_transform({{"bad name"}, 0, 0, "x", make}), doctest::Contains("'bad name'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(register_transform({{"two_three"}, 3, 2, "x", make}), doctest::Contains("at least 3 but at most 2"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(register_transform({{"no_make"}, 0, 0, "x", {}}), doctest::Contains("no make function"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_pipeline("blur(3)"), doctest::Contains("invert_test"), std::invalid_argument);  // listed
}

TEST_CASE("transforms.pipeline_file") {
  const test::temp_dir scratch;
  const auto& dir = scratch.path;
  const auto good = (dir / "good.json").string(), bad = (dir / "bad.json").string(), list = (dir / "list.json").string();
  std::ofstream(good) << R"J({"transforms": ["crop(16)", "mask(0.1)", "ycbcr", "scale"]})J";
  std::ofstream(list) << R"J(["crop(16),hflip"])J";
  std::ofstream(bad) << R"J({"transforms": ["crop(16)", 7]})J";
  CHECK(load_pipeline_file(good).steps().size() == 4);
  CHECK(load_pipeline_file(list).to_string() == "crop(16),hflip(0.5)");
  CHECK_THROWS_WITH_AS(load_pipeline_file(bad), doctest::Contains("entry 1 (7) is not a string"), std::invalid_argument);
  std::ofstream(bad) << R"J({"transforms": ["crop(16)", "sharpen"]})J";
  CHECK_THROWS_WITH_AS(load_pipeline_file(bad), doctest::Contains("entry 1"), std::invalid_argument);
  std::ofstream(bad) << "{nope";
  CHECK_THROWS_WITH_AS(load_pipeline_file(bad), doctest::Contains("not JSON"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(load_pipeline_file((dir / "missing.json").string()), doctest::Contains("missing.json"),
                       std::invalid_argument);
}

TEST_CASE("transforms.resize_and_random_resized_crop") {
  auto im = random_image(30, 40, 12);
  const auto r = run_step(*make_resize(15), im, philox_stream(0, 0, 0));
  CHECK(r.spec.height == 15);
  CHECK(r.spec.width == 20);
  CHECK(make_resize(15)->output_spec({-1, -1, 3, dtype::u8}).height == -1);  // varies with the input
  auto tall = random_image(50, 20, 13);
  CHECK(run_step(*make_resize(10), tall, philox_stream(0, 0, 0)).spec.height == 25);

  const auto rrc = make_random_resized_crop(16);
  CHECK(rrc->name() == "rrc(16,0.08,1,0.75,1.33333333)");
  CHECK(parse_pipeline(rrc->name()).to_string() == rrc->name());
  std::set<std::uint64_t> distinct;  // content hashes
  for (std::uint64_t i = 0; i < 50; ++i) {
    const auto out = run_step(*rrc, im, philox_stream(1, 0, i, 100));
    CHECK(out.spec.height == 16);
    CHECK(out.spec.width == 16);
    distinct.insert(hash_bytes(out.bytes.data(), out.bytes.size()));
    CHECK(out.bytes == run_step(*rrc, im, philox_stream(1, 0, i, 100)).bytes);  // same stream, same crop
  }
  CHECK(distinct.size() > 40);
  // Decode hint: a window much larger than the output lets the decoder shrink the image; a
  // window smaller than the output needs full resolution.
  std::int64_t shrinkable = 0;
  for (std::uint64_t i = 0; i < 50; ++i) {
    const auto need = rrc->min_short_side(3000, 4000, philox_stream(1, 0, i, 100));
    CHECK(need >= 0);
    CHECK(need <= 3000);
    shrinkable += need > 0 && need < 3000;
  }
  CHECK(shrinkable > 40);
  CHECK(make_random_resized_crop(512)->min_short_side(300, 400, philox_stream(0, 0, 0)) == 0);
  CHECK_THROWS_WITH_AS(make_random_resized_crop(16, 0.5, 0.2), doctest::Contains("scale range"), std::invalid_argument);
  // The C++ API checks the size too (the pipeline's parser refuses it before): no 0 x 0 output.
  CHECK_THROWS_WITH_AS(make_random_resized_crop(0), "rrc: size must be positive, got 0", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_random_resized_crop(-224), "rrc: size must be positive, got -224", std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_pipeline("rrc(16,0.5)"), doctest::Contains("takes 1, 3 or 5 arguments"), std::invalid_argument);
  // A ratio range no crop of the image can meet: torchvision's fallback, the whole width (or
  // height) at the nearest ratio in range, rounds the other side to 0 here; it is kept at one
  // pixel: a one-row strip (every output row the same), a one-column strip (every row one value).
  for (const bool wide : {true, false}) {
    CAPTURE(wide);
    const auto strip = wide ? make_random_resized_crop(8, 1, 1, 1000, 1000) : make_random_resized_crop(8, 1, 1, 0.001, 0.001);
    const auto out = run_step(*strip, im, philox_stream(2, 0, 0, 100));
    REQUIRE(out.spec.height == 8);
    REQUIRE(out.spec.width == 8);
    bool flat = true;
    for (std::size_t y = 0; y < 8; ++y)
      for (std::size_t x = 0; x < 8; ++x)
        for (std::size_t c = 0; c < 3; ++c) {
          const std::size_t other = wide ? x * 3 + c : y * 8 * 3 + c;  // row 0's pixel, or column 0's
          flat = flat && out.bytes[(y * 8 + x) * 3 + c] == out.bytes[other];
        }
    CHECK(flat);
  }
}

TEST_CASE("transforms.in_place_steps_match_out_of_place") {
  // hflip and mask may run in place; the result must equal the out-of-place one, for uint8 RGB, for
  // float pixels, and for pixels wider than any fixed swap buffer (40 floats: 160 bytes).
  for (const auto& [type, channels] : {std::pair{dtype::u8, 3}, std::pair{dtype::f32, 3}, std::pair{dtype::f32, 40}}) {
    CAPTURE(dtype_name(type));
    CAPTURE(channels);
    owned_image im = random_image(9, 7, 5);
    if (type == dtype::f32 && channels == 3) {
      owned_image f{std::vector<std::byte>(9 * 7 * 3 * 4), {9, 7, 3, dtype::f32}};
      for (std::size_t i = 0; i < 9 * 7 * 3; ++i) {
        const float v = static_cast<float>(im.bytes[i]) / 7.0f;
        std::memcpy(f.bytes.data() + 4 * i, &v, 4);
      }
      im = f;
    } else if (type == dtype::f32) {
      owned_image f{std::vector<std::byte>(9 * 7 * 40 * 4), {9, 7, 40, dtype::f32}};
      for (std::size_t i = 0; i < 9 * 7 * 40; ++i) {
        const float v = static_cast<float>(i * 37 % 251) / 7.0f;
        std::memcpy(f.bytes.data() + 4 * i, &v, 4);
      }
      im = f;
      // The out-of-place flip itself, against each row's pixels taken in reverse.
      const owned_image flipped = run_step(*make_random_hflip(1.0), im, philox_stream(8, 0, 0, 100));
      const std::size_t px = 40 * 4;
      for (std::size_t y = 0; y < 9; ++y)
        for (std::size_t x = 0; x < 7; ++x)
          CHECK(std::memcmp(flipped.bytes.data() + (y * 7 + x) * px, im.bytes.data() + (y * 7 + 6 - x) * px, px) == 0);
    }
    for (const auto& t : {make_random_hflip(1.0), make_random_hflip(0.0), make_random_mask(0.3)}) {
      CAPTURE(t->name());
      REQUIRE(t->in_place());
      for (std::uint64_t i = 0; i < 6; ++i) {
        const philox_stream rng(8, 0, i, 100);
        const owned_image expect = run_step(*t, im, rng);
        owned_image inplace = im;
        t->apply(inplace.view(), inplace.view(), rng);
        CHECK(inplace.bytes == expect.bytes);
      }
    }
  }
  CHECK_FALSE(make_random_crop(4)->in_place());
  CHECK_FALSE(make_convert_ycbcr()->in_place());
}


namespace {
/// Sample i of `n`: an h x w RGB image of Philox bytes (seed, 0, i) in field "image".
std::shared_ptr<source> philox_images(std::uint64_t n, std::int64_t h, std::int64_t w, std::uint64_t seed) {
  return make_source(n, {{"image", dtype::u8, {h, w, 3}}},
                     [seed](sample& s) { fill_random_bytes(philox_stream(seed, 0, s.index()), s.bytes(0)); }, "known");
}

/// A registered transform of a trainer's own that refuses images whose first byte is below 16:
/// picky_test(0) with a std::runtime_error, picky_test(1) with an int (not a std::exception).
class picky_transform final : public transform {
 public:
  explicit picky_transform(int mode) : mode_(mode) {}
  std::string name() const override { return "picky_test(" + std::to_string(mode_) + ")"; }
  image_spec output_spec(const image_spec& in) const override { return in; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const int first = static_cast<int>(in.data[0]);
    if (first < 16) {
      if (mode_ == 0) throw std::runtime_error("picky: first byte " + std::to_string(first));
      throw first;
    }
    std::memcpy(out.data, in.data, in.spec.bytes());
  }

 private:
  int mode_;
};
}  // namespace

namespace {
/// A trainer's own in-place step (transform::in_place): adds `add` to every byte, and records for
/// each call whether the pipeline ran it in place (out.data == in.data).
class adding_transform final : public transform {
 public:
  adding_transform(int add, std::vector<bool>& log, std::mutex& m) : add_(add), log_(log), m_(m) {}
  std::string name() const override { return "adding_test(" + std::to_string(add_) + ")"; }
  image_spec output_spec(const image_spec& in) const override { return in; }
  bool in_place() const override { return true; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    for (std::size_t i = 0; i < in.spec.bytes(); ++i) out.data[i] = static_cast<std::byte>(static_cast<int>(in.data[i]) + add_);
    const std::lock_guard lock(m_);
    log_.push_back(out.data == in.data);
  }

 private:
  int add_;
  std::vector<bool>& log_;
  std::mutex& m_;
};
}  // namespace

TEST_CASE("transforms.a_step_that_can_run_in_place_is_run_in_place") {
  // transform::in_place's contract: the pipeline runs such a step in place and saves a pass over
  // the image. After a center crop (a new image, in the worker's buffer), of three in-place steps
  // the first runs in place there, the second writes straight into the batch's slot (the last one
  // follows and runs in place there), the last runs in place in the slot; the pixels are the
  // crop's plus 1 + 2 + 4.
  std::mutex m;
  std::vector<bool> first, second, third;
  const pipeline p({make_center_crop(4), std::make_shared<adding_transform>(1, first, m),
                    std::make_shared<adding_transform>(2, second, m), std::make_shared<adding_transform>(4, third, m)});
  constexpr std::uint64_t n = 16;
  const auto base = philox_images(n, 6, 6, 78);
  loader_options o = pinfeed::test::cpu_loader(4, 2, 5);
  o.order.shuffle = false;
  loader l(std::make_shared<pipeline_source>(base, p), o);
  const auto crop4 = make_center_crop(4);
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    const auto image = b->field("image");
    REQUIRE(image.bytes() == b->size() * 4 * 4 * 3);
    for (std::size_t i = 0; i < b->size(); ++i) {
      owned_image in{std::vector<std::byte>(6 * 6 * 3), {6, 6, 3, dtype::u8}};
      fill_random_bytes(philox_stream(78, 0, b->indices()[i]), in.bytes);
      const owned_image crop = test::run_step(*crop4, in, philox_stream(0, 0, 0));
      const auto* got = static_cast<const std::byte*>(image.data) + i * 4 * 4 * 3;
      for (std::size_t k = 0; k < crop.bytes.size(); ++k)
        CHECK(static_cast<int>(got[k]) == (static_cast<int>(crop.bytes[k]) + 7) % 256);
      ++seen;
    }
  }
  CHECK(seen == n);
  const std::lock_guard lock(m);
  CHECK(first == std::vector<bool>(n, true));
  CHECK(second == std::vector<bool>(n, false));
  CHECK(third == std::vector<bool>(n, true));
}

TEST_CASE("transforms.a_pipeline_over_a_pipeline_gives_both_pipelines_steps") {
  // A pipeline_source is a source, so a trainer can wrap one in another (its own steps after a
  // library's). The inner one produces each sample on the outer one's worker thread, inside the
  // outer one's produce: its per-thread buffers must not be the outer one's. The result is the
  // two pipelines' steps in turn: here center_crop(8), then a flip and a crop to 6 x 6.
  constexpr std::uint64_t n = 24;
  const auto base = philox_images(n, 12, 10, 79);
  const auto inner = std::make_shared<pipeline_source>(base, parse_pipeline("center_crop(8)"));
  const auto outer = std::make_shared<pipeline_source>(inner, parse_pipeline("hflip(1),center_crop(6)"));
  const auto whole = std::make_shared<pipeline_source>(base, parse_pipeline("center_crop(8),hflip(1),center_crop(6)"));
  for (const std::size_t workers : {1u, 2u}) {
    CAPTURE(workers);
    loader_options o = pinfeed::test::cpu_loader(5, workers, 5);
    o.order.shuffle = true;
    loader nested(outer, o), flat(whole, o);
    std::uint64_t batches = 0;
    while (auto b = nested.next()) {
      auto w = flat.next();
      REQUIRE(w);
      CHECK(checksum_line(*b) == checksum_line(*w));
      ++batches;
    }
    CHECK_FALSE(flat.next());
    CHECK(batches == (n + 4) / 5);
  }
}

TEST_CASE("transforms.a_registered_transform_that_throws_reaches_the_consumer_named") {
  static std::once_flag registered;  // (doctest runs the case once per subcase)
  std::call_once(registered, [] {
    register_transform({{"picky_test"}, 1, 1, "picky_test(M)", [](std::span<const double> a) {
                          return std::shared_ptr<transform>(std::make_shared<picky_transform>(static_cast<int>(a[0])));
                        }});
  });
  constexpr std::uint64_t n = 96;
  constexpr std::size_t batch_size = 8;
  const auto base = philox_images(n, 6, 6, 77);
  // The samples the transform refuses, from the images themselves.
  std::set<std::uint64_t> bad;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::vector<std::byte> img(6 * 6 * 3);
    fill_random_bytes(philox_stream(77, 0, i), img);
    if (static_cast<int>(img[0]) < 16) bad.insert(i);
  }
  REQUIRE(!bad.empty());              // the seed gives some (about 1 in 16)
  REQUIRE(bad.size() < n / batch_size);  // and leaves some batches whole
  loader_options o = pinfeed::test::cpu_loader(batch_size, 2, 5);
  o.order.shuffle = false;

  SUBCASE("fail policy: a sample_error naming the index, the transform and its message; the loader goes on") {
    loader l(std::make_shared<pipeline_source>(base, parse_pipeline("picky_test(0)")), o);
    std::size_t delivered = 0, failed = 0;
    for (std::uint64_t b = 0; b < n / batch_size; ++b) {
      const std::uint64_t first = b * batch_size;
      const auto lowest = bad.lower_bound(first);
      const bool has_bad = lowest != bad.end() && *lowest < first + batch_size;
      CAPTURE(b);
      if (!has_bad) {
        const auto got = l.next();
        REQUIRE(got);
        CHECK(got->indices()[0] == first);
        ++delivered;
        continue;
      }
      try {
        (void)l.next();
        FAIL("batch " << b << " holds a refused sample");
      } catch (const sample_error& e) {
        CHECK(e.index() == *lowest);
        CHECK(e.stage() == "transform picky_test(0)");
        CHECK(e.message().rfind("picky: first byte ", 0) == 0);
        ++failed;
      }
    }
    CHECK_FALSE(l.next().has_value());
    CHECK(delivered + failed == n / batch_size);
    CHECK(failed > 0);
  }
  SUBCASE("skip policy: stand-ins fill the refused samples' places, each counted once") {
    pipeline_source_options skip;
    skip.on_error = error_policy::skip;
    const auto src = std::make_shared<pipeline_source>(base, parse_pipeline("picky_test(0)"), skip);
    loader l(src, o);
    std::uint64_t samples = 0;
    while (auto b = l.next()) {
      const auto img = b->field<std::uint8_t>("image");
      for (std::size_t j = 0; j < b->size(); ++j) CHECK(img.sample(j)[0] >= 16);  // no refused image delivered
      samples += b->size();
    }
    CHECK(samples == n);
    CHECK(src->failures() == bad.size());
    CHECK(src->replaced() == bad.size());
  }
  SUBCASE("an exception that is not a std::exception is not a bad sample: next() names it, under either policy") {
    for (const auto policy : {error_policy::fail, error_policy::skip}) {
      CAPTURE(static_cast<int>(policy));
      pipeline_source_options opts;
      opts.on_error = policy;
      loader l(std::make_shared<pipeline_source>(base, parse_pipeline("picky_test(1)"), opts), o);
      std::size_t named = 0;
      for (std::uint64_t b = 0; b < n / batch_size && named == 0; ++b) {
        try {
          (void)l.next();
        } catch (const sample_error& e) {
          CHECK(bad.count(e.index()) == 1);
          CHECK(e.stage() == "produce");
          CHECK(e.message() == "unknown exception");
          ++named;
        }
      }
      CHECK(named == 1);
    }
  }
}

TEST_CASE("transforms.uint8_resize_is_pinfeeds_and_within_one_of_opencvs_bilinear") {
  // resize and rrc on uint8 images run pinfeed's stated arithmetic (pinfeed/ops/resize.hpp, the
  // device's too); its mapping is OpenCV's INTER_LINEAR's, so every sample is within 1 of it.
  std::uint32_t state = 9;
  for (const auto& s : std::vector<std::array<int, 4>>{{375, 500, 224, 298}, {37, 53, 224, 224}, {100, 100, 50, 50}, {17, 300, 224, 13}}) {
    CAPTURE(s[0]);
    CAPTURE(s[2]);
    cv::Mat in(s[0], s[1], CV_8UC3);
    for (int y = 0; y < s[0]; ++y)
      for (int x = 0; x < s[1]; ++x)
        for (int c = 0; c < 3; ++c)
          in.at<cv::Vec3b>(y, x)[c] = static_cast<uchar>(((x * 7 + y * 3) & 255) ^ ((state = state * 1664525u + 1013904223u) >> 28));
    cv::Mat cv_out;
    cv::resize(in, cv_out, cv::Size(s[3], s[2]), 0, 0, cv::INTER_LINEAR);
    std::vector<std::byte> ours(static_cast<std::size_t>(s[2] * s[3] * 3));
    resize_into({reinterpret_cast<std::byte*>(in.data), {s[0], s[1], 3, dtype::u8}}, {ours.data(), {s[2], s[3], 3, dtype::u8}});
    int most = 0;
    std::vector<std::uint8_t> direct(ours.size());
    ops::resize_bilinear_u8(in.data, static_cast<std::size_t>(s[1]) * 3, s[0], s[1], 3, direct.data(), s[2], s[3]);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      most = std::max(most, std::abs(static_cast<int>(std::to_integer<std::uint8_t>(ours[i])) - static_cast<int>(cv_out.data[i])));
      REQUIRE(std::to_integer<std::uint8_t>(ours[i]) == direct[i]);
    }
    CHECK(most <= 1);
  }
}
