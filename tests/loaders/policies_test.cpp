// The augmentation policies (trivial_augment, rand_augment, auto_augment, a trainer's own): their
// tables and sub-policies against torchvision's own, the draws against their distributions
// (chi-square over 20,000 samples, p printed), every output against the C++ ops it names, the
// same batches for any worker count and across state()/resume(), and the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/policies.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"
#include "step_checks.hpp"
#include "torchvision_compare.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;
using ops::aug_op;
using test::check_chi_square;
using test::chi_square_p;

namespace {

std::vector<std::uint8_t> photo_like(std::int64_t h, std::int64_t w, int c, std::uint32_t seed) {
  std::vector<std::uint8_t> img(static_cast<std::size_t>(h * w * c));
  philox_stream rng(seed, 0, 0);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        img[static_cast<std::size_t>((y * w + x) * c + k)] =
            static_cast<std::uint8_t>((x * 9 + y * 5 + k * 60 + static_cast<std::int64_t>(rng.below(40))) % 256);
  return img;
}

const char* torchvision_name(aug_op op) {
  switch (op) {
    case aug_op::identity: return "Identity";
    case aug_op::shear_x: return "ShearX";
    case aug_op::shear_y: return "ShearY";
    case aug_op::translate_x: return "TranslateX";
    case aug_op::translate_y: return "TranslateY";
    case aug_op::rotate: return "Rotate";
    case aug_op::brightness: return "Brightness";
    case aug_op::saturation: return "Color";
    case aug_op::contrast: return "Contrast";
    case aug_op::sharpness: return "Sharpness";
    case aug_op::posterize: return "Posterize";
    case aug_op::solarize: return "Solarize";
    case aug_op::autocontrast: return "AutoContrast";
    case aug_op::equalize: return "Equalize";
    case aug_op::invert: return "Invert";
  }
  return "?";
}

const std::vector<aug_op> kWide{aug_op::identity,   aug_op::shear_x,  aug_op::shear_y,      aug_op::translate_x, aug_op::translate_y,
                                aug_op::rotate,     aug_op::brightness, aug_op::saturation, aug_op::contrast,  aug_op::sharpness,
                                aug_op::posterize,  aug_op::solarize, aug_op::autocontrast, aug_op::equalize};

}  // namespace

TEST_CASE("policies.tables_and_subpolicies_equal_torchvisions") {
  test::temp_dir d;
  const auto manifest = test::torchvision_manifest("loaders/policies/torchvision_policies.py", d.path);
  if (!manifest) return;
  const std::map<std::string, ops::policy_family> families{{"trivial_augment", ops::policy_family::trivial_augment_wide},
                                                           {"rand_augment", ops::policy_family::rand_augment},
                                                           {"auto_augment", ops::policy_family::auto_augment}};
  std::map<std::string, aug_op> by_name;
  for (int k = 0; k < ops::kAugOps; ++k) by_name[torchvision_name(static_cast<aug_op>(k))] = static_cast<aug_op>(k);
  int entries = 0;
  for (const auto& [key, family] : families) {
    CAPTURE(key);
    const auto& p = (*manifest)["policies"][key];
    if (key != "auto_augment") {  // the op sets pinfeed draws from, in torchvision's order
      std::vector<std::string> want = p["ops"], got;
      for (const aug_op op : kWide) got.push_back(torchvision_name(op));
      CHECK(got == want);
    }
    for (const auto& t : p["tables"]) {
      const int bins = t["bins"];
      const std::int64_t h = t["height"], w = t["width"];
      for (const auto& [name, spec] : t["ops"].items()) {
        CAPTURE(name);
        CAPTURE(bins);
        REQUIRE(by_name.count(name) == 1);
        const aug_op op = by_name[name];
        CHECK(ops::aug_op_signed(op) == spec["signed"].get<bool>());
        const ops::magnitude_table table = ops::policy_table(family, op);
        if (spec["values"].is_null()) {
          CHECK(table.type == ops::magnitude_table::kind::none);
          continue;
        }
        const std::vector<double> values = spec["values"];
        REQUIRE(static_cast<int>(values.size()) == bins);
        for (int b = 0; b < bins; ++b, ++entries) {
          CAPTURE(b);
          CHECK(static_cast<double>(table.at(bins, b, h, w)) == values[static_cast<std::size_t>(b)]);
        }
      }
    }
  }
  MESSAGE(entries << " table entries identical to torchvision's");
  for (const auto& [name, policy] : std::map<std::string, auto_augment_policy>{
           {"imagenet", auto_augment_policy::imagenet}, {"cifar10", auto_augment_policy::cifar10}, {"svhn", auto_augment_policy::svhn}}) {
    CAPTURE(name);
    const auto ours = auto_augment_subpolicies(policy);
    const auto& theirs = (*manifest)["auto_augment"][name];
    REQUIRE(ours.size() == theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i)
      for (std::size_t k = 0; k < 2; ++k) {
        const auto& [op, probability, bin] = ours[i][k];
        const auto& step = theirs[i][k];
        CHECK(std::string(torchvision_name(op)) == step[0].get<std::string>());
        CHECK(probability == static_cast<float>(step[1].get<double>()));
        CHECK(bin == (step[2].is_null() ? -1 : step[2].get<int>()));
      }
  }
}

