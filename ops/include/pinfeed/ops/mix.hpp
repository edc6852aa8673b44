#pragma once
/// @file mix.hpp
/// MixUp and CutMix on a batch, as torchvision.transforms.v2.MixUp and CutMix define them (and
/// RandomChoice of the two), on the host and on the device with the same bits.
///
/// The batch: `count` float32 images, each `height` x `width` x `channels` in HWC or CHW order, and
/// their labels as rows of `classes` float32 (one-hot on entry, soft after). Sample i's partner is
/// sample i - 1, sample 0's is sample count - 1: the batch rolled by one (torch.roll(batch, 1, 0)).
///
/// The draw (draw_mix), a pure function of (seed, epoch, batch index): the stream
/// philox_stream(seed, epoch, batch, kMixSubstream) gives, in this order,
///   - for mixup_cutmix, the op: mixup where the first word is below 2^31, else cutmix;
///   - lambda from Beta(alpha, alpha) of that op, as X / (X + Y) with X, Y from Gamma(alpha, 1)
///     (Marsaglia and Tsang's method in double precision, alpha < 1 through Gamma(alpha + 1) and
///     U^(1 / alpha), in logarithms; normals by Box-Muller, uniforms of 53 bits from two words);
///   - for cutmix, the box's centre r_x = below(width), r_y = below(height) (torch.randint).
/// MixUp, with l = float(lambda) and r = float(1 - lambda) (the difference in double, rounded once):
///   out_i = fl(fl(x_partner * r) + fl(x_i * l))          (torchvision: rolled.mul_(1 - lam).add_(x.mul(lam)))
/// and the label rows alike. CutMix (torchvision's box and its lambda correction):
///   s = 0.5 * sqrt(1 - lambda), half_w = trunc(s * width), half_h = trunc(s * height),
///   x1 = max(r_x - half_w, 0), y1 = max(r_y - half_h, 0), x2 = min(r_x + half_w, width),
///   y2 = min(r_y + half_h, height); out_i = x_partner inside [y1, y2) x [x1, x2) (every channel),
///   x_i elsewhere; the label rows mixed as MixUp's with lambda' = 1 - (x2 - x1)(y2 - y1) / (width height).
/// Each label row sums to 1 within float rounding (two products and a sum: under 1e-6 from 1).

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/philox.hpp"  // PINFEED_HD

namespace pinfeed::ops {

/// The substream of a batch's draw (philox_stream's substream: apart from every sample's streams).
inline constexpr std::uint32_t kMixSubstream = 0xB47C;

/// Which op: MixUp, CutMix, or one of the two a batch (torchvision's RandomChoice, even odds).
enum class mix_op : std::uint32_t { mixup = 0, cutmix = 1, mixup_cutmix = 2 };

/// The op's spelling: "mixup", "cutmix", "mixup_cutmix" ("?" for another value).
[[nodiscard]] inline const char* mix_op_name(mix_op op) {
  switch (op) {
    case mix_op::mixup: return "mixup";
    case mix_op::cutmix: return "cutmix";
    case mix_op::mixup_cutmix: return "mixup_cutmix";
  }
  return "?";
}

/// A batch op's recipe. alpha_mixup is used by mixup and mixup_cutmix, alpha_cutmix by cutmix and
/// mixup_cutmix; each used one must be finite and > 0 (check_mix_recipe).
struct mix_recipe {
  mix_op op = mix_op::mixup;
  double alpha_mixup = 1.0;
  double alpha_cutmix = 1.0;
};

/// One batch's draw: what mix_batch_host and mix_batch_device apply.
struct mix_params {
  mix_op op = mix_op::mixup;  ///< mixup or cutmix (never mixup_cutmix)
  double lambda = 1.0;        ///< from Beta(alpha, alpha)
  double label_lambda = 1.0;  ///< the labels' weight of each sample's own label: lambda, or CutMix's lambda'
  std::int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;  ///< CutMix's box (empty for MixUp)
};

/// The images' order in memory.
enum class mix_layout : std::uint32_t { hwc = 0, chw = 1 };

/// A batch for mix_batch_host (host pointers) or mix_batch_device (device pointers); both written in
/// place. labels may be null (classes 0): then only the images are mixed.
struct mix_batch_args {
  float* images = nullptr;
  std::size_t count = 0;
  std::int64_t height = 0, width = 0, channels = 0;
  mix_layout layout = mix_layout::hwc;
  float* labels = nullptr;
  std::int64_t classes = 0;
};

/// Throws pinfeed::invalid_argument naming the value: an alpha that is not finite and > 0, an op
/// outside the three.
void check_mix_recipe(const mix_recipe& recipe);

/// The draw of batch `batch` of `epoch` under `seed` for images of height x width (the header's).
/// Throws as check_mix_recipe, and for a side under 1.
[[nodiscard]] mix_params draw_mix(const mix_recipe& recipe, std::uint64_t seed, std::uint32_t epoch, std::uint64_t batch,
                                  std::int64_t height, std::int64_t width);

/// Throws pinfeed::invalid_argument naming what is wrong with `a` or `p`: null images or labels with
/// a non-empty batch, sides or channels under 1, an op other than mixup or cutmix, a lambda outside
/// [0, 1], a box outside the image.
void check_mix_batch(const mix_batch_args& a, const mix_params& p);

/// Applies `p` to the batch on the host (the header's arithmetic).
void mix_batch_host(const mix_batch_args& a, const mix_params& p);

/// The same on the device, queued on `stream`: no host synchronization, no allocation, capturable in
/// a CUDA graph. Checks the arguments first (check_mix_batch); cuda_error on a launch failure.
void mix_batch_device(const mix_batch_args& a, const mix_params& p, cudaStream_t stream);

/// The two weights of a mix as floats: `own` = float(lambda), `partner` = float(1 - lambda).
struct mix_weights {
  float own, partner;
};
[[nodiscard]] inline mix_weights weights_of(double lambda) {
  return {static_cast<float>(lambda), static_cast<float>(1.0 - lambda)};
}

namespace detail {
/// mix_value on the host, out of line in a translation unit built without contraction
/// (ops/src/finishing/mix.cpp), so that no caller's compiler flags can fuse its products and sum.
[[nodiscard]] float mix_value_host(float own, float partner, mix_weights w) noexcept;
}  // namespace detail

/// One mixed value: fl(fl(partner * w.partner) + fl(own * w.own)), host and device alike.
PINFEED_HD float mix_value(float own, float partner, mix_weights w) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(partner, w.partner), __fmul_rn(own, w.own));
#else
  return detail::mix_value_host(own, partner, w);
#endif
}

}  // namespace pinfeed::ops
