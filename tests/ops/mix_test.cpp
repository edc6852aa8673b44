// MixUp and CutMix on the host (pinfeed/ops/mix.hpp): every value as the header states it, computed
// here sample by sample from a copy of the batch; the soft labels' sums and weights; the draw's box
// and lambda correction; the lambdas against Beta(alpha, alpha) (Kolmogorov-Smirnov over 2,000
// batches); bad arguments named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pinfeed/ops/mix.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/philox.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

namespace {

struct batch {
  std::vector<float> images, labels;
  std::vector<int> classes_of;
};

/// `count` random images and one-hot labels of `classes` classes.
batch random_batch(std::size_t count, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t classes, std::uint64_t seed) {
  philox_stream r(seed, 0, 0);
  batch b;
  b.images.resize(count * static_cast<std::size_t>(h * w * c));
  for (auto& v : b.images) v = (static_cast<float>(r.next_u32() >> 8) / 16777216.0f - 0.5f) * 5.0f;
  b.labels.assign(count * static_cast<std::size_t>(classes), 0.0f);
  for (std::size_t i = 0; i < count; ++i) {
    const int y = static_cast<int>(r.below(static_cast<std::uint32_t>(classes)));
    b.classes_of.push_back(y);
    b.labels[i * static_cast<std::size_t>(classes) + static_cast<std::size_t>(y)] = 1.0f;
  }
  return b;
}

/// The header's MixUp value, each product rounded on its own (volatile: no contraction here).
float stated_mix(float own, float partner, double lambda) {
  const volatile float a = partner * static_cast<float>(1.0 - lambda);
  const volatile float b = own * static_cast<float>(lambda);
  return a + b;
}

/// The index of position (y, x, ch) of an image in `layout`.
std::size_t at(mix_layout layout, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t y, std::int64_t x, std::int64_t ch) {
  return static_cast<std::size_t>(layout == mix_layout::hwc ? (y * w + x) * c + ch : (ch * h + y) * w + x);
}

/// Checks a mixed batch against its original, value by value (the header's statement).
void check_mixed(const batch& before, const batch& after, std::size_t count, std::int64_t h, std::int64_t w, std::int64_t c,
                 mix_layout layout, std::int64_t classes, const mix_params& p) {
  const auto per = static_cast<std::size_t>(h * w * c);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t j = (i + count - 1) % count;  // the partner: the batch rolled by one
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const std::size_t e = at(layout, h, w, c, y, x, ch);
          const float own = before.images[i * per + e], partner = before.images[j * per + e];
          const bool in_box = p.op == mix_op::cutmix && y >= p.y1 && y < p.y2 && x >= p.x1 && x < p.x2;
          const float want = p.op == mix_op::mixup ? stated_mix(own, partner, p.lambda) : in_box ? partner : own;
          if (after.images[i * per + e] != want) ++wrong;
        }
    // The soft labels: own label weighted label_lambda, the partner's 1 - label_lambda, summing to 1.
    const auto k = static_cast<std::size_t>(classes);
    double sum = 0.0;
    for (std::size_t q = 0; q < k; ++q) {
      const float v = after.labels[i * k + q];
      sum += v;
      CHECK(v == stated_mix(before.labels[i * k + q], before.labels[j * k + q], p.label_lambda));
    }
    CHECK(std::abs(sum - 1.0) <= 1e-6);
    const auto own = static_cast<std::size_t>(before.classes_of[i]), partner = static_cast<std::size_t>(before.classes_of[j]);
    if (own != partner) {
      CHECK(std::abs(after.labels[i * k + own] - p.label_lambda) <= 1e-6);
      CHECK(std::abs(after.labels[i * k + partner] - (1.0 - p.label_lambda)) <= 1e-6);
    } else {
      CHECK(std::abs(after.labels[i * k + own] - 1.0) <= 1e-6);
    }
  }
  CHECK(wrong == 0);
}

/// The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz's method).
double incomplete_beta(double x, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  if (x > (a + 1.0) / (a + b + 2.0)) return 1.0 - incomplete_beta(1.0 - x, b, a);
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x)) / a;
  double f = 1.0, c = 1.0, d = 0.0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double numerator;
    if (i == 0) numerator = 1.0;
    else if (i % 2 == 0) numerator = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
    else numerator = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
    d = 1.0 + numerator * d;
    if (std::abs(d) < 1e-300) d = 1e-300;
    d = 1.0 / d;
    c = 1.0 + numerator / c;
    if (std::abs(c) < 1e-300) c = 1e-300;
    const double cd = c * d;
    f *= cd;
    if (std::abs(1.0 - cd) < 1e-14) break;
  }
  return front * (f - 1.0);
}

