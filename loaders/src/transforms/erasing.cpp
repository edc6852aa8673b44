// RandomErasing (torchvision v2's): with probability p, a box of the drawn area and aspect, as
// torchvision searches for one (10 tries; none fitting: the image as it is), set to a value: 0, a
// constant (per channel through the C++ API) or `random` (standard normal noise; into a uint8
// image as torchvision converts it: truncated toward zero, then modulo 256). On uint8 images, or
// float ones (after normalize, where torchvision's recipes erase).
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "pinfeed/ops/augment.hpp"
#include "kinds.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

/// A value into uint8 as torchvision's copy converts it: truncated toward zero, modulo 256.
std::uint8_t as_u8(double v) { return static_cast<std::uint8_t>(static_cast<std::int64_t>(v) & 0xFF); }

/// Sets the box {i, j, h, w} of `out` to value(k) in channel k: into uint8 as torchvision's copy
/// converts it (truncated toward zero, modulo 256: -1.3 -> 255), into float as it is.
template <class Value>
void fill_box(const image_view& out, const std::array<std::int64_t, 4>& box, Value&& value) {
  const auto [i, j, h, w] = box;
  const std::int64_t W = out.spec.width;
  const int c = out.spec.channels;
  const bool f32 = out.spec.type == dtype::f32;
  for (std::int64_t y = i; y < i + h; ++y)
    for (std::int64_t x = j; x < j + w; ++x)
      for (int k = 0; k < c; ++k) {
        const std::int64_t at = (y * W + x) * c + k;
        const double v = value(k);
        if (f32) out.as<float>()[at] = static_cast<float>(v);
        else out.as<std::uint8_t>()[at] = as_u8(v);
      }
}

/// fill_box with one value a channel (`values`: 1, the same for every channel, or one a channel),
/// converted once: each row of the box one fill where the channels agree.
void fill_box(const image_view& out, const std::array<std::int64_t, 4>& box, const std::vector<double>& values) {
  const auto [i, j, h, w] = box;
  const int c = out.spec.channels;
  const auto value = [&](int k) { return values[values.size() == 1 ? 0 : static_cast<std::size_t>(k)]; };
  bool same = true;
  for (int k = 1; k < c; ++k) same = same && value(k) == value(0);
  if (!same) return fill_box(out, box, value);
  const std::int64_t W = out.spec.width;
  for (std::int64_t y = i; y < i + h; ++y) {
    const auto first = static_cast<std::size_t>((y * W + j) * c), n = static_cast<std::size_t>(w * c);
    if (out.spec.type == dtype::f32) std::fill_n(out.as<float>() + first, n, static_cast<float>(value(0)));
    else std::fill_n(out.as<std::uint8_t>() + first, n, as_u8(value(0)));
  }
}