TEST_CASE("policies.every_output_is_the_ops_it_drew_applied_in_turn") {
  constexpr std::int64_t h = 19, w = 24;
  for (const char* spelling : {"trivial_augment", "rand_augment", "rand_augment(3,20,31,interpolation=bilinear,fill=9)",
                               "auto_augment(imagenet)", "auto_augment(cifar10)", "auto_augment(svhn)", "trivial_augment(fill=128)"}) {
    CAPTURE(spelling);
    const pipeline p = parse_pipeline(spelling);
    const auto* policy = dynamic_cast<const augment_policy*>(p.steps()[0].get());
    REQUIRE(policy != nullptr);
    for (const int c : {3, 1}) {
      for (std::uint64_t index = 0; index < 300; ++index) {
        const auto img = photo_like(h, w, c, static_cast<std::uint32_t>(index));
        const philox_stream rng(5, 1, index);
        const auto picked = policy->choices(h, w, rng);
        std::vector<std::uint8_t> got(img.size());
        const image_spec spec{h, w, c, dtype::u8};
        policy->apply({reinterpret_cast<std::byte*>(const_cast<std::uint8_t*>(img.data())), spec},
                      {reinterpret_cast<std::byte*>(got.data()), spec}, rng);
        // The same ops, one by one, through the ops themselves.
        std::vector<std::uint8_t> want = img, next(img.size());
        const bool bilinear = std::string(spelling).find("bilinear") != std::string::npos;
        const std::optional<double> fill = std::string(spelling).find("fill=9") != std::string::npos     ? std::optional<double>(9)
                                           : std::string(spelling).find("fill=128") != std::string::npos ? std::optional<double>(128)
                                                                                                         : std::nullopt;
        for (const auto& choice : picked) {
          ops::apply_aug_op_u8(choice.op, choice.magnitude, want.data(), h, w, c,
                               bilinear ? ops::interpolation::bilinear : ops::interpolation::nearest, fill, next.data());
          std::swap(want, next);
        }
        CHECK(got == want);
        if (got != want) break;
      }
    }
  }
}