/// The Kolmogorov-Smirnov test's p-value of `xs` against the CDF `cdf` (the asymptotic series).
template <class Cdf>
double ks_p(std::vector<double> xs, Cdf&& cdf) {
  std::sort(xs.begin(), xs.end());
  const double n = static_cast<double>(xs.size());
  double d = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double f = cdf(xs[i]);
    d = std::max({d, f - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - f});
  }
  const double t = (std::sqrt(n) + 0.12 + 0.11 / std::sqrt(n)) * d;
  double p = 0.0;
  for (int k = 1; k <= 100; ++k) p += 2.0 * ((k % 2 == 1) ? 1.0 : -1.0) * std::exp(-2.0 * k * k * t * t);
  return std::clamp(p, 0.0, 1.0);
}

}  // namespace

TEST_CASE("mix.every_value_is_the_stated_arithmetic") {
  struct shape {
    std::size_t count;
    std::int64_t h, w, c, classes;
  };
  int cases = 0;
  for (const shape s : {shape{5, 7, 9, 3, 4}, shape{1, 6, 5, 3, 3}, shape{2, 11, 4, 1, 10}, shape{64, 8, 8, 3, 1000}})
    for (const mix_layout layout : {mix_layout::hwc, mix_layout::chw})
      for (std::uint64_t b = 0; b < 6; ++b) {
        CAPTURE(s.count);
        CAPTURE(s.h);
        CAPTURE(s.w);
        CAPTURE(static_cast<int>(layout));
        CAPTURE(b);
        const mix_recipe recipe{mix_op::mixup_cutmix, 0.8, 1.0};
        const mix_params p = draw_mix(recipe, 11, 2, b, s.h, s.w);
        const batch before = random_batch(s.count, s.h, s.w, s.c, s.classes, 100 + b);
        batch after = before;
        mix_batch_host({after.images.data(), s.count, s.h, s.w, s.c, layout, after.labels.data(), s.classes}, p);
        check_mixed(before, after, s.count, s.h, s.w, s.c, layout, s.classes, p);
        ++cases;
      }
  CHECK(cases == 48);
}

TEST_CASE("mix.one_value_rounds_each_product_whatever_the_callers_flags") {
  // mix_value is public and inline; on the host it must give fl(fl(partner x w.partner) + fl(own x
  // w.own)), the device's __fmul_rn/__fadd_rn, in any caller's translation unit: this one is built
  // with the compiler's default contraction (GCC fuses a * b + c into an FMA where the target has
  // one: aarch64, an x86 -march with FMA). The reference keeps each product apart through volatile.
  philox_stream rng(17, 0, 0);
  int fused_differs = 0;
  for (int i = 0; i < 20000; ++i) {
    const float own = static_cast<float>(rng.uniform() * 4.0 - 2.0), partner = static_cast<float>(rng.uniform() * 4.0 - 2.0);
    const mix_weights w = weights_of(rng.uniform());
    volatile float a = partner * w.partner;
    volatile float b = own * w.own;
    const float want = a + b;
    const float got = mix_value(own, partner, w);
    CHECK(std::memcmp(&got, &want, sizeof got) == 0);
    fused_differs += std::fmaf(partner, w.partner, own * w.own) != want || std::fmaf(own, w.own, partner * w.partner) != want;
  }
  // The values are ones where a fused product would give other bits: the check above has teeth.
  CHECK(fused_differs > 1000);
}