class random_erasing_transform final : public transform {
 public:
  random_erasing_transform(double p, double smin, double smax, double rmin, double rmax, std::vector<double> value)
      : p_(p), smin_(smin), smax_(smax), rmin_(rmin), rmax_(rmax), value_(std::move(value)) {
    const std::string what = "random_erasing: ";
    if (!(p >= 0.0 && p <= 1.0)) throw bad_transform_argument(0, what + "p must be in [0, 1], got " + format_number(p));
    if (!(smin > 0.0 && smin <= smax && smax <= 1.0))
      throw bad_transform_argument(1, what + "the scale range must be within (0, 1] and increasing, got " + format_number(smin) + ", " +
                                          format_number(smax));
    if (!(rmin > 0.0 && rmin <= rmax && std::isfinite(rmax)))
      throw bad_transform_argument(3, what + "the ratio range must be positive and increasing, got " + format_number(rmin) + ", " +
                                          format_number(rmax));
    for (const double v : value_)
      if (!(v >= 0.0 && v <= 255.0)) throw bad_transform_argument(5, what + "the value must be in [0, 255] or random, got " + format_number(v));
    log_rmin_ = static_cast<float>(std::log(static_cast<float>(rmin)));
    log_rmax_ = static_cast<float>(std::log(static_cast<float>(rmax)));
  }
  std::string name() const override {
    std::string s = "random_erasing(" + format_number(p_) + "," + format_number(smin_) + "," + format_number(smax_) + "," +
                    format_number(rmin_) + "," + format_number(rmax_);
    if (value_.empty()) return s + ",value=random)";
    if (value_.size() == 1) return s + (value_[0] == 0.0 ? ")" : ",value=" + format_number(value_[0]) + ")");
    return s + ",value=per-channel)";  // through the C++ API only
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in, true);  // uint8, or float after normalize (torchvision's recipes erase there)
    if (value_.size() > 1 && static_cast<int>(value_.size()) != in.channels)
      throw pinfeed::invalid_argument(name() + ": " + std::to_string(value_.size()) + " values for an image of " +
                                      std::to_string(in.channels) + " channels");
    return in;
  }
  bool in_place() const override { return true; }
  /// torchvision's box: {i, j, h, w}, or nothing (not drawn, or no try fitted).
  std::optional<std::array<std::int64_t, 4>> draw(std::int64_t H, std::int64_t W, philox_stream& rng) const {
    if (!(rng.uniform() < p_)) return std::nullopt;
    const double area = static_cast<double>(H * W);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double erase_area = area * uniform_between(rng, smin_, smax_);
      const double aspect = static_cast<double>(std::exp(static_cast<float>(uniform_between(rng, log_rmin_, log_rmax_))));
      const auto h = static_cast<std::int64_t>(std::nearbyint(std::sqrt(erase_area * aspect)));  // Python's round: ties to even
      const auto w = static_cast<std::int64_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
      if (!(h < H && w < W)) continue;
      const auto i = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(H - h + 1)));
      const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(W - w + 1)));
      return std::array<std::int64_t, 4>{i, j, h, w};
    }
    return std::nullopt;
  }
  std::string explain(const image_spec& in, philox_stream rng) const override {
    const auto box = draw(in.height, in.width, rng);
    if (!box) return "";
    std::string s = "erase(" + std::to_string((*box)[0]) + "," + std::to_string((*box)[1]) + "," + std::to_string((*box)[2]) + "," +
                    std::to_string((*box)[3]);
    if (value_.empty()) return s + ",value=random)";  // noise from the stream: not a step of its own
    if (value_.size() == 1) return s + ",value=" + format_number(value_[0]) + ")";
    return s + ",value=per-channel)";
  }
  /// One erase job (none where no box is drawn), its noise from where apply() would take it: for
  /// uint8 images (augment_batch_*) and float ones (erase_float_*).
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    if ((in.type != dtype::u8 && in.type != dtype::f32) || (in.channels != 1 && in.channels != 3)) return std::nullopt;
    const auto box = draw(in.height, in.width, rng);
    if (!box) return std::vector<ops::aug_job>{};
    const std::uint32_t b[4] = {static_cast<std::uint32_t>((*box)[0]), static_cast<std::uint32_t>((*box)[1]),
                                static_cast<std::uint32_t>((*box)[2]), static_cast<std::uint32_t>((*box)[3])};
    const auto h = static_cast<std::uint32_t>(in.height), w = static_cast<std::uint32_t>(in.width);
    if (value_.empty()) return std::vector<ops::aug_job>{ops::erase_noise_job(b, rng, h, w, in.channels)};
    double v[3] = {};
    for (int k = 0; k < in.channels; ++k) v[k] = value_at(rng, k);
    return std::vector<ops::aug_job>{ops::erase_job(b, v, h, w, in.channels)};
  }
  int device_rounds() const override { return 1; }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    if (out.data != in.data) std::memcpy(out.data, in.data, in.spec.bytes());
    const auto box = draw(in.spec.height, in.spec.width, rng);
    if (!box) return;
    if (!value_.empty()) fill_box(out, *box, value_);
    else fill_box(out, *box, [&](int k) { return value_at(rng, k); });
  }

 private:
  /// The value for channel k: the constant, or N(0, 1) noise (ops::normal_noise of the stream's
  /// next two words: the bits the device's erase job computes).
  double value_at(philox_stream& rng, int k) const {
    if (!value_.empty()) return value_[value_.size() == 1 ? 0 : static_cast<std::size_t>(k)];
    const std::uint32_t a = rng.next_u32();
    return ops::normal_noise(a, rng.next_u32());
  }

  double p_, smin_, smax_, rmin_, rmax_;
  std::vector<double> value_;  // empty: random
  float log_rmin_ = 0, log_rmax_ = 0;
};