TEST_CASE("policies.draws_follow_torchvisions_distributions") {
  constexpr int samples = 20000;
  constexpr std::int64_t h = 224, w = 224;
  {  // TrivialAugmentWide: the op uniform over 14, the bin uniform over 31, the sign a fair coin.
    const auto ta = make_trivial_augment();
    std::vector<double> op_count(14), bin_count(31);
    std::vector<double> signs(2);
    for (int i = 0; i < samples; ++i) {
      const auto picked = ta->choices(h, w, philox_stream(11, 0, static_cast<std::uint64_t>(i)));
      REQUIRE(picked.size() == 1);
      const auto& c = picked[0];
      const auto at = std::find(kWide.begin(), kWide.end(), c.op);
      REQUIRE(at != kWide.end());
      op_count[static_cast<std::size_t>(at - kWide.begin())] += 1;
      const auto table = ops::policy_table(ops::policy_family::trivial_augment_wide, c.op);
      if (table.type == ops::magnitude_table::kind::none) {
        CHECK(c.bin == -1);
        continue;
      }
      REQUIRE(c.bin >= 0);
      bin_count[static_cast<std::size_t>(c.bin)] += 1;
      CHECK(std::abs(c.magnitude) == static_cast<double>(table.at(31, c.bin, h, w)));
      if (ops::aug_op_signed(c.op) && c.magnitude != 0.0) signs[c.magnitude < 0 ? 1 : 0] += 1;
    }
    check_chi_square("trivial_augment: op", op_count, std::vector<double>(14, samples / 14.0));
    double with_table = 0;
    for (double v : bin_count) with_table += v;
    check_chi_square("trivial_augment: magnitude bin", bin_count, std::vector<double>(31, with_table / 31.0));
    check_chi_square("trivial_augment: sign", signs, std::vector<double>(2, (signs[0] + signs[1]) / 2.0));
  }
  {  // RandAugment(2, 9): each of the two ops uniform over 14, every magnitude from bin 9.
    const auto ra = make_rand_augment();
    std::vector<double> first(14), second(14);
    for (int i = 0; i < samples; ++i) {
      const auto picked = ra->choices(h, w, philox_stream(12, 0, static_cast<std::uint64_t>(i)));
      REQUIRE(picked.size() == 2);
      for (std::size_t k = 0; k < 2; ++k) {
        const auto at = std::find(kWide.begin(), kWide.end(), picked[k].op);
        REQUIRE(at != kWide.end());
        (k == 0 ? first : second)[static_cast<std::size_t>(at - kWide.begin())] += 1;
        const auto table = ops::policy_table(ops::policy_family::rand_augment, picked[k].op);
        CHECK(picked[k].bin == (table.type == ops::magnitude_table::kind::none ? -1 : 9));
      }
    }
    check_chi_square("rand_augment: first op", first, std::vector<double>(14, samples / 14.0));
    check_chi_square("rand_augment: second op", second, std::vector<double>(14, samples / 14.0));
  }
  {  // AutoAugment(imagenet): the sub-policy uniform over 25 (told by which steps can fire), and each
     // step of it fired with its probability: the counts of (sub-policy, fired steps) against
     // 1/25 x the steps' probabilities.
    const auto subs = auto_augment_subpolicies(auto_augment_policy::imagenet);
    const auto aa = make_auto_augment(auto_augment_policy::imagenet);
    // What a sample's choices say: the number of ops applied and which, matched against the
    // sub-policies; a sample is counted in the cell (ops applied as a multiset of op names).
    std::map<std::string, double> observed, expected;
    const auto key_of = [](const std::vector<aug_op>& applied) {
      std::string k;
      for (const aug_op op : applied) k += std::string(ops::aug_op_name(op)) + ",";
      return k;
    };
    for (const auto& sub : subs) {
      const auto& [op0, p0, b0] = sub[0];
      const auto& [op1, p1, b1] = sub[1];
      (void)b0;
      (void)b1;
      const double q0 = static_cast<double>(p0), q1 = static_cast<double>(p1);
      expected[key_of({})] += samples / 25.0 * (1 - q0) * (1 - q1);
      expected[key_of({op0})] += samples / 25.0 * q0 * (1 - q1);
      expected[key_of({op1})] += samples / 25.0 * (1 - q0) * q1;
      expected[key_of({op0, op1})] += samples / 25.0 * q0 * q1;
    }
    for (int i = 0; i < samples; ++i) {
      std::vector<aug_op> applied;
      for (const auto& c : aa->choices(h, w, philox_stream(13, 0, static_cast<std::uint64_t>(i)))) applied.push_back(c.op);
      const std::string k = key_of(applied);
      REQUIRE_MESSAGE(expected.count(k) == 1, "auto_augment applied " << k << ", which no sub-policy can");
      observed[k] += 1;
    }
    // Cells expected fewer than 5 times are pooled (the chi-square's rule).
    std::vector<double> o, e;
    double pooled_o = 0, pooled_e = 0;
    for (const auto& [k, v] : expected) {
      if (v < 5) {
        pooled_o += observed[k];
        pooled_e += v;
      } else {
        o.push_back(observed[k]);
        e.push_back(v);
      }
    }
    if (pooled_e > 0) {
      o.push_back(pooled_o);
      e.push_back(pooled_e);
    }
    check_chi_square("auto_augment(imagenet): ops applied", o, e);
  }
  CHECK(chi_square_p(29.59, 10) == doctest::Approx(0.001).epsilon(0.01));  // the table's critical value
  CHECK(chi_square_p(3.94, 10) == doctest::Approx(0.95).epsilon(0.01));
}