TEST_CASE("mix.cutmix_box_and_lambda_correction_are_torchvisions") {
  // The box from lambda and its centre: s = sqrt(1 - lambda) / 2, half sides truncated, clipped;
  // lambda' = 1 - box area / image area. Checked on the draw itself for many batches and shapes.
  int boxes = 0, clipped = 0;
  for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{224, 224}, {17, 31}, {1, 1}, {3, 500}})
    for (std::uint64_t b = 0; b < 300; ++b) {
      const mix_params p = draw_mix({mix_op::cutmix, 1.0, 1.0}, 5, 1, b, h, w);
      CHECK(p.op == mix_op::cutmix);
      REQUIRE(p.lambda >= 0.0);
      REQUIRE(p.lambda <= 1.0);
      const double s = 0.5 * std::sqrt(1.0 - p.lambda);
      const auto half_w = static_cast<std::int64_t>(s * static_cast<double>(w)), half_h = static_cast<std::int64_t>(s * static_cast<double>(h));
      CHECK(p.x1 >= 0);
      CHECK(p.y1 >= 0);
      CHECK(p.x2 <= w);
      CHECK(p.y2 <= h);
      // Unclipped sides are exactly twice the half sides.
      if (p.x1 > 0 && p.x2 < w) CHECK(p.x2 - p.x1 == 2 * half_w);
      if (p.y1 > 0 && p.y2 < h) CHECK(p.y2 - p.y1 == 2 * half_h);
      if (p.x1 == 0 || p.x2 == w || p.y1 == 0 || p.y2 == h) ++clipped;
      CHECK(p.label_lambda == 1.0 - static_cast<double>((p.x2 - p.x1) * (p.y2 - p.y1)) / static_cast<double>(w * h));
      ++boxes;
    }
  CHECK(boxes == 1200);
  CHECK(clipped > 0);
  // MixUp: the labels' lambda is lambda, no box.
  const mix_params m = draw_mix({mix_op::mixup, 0.2, 1.0}, 5, 1, 0, 8, 8);
  CHECK(m.op == mix_op::mixup);
  CHECK(m.label_lambda == m.lambda);
}

TEST_CASE("mix.draw_is_a_pure_function_of_seed_epoch_and_batch") {
  const mix_recipe r{mix_op::mixup_cutmix, 0.8, 1.0};
  const mix_params a = draw_mix(r, 7, 3, 41, 32, 32), b = draw_mix(r, 7, 3, 41, 32, 32);
  CHECK(a.op == b.op);
  CHECK(a.lambda == b.lambda);
  CHECK(a.x1 == b.x1);
  CHECK(a.y2 == b.y2);
  int differ = 0;
  for (const auto& other : {draw_mix(r, 8, 3, 41, 32, 32), draw_mix(r, 7, 4, 41, 32, 32), draw_mix(r, 7, 3, 42, 32, 32)})
    differ += other.lambda != a.lambda;
  CHECK(differ == 3);
}

TEST_CASE("mix.lambdas_follow_beta_and_the_choice_is_even") {
  // 2,000 batches an alpha: the lambdas against Beta(alpha, alpha)'s CDF (p > 0.001), and
  // mixup_cutmix's choice of op within 4 standard deviations of even.
  for (const double alpha : {0.2, 1.0, 2.5}) {
    std::vector<double> lambdas;
    for (std::uint64_t b = 0; b < 2000; ++b) lambdas.push_back(draw_mix({mix_op::mixup, alpha, 1.0}, 99, 0, b, 8, 8).lambda);
    const double p = ks_p(lambdas, [&](double x) { return incomplete_beta(x, alpha, alpha); });
    MESSAGE("MixUp lambdas, alpha " << alpha << ": Kolmogorov-Smirnov p = " << p << " over 2000 batches");
    CHECK(p > 0.001);
    // And not some other Beta: against Beta(2 alpha, 2 alpha) the test must fail.
    CHECK(ks_p(lambdas, [&](double x) { return incomplete_beta(x, 2 * alpha, 2 * alpha); }) < 0.001);
  }
  std::vector<double> mixup, cutmix;
  for (std::uint64_t b = 0; b < 4000; ++b) {
    const mix_params p = draw_mix({mix_op::mixup_cutmix, 0.8, 1.0}, 4, 1, b, 64, 64);
    (p.op == mix_op::mixup ? mixup : cutmix).push_back(p.lambda);
  }
  MESSAGE("mixup_cutmix over 4000 batches: " << mixup.size() << " MixUp, " << cutmix.size() << " CutMix");
  CHECK(std::abs(static_cast<double>(mixup.size()) - 2000.0) < 4.0 * std::sqrt(1000.0));
  const double p_mixup = ks_p(mixup, [](double x) { return incomplete_beta(x, 0.8, 0.8); });
  const double p_cutmix = ks_p(cutmix, [](double x) { return incomplete_beta(x, 1.0, 1.0); });
  MESSAGE("mixup_cutmix: MixUp's lambdas p = " << p_mixup << ", CutMix's p = " << p_cutmix);
  CHECK(p_mixup > 0.001);
  CHECK(p_cutmix > 0.001);
}