/// erase(i, j, h, w, value): torchvision's F.erase.
class erase_transform final : public transform {
 public:
  erase_transform(std::array<std::int64_t, 4> box, std::vector<double> value) : box_(box), value_(std::move(value)) {
    for (std::size_t k = 0; k < 4; ++k)
      if (box_[k] < 0) throw bad_transform_argument(k, "erase: a negative position or size " + std::to_string(box_[k]));
    if (value_.empty()) throw bad_transform_argument(4, "erase: no value");
    for (const double v : value_)
      if (!(v >= 0.0 && v <= 255.0)) throw bad_transform_argument(4, "erase: the value must be in [0, 255], got " + format_number(v));
  }
  std::string name() const override {
    std::string s = "erase(" + std::to_string(box_[0]) + "," + std::to_string(box_[1]) + "," + std::to_string(box_[2]) + "," +
                    std::to_string(box_[3]);
    return value_.size() == 1 ? s + ",value=" + format_number(value_[0]) + ")" : s + ",value=per-channel)";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in, true);  // float too: what random_erasing after normalize explains itself as
    // Each size that is known (a negative one is not: a variable-size dataset) is checked.
    if ((in.height >= 0 && box_[0] + box_[2] > in.height) || (in.width >= 0 && box_[1] + box_[3] > in.width))
      throw pinfeed::invalid_argument(name() + ": the box reaches past the image, input is " + shape_text(in));
    if (value_.size() > 1 && static_cast<int>(value_.size()) != in.channels)
      throw pinfeed::invalid_argument(name() + ": " + std::to_string(value_.size()) + " values for " + shape_text(in));
    return in;
  }
  bool in_place() const override { return true; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    if (out.data != in.data) std::memcpy(out.data, in.data, in.spec.bytes());
    fill_box(out, box_, value_);
  }

 private:
  std::array<std::int64_t, 4> box_;
  std::vector<double> value_;
};

}  // namespace

std::shared_ptr<transform> make_erase(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t w, std::vector<double> value) {
  return std::make_shared<erase_transform>(std::array<std::int64_t, 4>{i, j, h, w}, std::move(value));
}

std::shared_ptr<transform> make_random_erasing(double p, double scale_min, double scale_max, double ratio_min,
                                               double ratio_max, std::vector<double> value) {
  return std::make_shared<random_erasing_transform>(p, scale_min, scale_max, ratio_min, ratio_max, std::move(value));
}

void add_erasing_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"erase"}, 4, 4, "erase(I, J, H, W[, value=V])",
                   [](std::span<const double> a) {
                     for (std::size_t k = 0; k < 4; ++k)
                       if (a[k] != std::floor(a[k]) || !(std::abs(a[k]) < 1e15))
                         throw bad_transform_argument(k, "erase: positions and sizes are whole numbers, got " + format_number(a[k]));
                     return make_erase(static_cast<std::int64_t>(a[0]), static_cast<std::int64_t>(a[1]), static_cast<std::int64_t>(a[2]),
                                       static_cast<std::int64_t>(a[3]), {a[4]});
                   },
                   {{"value", {}, 0.0}}});
  transform_option value{"value", {"random"}, 0.0};
  value.numbers_too = true;
  kinds.push_back({{"random_erasing"}, 0, 5, "random_erasing[(P[, SCALE_MIN, SCALE_MAX[, RATIO_MIN, RATIO_MAX]])][, value=V|random]",
                   [](std::span<const double> a) {
                     const std::size_t n = a.size() - 1;
                     if (n == 2 || n == 4)
                       throw bad_transform_argument(n - 1, "random_erasing: P, then the scale's least and greatest, then the ratio's");
                     const double v = a.back();
                     try {
                       return make_random_erasing(n > 0 ? a[0] : 0.5, n > 1 ? a[1] : 0.02, n > 2 ? a[2] : 0.33, n > 3 ? a[3] : 0.3,
                                                  n > 4 ? a[4] : 3.3, v < 0 ? std::vector<double>{} : std::vector<double>{v});
                     } catch (const bad_transform_argument& e) {
                       throw bad_transform_argument(e.index() == 5 ? n : e.index(), e.what());  // the value: the option
                     }
                   },
                   {value}});
}

}  // namespace pinfeed::loaders