TEST_CASE("policies.same_batches_for_any_worker_count_and_across_resume") {
  auto base = make_synthetic_source({96, 40, 36, 10});
  const auto steps = parse_pipeline(
      "rrc(32),hflip,trivial_augment,rand_augment(2,9),auto_augment(svhn),gaussian_blur(3),rotate(10,interpolation=bilinear)");
  auto src = std::make_shared<pipeline_source>(base, steps);
  CHECK(test::check_same_batches(src, 8).size() == 24);
}

TEST_CASE("policies.bad_values_are_refused_with_a_caret") {
  for (const auto& [text, where, says] : std::vector<std::tuple<std::string, std::size_t, std::string>>{
           {"auto_augment(imagenet2)", 13, "'imagenet2' is not one of imagenet, cifar10, svhn"},
           {"auto_augment(63)", 13, "the policy must be imagenet, cifar10 or svhn, got 63"},
           {"auto_augment(0.5)", 13, "the policy must be imagenet, cifar10 or svhn, got 0.5"},
           {"auto_augment(-1,fill=3)", 13, "the policy must be imagenet, cifar10 or svhn, got -1"},
           {"rand_augment(2,31)", 15, "the magnitude must be a bin from 0 to 30, got 31"},
           {"rand_augment(2,9,31,fill=300)", 25, "the fill must be in [0, 255], got 300"},
           {"rand_augment(-1,9)", 13, "ops a sample from 0 to 64, got -1"},
           {"rand_augment(2)", 13, "N and M"},
           {"trivial_augment(1)", 16, "bins from 2 to 1000000, got 1"},
           {"trivial_augment(2.5)", 16, "bins must be a whole number, got 2.5"},
           {"trivial_augment(interpolation=bicubic)", 30, "must be one of nearest, bilinear, not 'bicubic'"},
           {"rotate(imagenet)", 7, "rotate: expected a number, not 'imagenet'"}}) {
    test::check_refused_at(text, says, where);
  }
  // The C++ API too: an enum value outside the three policies is refused, not read past the table.
  CHECK_THROWS_WITH_AS((void)make_auto_augment(static_cast<auto_augment_policy>(3)),
                       doctest::Contains("the policy must be imagenet, cifar10 or svhn, got 3"), std::invalid_argument);
  CHECK_THROWS_AS((void)auto_augment_subpolicies(static_cast<auto_augment_policy>(-1)), std::invalid_argument);
  // Names read back as the same step.
  for (const char* s : {"trivial_augment", "trivial_augment(15)", "rand_augment(2,9,31)", "auto_augment(cifar10)",
                        "auto_augment(svhn,interpolation=bilinear,fill=128)", "trivial_augment(interpolation=bilinear)"}) {
    CAPTURE(s);
    CHECK(parse_pipeline(s).steps()[0]->name() == s);
  }
  CHECK(parse_pipeline("auto_augment").steps()[0]->name() == "auto_augment(imagenet)");
  CHECK(parse_pipeline("rand_augment").steps()[0]->name() == "rand_augment(2,9,31)");
  // A policy of one's own.
  const auto mine = make_augment_policy({{aug_op::rotate, {ops::magnitude_table::kind::linspace, 0, 40}, true},
                                         {aug_op::invert, {}, false}},
                                        2, 5);
  const auto picked = mine->choices(10, 10, philox_stream(1, 0, 0));
  REQUIRE(picked.size() == 2);
  for (const auto& c : picked) {
    CHECK((c.op == aug_op::rotate || c.op == aug_op::invert));
    if (c.op == aug_op::rotate) CHECK(std::abs(c.magnitude) == 10.0 * c.bin);
  }
  CHECK_THROWS_WITH_AS((void)make_augment_policy({}, 1, 5), doctest::Contains("no ops"), bad_transform_argument);
  CHECK_THROWS_WITH_AS((void)make_augment_policy({{aug_op::invert, {}, false}}, 1, 5, 5), doctest::Contains("not below 5"),
                       bad_transform_argument);
}