TEST_CASE("mix.a_batch_of_one_mixes_with_itself_and_an_empty_box_changes_no_image") {
  batch b = random_batch(1, 4, 4, 3, 5, 1);
  const batch before = b;
  mix_params p;
  p.op = mix_op::mixup;
  p.lambda = p.label_lambda = 0.3;
  mix_batch_host({b.images.data(), 1, 4, 4, 3, mix_layout::hwc, b.labels.data(), 5}, p);
  check_mixed(before, b, 1, 4, 4, 3, mix_layout::hwc, 5, p);
  batch c = random_batch(3, 4, 4, 3, 5, 2);
  const batch c0 = c;
  mix_params empty;
  empty.op = mix_op::cutmix;
  empty.lambda = empty.label_lambda = 1.0;
  empty.x1 = empty.x2 = 2;
  empty.y1 = 0;
  empty.y2 = 4;
  mix_batch_host({c.images.data(), 3, 4, 4, 3, mix_layout::chw, c.labels.data(), 5}, empty);
  CHECK(c.images == c0.images);
  check_mixed(c0, c, 3, 4, 4, 3, mix_layout::chw, 5, empty);
}

TEST_CASE("mix.bad_arguments_are_named") {
  CHECK_THROWS_WITH_AS(check_mix_recipe({mix_op::mixup, 0.0, 1.0}), doctest::Contains("mixup: alpha (MixUp's) must be finite and > 0, not 0"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(check_mix_recipe({mix_op::cutmix, 1.0, -1.0}), doctest::Contains("cutmix: alpha (CutMix's) must be finite and > 0, not -1"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(check_mix_recipe({mix_op::mixup_cutmix, 1.0, std::nan("")}), doctest::Contains("alpha (CutMix's)"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(check_mix_recipe({static_cast<mix_op>(7), 1.0, 1.0}), doctest::Contains("op 7"), pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS((void)draw_mix({mix_op::mixup, 1.0, 1.0}, 0, 0, 0, 0, 5), doctest::Contains("images of 5x0"), pinfeed::invalid_argument);
  std::vector<float> img(2 * 4 * 4 * 3), lab(2 * 3);
  mix_params p;
  p.op = mix_op::mixup;
  p.lambda = p.label_lambda = 0.5;
  CHECK_THROWS_WITH_AS(mix_batch_host({nullptr, 2, 4, 4, 3, mix_layout::hwc, lab.data(), 3}, p), doctest::Contains("null images for 2 samples"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(mix_batch_host({img.data(), 2, 4, 4, 3, mix_layout::hwc, nullptr, 3}, p), doctest::Contains("null labels"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(mix_batch_host({img.data(), 2, 4, 0, 3, mix_layout::hwc, lab.data(), 3}, p), doctest::Contains("0x4x3 images"),
                       pinfeed::invalid_argument);
  mix_params wide = p;
  wide.lambda = 1.5;
  CHECK_THROWS_WITH_AS(mix_batch_host({img.data(), 2, 4, 4, 3, mix_layout::hwc, lab.data(), 3}, wide), doctest::Contains("lambda 1.5 is outside [0, 1]"),
                       pinfeed::invalid_argument);
  mix_params box = p;
  box.op = mix_op::cutmix;
  box.x1 = 1;
  box.x2 = 5;
  box.y2 = 2;
  CHECK_THROWS_WITH_AS(mix_batch_host({img.data(), 2, 4, 4, 3, mix_layout::hwc, lab.data(), 3}, box),
                       doctest::Contains("box [1, 5) x [0, 2) is not inside the 4x4 image"), pinfeed::invalid_argument);
  mix_params both = p;
  both.op = mix_op::mixup_cutmix;
  CHECK_THROWS_WITH_AS(mix_batch_host({img.data(), 2, 4, 4, 3, mix_layout::hwc, lab.data(), 3}, both),
                       doctest::Contains("a batch's op is mixup or cutmix, not mixup_cutmix"), pinfeed::invalid_argument);
  // Nothing was written by the refused calls.
  CHECK(std::all_of(img.begin(), img.end(), [](float v) { return v == 0.0f; }));
}
