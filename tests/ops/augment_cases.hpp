#pragma once
// The augmentation jobs the ops' tests run (augment_test.cpp on the host, augment_gpu_test.cu on
// the device): every op and policy table at several magnitudes, each with the host op it stands for.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/blur.hpp"
#include "pinfeed/ops/colour.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed::test {

struct aug_case {
  std::string what;
  ops::aug_job job;
  /// The host op the job stands for: in -> out (height x width x channels of the job).
  std::function<void(const std::uint8_t*, std::uint8_t*)> reference;
};

/// Random samples, with runs of one value (so that equalize and autocontrast have ties and extremes).
inline std::vector<std::uint8_t> aug_image(std::uint64_t bytes, std::uint64_t seed) {
  philox_stream r(seed, 3, 7);
  std::vector<std::uint8_t> v(bytes);
  const std::uint32_t lo = r.below(64), span = 64 + r.below(192);
  for (auto& b : v) b = static_cast<std::uint8_t>(lo + r.below(span) % (256 - lo));
  for (std::uint64_t i = 0; i + 8 < bytes; i += 97) std::fill(v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(i + 8), v[i]);
  return v;
}

/// Every op of policies.hpp at the magnitudes `policy_family`'s tables give at a few bins (both
/// signs where signed), both interpolations, with and without a fill; affine, hue and grayscale;
/// for an image of height x width x channels.
inline std::vector<aug_case> aug_cases(std::uint32_t h, std::uint32_t w, int c) {
  using namespace ops;
  std::vector<aug_case> out;
  const auto H = static_cast<std::int64_t>(h), W = static_cast<std::int64_t>(w);
  for (int o = 0; o < kAugOps; ++o) {
    const auto op = static_cast<aug_op>(o);
    for (const auto family : {policy_family::trivial_augment_wide, policy_family::rand_augment}) {
      const magnitude_table t = policy_table(family, op);
      const int bins = family == policy_family::trivial_augment_wide ? 31 : 10;
      std::vector<double> ms;
      if (t.type == magnitude_table::kind::none) ms = {0.0};
      else
        for (const int bin : {0, 3, bins / 2, bins - 1}) {
          const double m = t.at(bins, bin, H, W);
          ms.push_back(m);
          if (aug_op_signed(op) && m != 0.0) ms.push_back(-m);
        }
      if (op == aug_op::rotate) ms.insert(ms.end(), {90.0, -90.0, 180.0, 270.0, 360.0, -450.0});
      for (const double m : ms)
        for (const auto mode : {interpolation::nearest, interpolation::bilinear})
          for (const std::optional<double> fill : {std::optional<double>{}, std::optional<double>{127.6}}) {
            const bool warp = op == aug_op::shear_x || op == aug_op::shear_y || op == aug_op::translate_x ||
                              op == aug_op::translate_y || op == aug_op::rotate;
            if (!warp && (mode != interpolation::nearest || fill)) continue;
            out.push_back({std::string(aug_op_name(op)) + "(" + std::to_string(m) + (mode == interpolation::bilinear ? ",bilinear" : "") +
                               (fill ? ",fill" : "") + ")",
                           aug_job_for(op, m, h, w, c, mode, fill),
                           [=](const std::uint8_t* in, std::uint8_t* o) { apply_aug_op_u8(op, m, in, H, W, c, mode, fill, o); }});
          }
    }
  }
  for (const auto mode : {interpolation::nearest, interpolation::bilinear})
    for (const std::optional<double> fill : {std::optional<double>{}, std::optional<double>{0.0}}) {
      const double args[6] = {-23.5, 3.0, -2.0, 0.85, 11.0, -7.5};
      out.push_back({"affine", affine_job(args[0], args[1], args[2], args[3], args[4], args[5], h, w, c, mode, fill),
                     [=](const std::uint8_t* in, std::uint8_t* o) {
                       affine_u8(in, H, W, c, args[0], args[1], args[2], args[3], args[4], args[5], mode, fill, o);
                     }});
    }
  if (c == 3)
    for (const double f : {-0.5, -0.13, 0.0, 0.27, 0.5})
      out.push_back({"hue(" + std::to_string(f) + ")", hue_job(f, h, w, c),
                     [=](const std::uint8_t* in, std::uint8_t* o) { hue_u8(in, H * W, c, f, o); }});
  out.push_back({"grayscale", grayscale_job(h, w, c),
                 [=](const std::uint8_t* in, std::uint8_t* o) { grayscale_u8(in, H * W, c, o, c); }});
  // blur: square and not, sigmas small and large (a near-delta and a near-box kernel), the
  // default sigma, 1 tap (a copy through the float sums) and 23 taps (SimCLR's); where they fit
  // (the reflected border is narrower than the image)
  const struct {
    int kx, ky;
    double sx, sy;
  } blurs[] = {{3, 3, 0.8, 0.8}, {5, 3, 1.1, 0.4}, {7, 7, 1.4, 1.4}, {1, 9, 0.5, 3.7}, {9, 5, 0.2, 20.0}, {1, 1, 1.0, 1.0}, {23, 23, 1.9, 0.7}};
  for (const auto& b : blurs)
    if (b.kx / 2 < W && b.ky / 2 < H)
      out.push_back({"gaussian_blur(" + std::to_string(b.kx) + "," + std::to_string(b.sx) + "," + std::to_string(b.ky) + "," +
                         std::to_string(b.sy) + ")",
                     blur_job(b.kx, b.ky, b.sx, b.sy, h, w, c), [=](const std::uint8_t* in, std::uint8_t* o) {
                       gaussian_blur_u8(in, H, W, c, b.kx, b.ky, b.sx, b.sy, o);
                     }});
  // erase: boxes at a corner, in the middle, the whole image and none, with a value a channel or
  // noise from a stream read from an odd word on (the reference reads it word by word)
  const std::uint32_t boxes[4][4] = {{0, 0, (h + 1) / 2, (w + 2) / 3}, {h / 3, w / 2, h - h / 3 - h / 4, w - w / 2}, {0, 0, h, w}, {h / 2, w / 2, 0, w - w / 2}};
  for (const auto& b : boxes) {
    const double value[3] = {7.9, 255.0, 300.6};  // into uint8: 7, 255, 44
    const std::string at = "(" + std::to_string(b[0]) + "," + std::to_string(b[1]) + "," + std::to_string(b[2]) + "," + std::to_string(b[3]) + ")";
    const auto fill_box = [=](const std::uint8_t* in, std::uint8_t* o, const std::function<std::uint8_t(int)>& v) {
      std::copy(in, in + std::uint64_t{h} * w * c, o);
      for (std::uint32_t y = b[0]; y < b[0] + b[2]; ++y)
        for (std::uint32_t x = b[1]; x < b[1] + b[3]; ++x)
          for (int k = 0; k < c; ++k) o[(std::uint64_t{y} * w + x) * c + k] = v(k);
    };
    out.push_back({"erase" + at, erase_job(b, value, h, w, c), [=](const std::uint8_t* in, std::uint8_t* o) {
                     fill_box(in, o, [&](int k) { return static_cast<std::uint8_t>(static_cast<std::int64_t>(value[k]) & 0xFF); });
                   }});
    philox_stream noise((0x5EEDull << 40) | (h * 131u + w), 9, 0xABCDEF012345ull + c, 3);
    for (int k = 0; k < 3; ++k) (void)noise.next_u32();
    out.push_back({"erase_noise" + at, erase_noise_job(b, noise, h, w, c), [=](const std::uint8_t* in, std::uint8_t* o) {
                     philox_stream r = noise;
                     fill_box(in, o, [&](int) {
                       const std::uint32_t u1 = r.next_u32();
                       return static_cast<std::uint8_t>(static_cast<std::int64_t>(normal_noise(u1, r.next_u32())) & 0xFF);
                     });
                   }});
  }
  return out;
}

}  // namespace pinfeed::test
