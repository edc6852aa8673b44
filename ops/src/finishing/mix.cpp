// MixUp and CutMix (pinfeed/ops/mix.hpp): the batch's draw, the argument checks, and the host's
// application. Built without floating-point contraction: mix_value's two products are rounded
// each on its own, as the device's __fmul_rn.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pinfeed/ops/mix.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

namespace {

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

/// The batch's stream, as the doubles the draw needs.
struct draw_stream {
  philox_stream words;
  /// [0, 1) with 53 random bits.
  double uniform() {
    const std::uint32_t hi = words.next_u32() >> 5, lo = words.next_u32() >> 6;
    return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) / 9007199254740992.0;
  }
  /// (0, 1).
  double positive() {
    for (;;)
      if (const double u = uniform(); u > 0.0) return u;
  }
  /// N(0, 1), Box-Muller's cosine half.
  double normal() {
    const double u1 = positive(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

/// log of a Gamma(a, 1) draw (Marsaglia and Tsang; a < 1 through Gamma(a + 1) U^(1/a)).
double log_gamma_draw(draw_stream& r, double a) {
  if (a < 1.0) {
    const double g = log_gamma_draw(r, a + 1.0);
    return g + std::log(r.positive()) / a;
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0.0, v = 0.0;
    do {
      x = r.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = r.positive();
    if (u < 1.0 - 0.0331 * x * x * x * x) return std::log(d * v);
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return std::log(d * v);
  }
}

/// Beta(a, a) as X / (X + Y), from the two logarithms (no underflow for small a).
double beta_draw(draw_stream& r, double a) {
  const double lx = log_gamma_draw(r, a), ly = log_gamma_draw(r, a);
  return 1.0 / (1.0 + std::exp(ly - lx));
}

}  // namespace

float detail::mix_value_host(float own, float partner, mix_weights w) noexcept { return partner * w.partner + own * w.own; }

namespace {

/// One image's worth of the batch, `own` mixed in place with `partner` (the header's arithmetic).
void mix_one(float* own, const float* partner, std::size_t n, mix_weights w) {
  for (std::size_t e = 0; e < n; ++e) own[e] = mix_value(own[e], partner[e], w);
}

/// CutMix's box of `partner` pasted into `own`.
void paste_box(float* own, const float* partner, const mix_batch_args& a, const mix_params& p) {
  const auto H = static_cast<std::size_t>(a.height), W = static_cast<std::size_t>(a.width), C = static_cast<std::size_t>(a.channels);
  const auto x1 = static_cast<std::size_t>(p.x1), x2 = static_cast<std::size_t>(p.x2);
  for (auto y = static_cast<std::size_t>(p.y1); y < static_cast<std::size_t>(p.y2); ++y) {
    if (a.layout == mix_layout::hwc) {
      const std::size_t at = (y * W + x1) * C;
      std::memcpy(own + at, partner + at, (x2 - x1) * C * sizeof(float));
    } else {
      for (std::size_t c = 0; c < C; ++c) {
        const std::size_t at = (c * H + y) * W + x1;
        std::memcpy(own + at, partner + at, (x2 - x1) * sizeof(float));
      }
    }
  }
}

/// Every sample i of `data` (count rows of n values) mixed with sample i - 1 (sample 0 with the
/// last), in place: from the last sample down, with a copy of the last sample for sample 0.
template <class Mix>
void roll_mix(float* data, std::size_t count, std::size_t n, Mix&& mix) {
  auto& last = pinfeed::detail::thread_scratch<std::vector<float>, struct mix_last_sample>();
  last.assign(data + (count - 1) * n, data + count * n);
  for (std::size_t i = count - 1; i >= 1; --i) mix(data + i * n, data + (i - 1) * n);
  mix(data, last.data());
}

}  // namespace

void check_mix_recipe(const mix_recipe& recipe) {
  if (recipe.op != mix_op::mixup && recipe.op != mix_op::cutmix && recipe.op != mix_op::mixup_cutmix)
    throw pinfeed::invalid_argument("mix: op " + std::to_string(static_cast<std::uint32_t>(recipe.op)) +
                                    " is none of mixup, cutmix, mixup_cutmix");
  const auto check = [&](const char* which, double alpha) {
    if (!(alpha > 0.0) || !std::isfinite(alpha))
      throw pinfeed::invalid_argument(std::string(mix_op_name(recipe.op)) + ": " + which + " must be finite and > 0, not " +
                                      number(alpha));
  };
  if (recipe.op != mix_op::cutmix) check("alpha (MixUp's)", recipe.alpha_mixup);
  if (recipe.op != mix_op::mixup) check("alpha (CutMix's)", recipe.alpha_cutmix);
}

mix_params draw_mix(const mix_recipe& recipe, std::uint64_t seed, std::uint32_t epoch, std::uint64_t batch, std::int64_t height,
                    std::int64_t width) {
  check_mix_recipe(recipe);
  if (height < 1 || width < 1 || height > 0x7FFFFFFF || width > 0x7FFFFFFF)
    throw pinfeed::invalid_argument(std::string(mix_op_name(recipe.op)) + ": images of " + std::to_string(width) + "x" +
                                    std::to_string(height) + " (sides 1 to 2^31 - 1)");
  draw_stream r{philox_stream(seed, epoch, batch, kMixSubstream)};
  mix_params p;
  p.op = recipe.op;
  if (recipe.op == mix_op::mixup_cutmix) p.op = r.words.next_u32() < 0x80000000u ? mix_op::mixup : mix_op::cutmix;
  p.lambda = beta_draw(r, p.op == mix_op::mixup ? recipe.alpha_mixup : recipe.alpha_cutmix);
  p.label_lambda = p.lambda;
  if (p.op == mix_op::cutmix) {
    const auto rx = static_cast<std::int64_t>(r.words.below(static_cast<std::uint32_t>(width)));
    const auto ry = static_cast<std::int64_t>(r.words.below(static_cast<std::uint32_t>(height)));
    const double s = 0.5 * std::sqrt(1.0 - p.lambda);
    const auto half_w = static_cast<std::int64_t>(s * static_cast<double>(width));
    const auto half_h = static_cast<std::int64_t>(s * static_cast<double>(height));
    p.x1 = std::max<std::int64_t>(rx - half_w, 0);
    p.y1 = std::max<std::int64_t>(ry - half_h, 0);
    p.x2 = std::min<std::int64_t>(rx + half_w, width);
    p.y2 = std::min<std::int64_t>(ry + half_h, height);
    p.label_lambda = 1.0 - static_cast<double>((p.x2 - p.x1) * (p.y2 - p.y1)) / static_cast<double>(width * height);
  }
  return p;
}

void check_mix_batch(const mix_batch_args& a, const mix_params& p) {
  const std::string what = std::string(mix_op_name(p.op)) + " batch: ";
  if (p.op != mix_op::mixup && p.op != mix_op::cutmix)
    throw pinfeed::invalid_argument(what + "a batch's op is mixup or cutmix, not " + mix_op_name(p.op));
  if (a.height < 1 || a.width < 1 || a.channels < 1)
    throw pinfeed::invalid_argument(what + std::to_string(a.width) + "x" + std::to_string(a.height) + "x" + std::to_string(a.channels) +
                                    " images: sides and channels must be 1 or more");
  if (a.layout != mix_layout::hwc && a.layout != mix_layout::chw)
    throw pinfeed::invalid_argument(what + "layout " + std::to_string(static_cast<std::uint32_t>(a.layout)) + " is neither hwc nor chw");
  if (a.classes < 0) throw pinfeed::invalid_argument(what + "classes " + std::to_string(a.classes) + " is negative");
  if (a.count > 0 && a.images == nullptr) throw pinfeed::invalid_argument(what + "null images for " + std::to_string(a.count) + " samples");
  if (a.count > 0 && a.classes > 0 && a.labels == nullptr)
    throw pinfeed::invalid_argument(what + "null labels for " + std::to_string(a.count) + " samples of " + std::to_string(a.classes) +
                                    " classes");
  for (const double l : {p.lambda, p.label_lambda})
    if (!(l >= 0.0 && l <= 1.0)) throw pinfeed::invalid_argument(what + "lambda " + number(l) + " is outside [0, 1]");
  if (p.op == mix_op::cutmix && !(0 <= p.x1 && p.x1 <= p.x2 && p.x2 <= a.width && 0 <= p.y1 && p.y1 <= p.y2 && p.y2 <= a.height))
    throw pinfeed::invalid_argument(what + "box [" + std::to_string(p.x1) + ", " + std::to_string(p.x2) + ") x [" + std::to_string(p.y1) +
                                    ", " + std::to_string(p.y2) + ") is not inside the " + std::to_string(a.width) + "x" +
                                    std::to_string(a.height) + " image");
}

void mix_batch_host(const mix_batch_args& a, const mix_params& p) {
  check_mix_batch(a, p);
  if (a.count == 0) return;
  const std::size_t per = static_cast<std::size_t>(a.height) * static_cast<std::size_t>(a.width) * static_cast<std::size_t>(a.channels);
  if (p.op == mix_op::mixup) {
    const mix_weights w = weights_of(p.lambda);
    roll_mix(a.images, a.count, per, [&](float* own, const float* partner) { mix_one(own, partner, per, w); });
  } else if (p.x1 < p.x2 && p.y1 < p.y2) {
    roll_mix(a.images, a.count, per, [&](float* own, const float* partner) { paste_box(own, partner, a, p); });
  }
  if (a.classes > 0) {
    const auto k = static_cast<std::size_t>(a.classes);
    const mix_weights w = weights_of(p.label_lambda);
    roll_mix(a.labels, a.count, k, [&](float* own, const float* partner) { mix_one(own, partner, k, w); });
  }
}

}  // namespace pinfeed::ops
