// The colour and histogram steps: brightness, contrast, saturation, hue, sharpness, posterize, solarize,
// autocontrast, equalize, invert, grayscale (pinfeed/ops/colour.hpp states each one's arithmetic,
// torchvision v2's on uint8 tensors).
#include <array>
#include <string>
#include <utility>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/ops/colour.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

enum class colour_op { brightness, contrast, saturation, hue, sharpness, posterize, solarize, autocontrast, equalize, invert, grayscale };

const char* op_name(colour_op op) {
  switch (op) {
    case colour_op::brightness: return "brightness";
    case colour_op::contrast: return "contrast";
    case colour_op::saturation: return "saturation";
    case colour_op::hue: return "hue";
    case colour_op::sharpness: return "sharpness";
    case colour_op::posterize: return "posterize";
    case colour_op::solarize: return "solarize";
    case colour_op::autocontrast: return "autocontrast";
    case colour_op::equalize: return "equalize";
    case colour_op::invert: return "invert";
    case colour_op::grayscale: return "grayscale";
  }
  return "?";
}

bool takes_value(colour_op op) {
  return op != colour_op::autocontrast && op != colour_op::equalize && op != colour_op::invert;
}

class colour_transform final : public transform {
 public:
  colour_transform(colour_op op, double value) : op_(op), value_(value) {
    const std::string what = std::string(op_name(op)) + ": ";
    switch (op) {
      case colour_op::brightness:
      case colour_op::contrast:
      case colour_op::saturation:
      case colour_op::sharpness:
        if (!(value >= 0.0) || !std::isfinite(value))
          throw bad_transform_argument(0, what + "the factor must be finite and not negative, got " + format_number(value));
        break;
      case colour_op::hue:
        if (!(value >= -0.5 && value <= 0.5))
          throw bad_transform_argument(0, what + "the factor must be in [-0.5, 0.5], got " + format_number(value));
        break;
      case colour_op::posterize:
        if (!(value >= 1.0 && value <= 8.0) || value != std::floor(value))
          throw bad_transform_argument(0, what + "bits must be a whole number from 1 to 8, got " + format_number(value));
        break;
      case colour_op::solarize:
        if (!(value >= 0.0 && value <= 255.0))
          throw bad_transform_argument(0, what + "the threshold must be in [0, 255], got " + format_number(value));
        break;
      case colour_op::grayscale:
        if (value != 1.0 && value != 3.0)
          throw bad_transform_argument(0, what + "1 or 3 output channels, got " + format_number(value));
        break;
      default: break;
    }
  }
  std::string name() const override {
    return takes_value(op_) ? std::string(op_name(op_)) + "(" + format_number(value_) + ")" : op_name(op_);
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    if (op_ == colour_op::hue && in.channels != 3)
      throw pinfeed::invalid_argument(name() + ": needs 3 channels (a grey image has no hue), input is " + shape_text(in));
    image_spec out = in;
    if (op_ == colour_op::grayscale) out.channels = static_cast<int>(value_);
    return out;
  }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream) const override {
    if (in.type != dtype::u8) return std::nullopt;
    const auto h = static_cast<std::uint32_t>(in.height), w = static_cast<std::uint32_t>(in.width);
    const int c = static_cast<int>(in.channels);
    const auto op = [&](ops::aug_op o) {
      return std::vector<ops::aug_job>{ops::aug_job_of(o, value_, h, w, c, ops::interpolation::nearest, std::nullopt)};
    };
    switch (op_) {
      case colour_op::brightness: return op(ops::aug_op::brightness);
      case colour_op::contrast: return op(ops::aug_op::contrast);
      case colour_op::saturation: return op(ops::aug_op::saturation);
      case colour_op::sharpness: return op(ops::aug_op::sharpness);
      case colour_op::posterize: return op(ops::aug_op::posterize);
      case colour_op::solarize: return op(ops::aug_op::solarize);
      case colour_op::autocontrast: return op(ops::aug_op::autocontrast);
      case colour_op::equalize: return op(ops::aug_op::equalize);
      case colour_op::invert: return op(ops::aug_op::invert);
      case colour_op::hue: return std::vector<ops::aug_job>{ops::hue_job(value_, h, w, c)};
      case colour_op::grayscale:  // as many channels out as in only: the device keeps the image's size
        if (static_cast<int>(value_) != c) return std::nullopt;
        return std::vector<ops::aug_job>{ops::grayscale_job(h, w, c)};
    }
    return std::nullopt;
  }
  // In place but for sharpness (it reads the neighbours' old values) and for a grey image made
  // 3 channels (the output is larger than the input).
  bool in_place() const override { return op_ != colour_op::sharpness && op_ != colour_op::grayscale; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const auto* src = in.as<std::uint8_t>();
    auto* dst = out.as<std::uint8_t>();
    const std::int64_t pixels = in.spec.height * in.spec.width;
    const int c = in.spec.channels;
    switch (op_) {
      case colour_op::brightness: ops::brightness_u8(src, pixels, c, value_, dst); break;
      case colour_op::contrast: ops::contrast_u8(src, pixels, c, value_, dst); break;
      case colour_op::saturation: ops::saturation_u8(src, pixels, c, value_, dst); break;
      case colour_op::hue: ops::hue_u8(src, pixels, c, value_, dst); break;
      case colour_op::sharpness: ops::sharpness_u8(src, in.spec.height, in.spec.width, c, value_, dst); break;
      case colour_op::posterize: ops::posterize_u8(src, pixels, c, static_cast<int>(value_), dst); break;
      case colour_op::solarize: ops::solarize_u8(src, pixels, c, value_, dst); break;
      case colour_op::autocontrast: ops::autocontrast_u8(src, pixels, c, dst); break;
      case colour_op::equalize: ops::equalize_u8(src, pixels, c, dst); break;
      case colour_op::invert: ops::invert_u8(src, pixels, c, dst); break;
      case colour_op::grayscale: ops::grayscale_u8(src, pixels, c, dst, static_cast<int>(value_)); break;
    }
  }

 private:
  colour_op op_;
  double value_;
};

/// ColorJitter: brightness, contrast and saturation factors drawn from [max(0, 1 - x), 1 + x], hue
/// from [-h, h] (0: that one is off), applied in an order drawn as torch.randperm(4); hue leaves a
/// grey image as it is (as torchvision's adjust_hue).
class color_jitter_transform final : public transform {
 public:
  color_jitter_transform(double b, double c, double s, double h) : amounts_{b, c, s, h} {
    const char* names[] = {"brightness", "contrast", "saturation", "hue"};
    for (std::size_t k = 0; k < 4; ++k) {
      const double v = amounts_[k];
      const double top = k == 3 ? 0.5 : 1e6;
      if (!(v >= 0.0 && v <= top))
        throw bad_transform_argument(k, std::string("color_jitter: ") + names[k] + " must be in [0, " + format_number(top) +
                                            "], got " + format_number(v));
    }
  }
  std::string name() const override {
    return "color_jitter(" + format_number(amounts_[0]) + "," + format_number(amounts_[1]) + "," + format_number(amounts_[2]) +
           "," + format_number(amounts_[3]) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    return in;
  }
  bool in_place() const override { return true; }
  /// The order (0 brightness, 1 contrast, 2 saturation, 3 hue) and each factor, NaN where off.
  std::pair<std::array<int, 4>, std::array<double, 4>> draw(philox_stream& rng) const {
    std::array<int, 4> order{0, 1, 2, 3};
    for (int i = 0; i < 3; ++i) std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(i + static_cast<int>(rng.below(static_cast<std::uint32_t>(4 - i))))]);
    std::array<double, 4> f{};
    for (std::size_t k = 0; k < 4; ++k) {
      const double a = amounts_[k];
      f[k] = a == 0.0 ? std::nan("") : k == 3 ? uniform_between(rng, -a, a) : uniform_between(rng, std::max(0.0, 1.0 - a), 1.0 + a);
    }
    return {order, f};
  }
  std::string explain(const image_spec& in, philox_stream rng) const override {
    const char* names[] = {"brightness", "contrast", "saturation", "hue"};
    const auto [order, f] = draw(rng);
    std::string out;
    for (const int k : order) {
      const double v = f[static_cast<std::size_t>(k)];
      if (std::isnan(v) || (k == 3 && in.channels != 3)) continue;
      out += std::string(out.empty() ? "" : ",") + names[k] + "(" + format_double(v) + ")";
    }
    return out;
  }
  int device_rounds() const override { return 4; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    if (in.type != dtype::u8) return std::nullopt;
    const auto h = static_cast<std::uint32_t>(in.height), w = static_cast<std::uint32_t>(in.width);
    const int c = static_cast<int>(in.channels);
    std::vector<ops::aug_job> jobs;
    const auto [order, f] = draw(rng);
    for (const int k : order) {
      const double v = f[static_cast<std::size_t>(k)];
      if (std::isnan(v)) continue;
      const auto none = ops::interpolation::nearest;
      if (k == 0) jobs.push_back(ops::aug_job_of(ops::aug_op::brightness, v, h, w, c, none, std::nullopt));
      if (k == 1) jobs.push_back(ops::aug_job_of(ops::aug_op::contrast, v, h, w, c, none, std::nullopt));
      if (k == 2) jobs.push_back(ops::aug_job_of(ops::aug_op::saturation, v, h, w, c, none, std::nullopt));
      if (k == 3 && c == 3) jobs.push_back(ops::hue_job(v, h, w, c));
    }
    return jobs;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t pixels = in.spec.height * in.spec.width;
    const int c = in.spec.channels;
    if (out.data != in.data) std::memcpy(out.data, in.data, static_cast<std::size_t>(pixels * c));
    auto* px = out.as<std::uint8_t>();
    const auto [order, f] = draw(rng);
    for (const int k : order) {
      const double v = f[static_cast<std::size_t>(k)];
      if (std::isnan(v)) continue;
      switch (k) {
        case 0: ops::brightness_u8(px, pixels, c, v, px); break;
        case 1: ops::contrast_u8(px, pixels, c, v, px); break;
        case 2: ops::saturation_u8(px, pixels, c, v, px); break;
        default:
          if (c == 3) ops::hue_u8(px, pixels, c, v, px);
          break;
      }
    }
  }

 private:
  std::array<double, 4> amounts_;
};

/// RandomGrayscale: with probability p, grey in as many channels as the input has.
class random_grayscale_transform final : public transform {
 public:
  explicit random_grayscale_transform(double p) : p_(p) {
    if (!(p >= 0.0 && p <= 1.0)) throw bad_transform_argument(0, "random_grayscale: p must be in [0, 1], got " + format_number(p));
  }
  std::string name() const override { return "random_grayscale(" + format_number(p_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    return in;
  }
  bool in_place() const override { return true; }
  std::string explain(const image_spec& in, philox_stream rng) const override {
    return rng.uniform() < p_ && in.channels == 3 ? "grayscale(3)" : "";
  }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    if (in.type != dtype::u8) return std::nullopt;
    std::vector<ops::aug_job> jobs;
    if (rng.uniform() < p_ && in.channels == 3)
      jobs.push_back(ops::grayscale_job(static_cast<std::uint32_t>(in.height), static_cast<std::uint32_t>(in.width), 3));
    return jobs;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t pixels = in.spec.height * in.spec.width;
    const int c = in.spec.channels;
    if (rng.uniform() < p_ && c == 3) {
      ops::grayscale_u8(in.as<std::uint8_t>(), pixels, c, out.as<std::uint8_t>(), 3);
    } else if (out.data != in.data) {
      std::memcpy(out.data, in.data, static_cast<std::size_t>(pixels * c));
    }
  }

 private:
  double p_;
};

}  // namespace

std::shared_ptr<transform> make_color_jitter(double brightness, double contrast, double saturation, double hue) {
  return std::make_shared<color_jitter_transform>(brightness, contrast, saturation, hue);
}
std::shared_ptr<transform> make_random_grayscale(double p) { return std::make_shared<random_grayscale_transform>(p); }

std::shared_ptr<transform> make_brightness(double f) { return std::make_shared<colour_transform>(colour_op::brightness, f); }
std::shared_ptr<transform> make_contrast(double f) { return std::make_shared<colour_transform>(colour_op::contrast, f); }
std::shared_ptr<transform> make_saturation(double f) { return std::make_shared<colour_transform>(colour_op::saturation, f); }
std::shared_ptr<transform> make_hue(double f) { return std::make_shared<colour_transform>(colour_op::hue, f); }
std::shared_ptr<transform> make_sharpness(double f) { return std::make_shared<colour_transform>(colour_op::sharpness, f); }
std::shared_ptr<transform> make_posterize(int bits) {
  return std::make_shared<colour_transform>(colour_op::posterize, static_cast<double>(bits));
}
std::shared_ptr<transform> make_solarize(double threshold) {
  return std::make_shared<colour_transform>(colour_op::solarize, threshold);
}
std::shared_ptr<transform> make_autocontrast() { return std::make_shared<colour_transform>(colour_op::autocontrast, 0.0); }
std::shared_ptr<transform> make_equalize() { return std::make_shared<colour_transform>(colour_op::equalize, 0.0); }
std::shared_ptr<transform> make_invert() { return std::make_shared<colour_transform>(colour_op::invert, 0.0); }
std::shared_ptr<transform> make_grayscale(int channels) {
  return std::make_shared<colour_transform>(colour_op::grayscale, static_cast<double>(channels));
}

void add_colour_kinds(std::vector<transform_kind>& kinds) {
  const auto with_value = [&kinds](colour_op op, const char* usage) {
    kinds.push_back({{op_name(op)}, 1, 1, usage,
                     [op](std::span<const double> a) { return std::make_shared<colour_transform>(op, a[0]); }});
  };
  with_value(colour_op::brightness, "brightness(F)");
  with_value(colour_op::contrast, "contrast(F)");
  with_value(colour_op::saturation, "saturation(F)");
  with_value(colour_op::hue, "hue(F)");
  with_value(colour_op::sharpness, "sharpness(F)");
  with_value(colour_op::posterize, "posterize(BITS)");
  with_value(colour_op::solarize, "solarize(THRESHOLD)");
  for (const colour_op op : {colour_op::autocontrast, colour_op::equalize, colour_op::invert})
    kinds.push_back({{op_name(op)}, 0, 0, op_name(op),
                     [op](std::span<const double>) { return std::make_shared<colour_transform>(op, 0.0); }});
  kinds.push_back({{"color_jitter"}, 1, 4, "color_jitter(BRIGHTNESS[, CONTRAST[, SATURATION[, HUE]]])",
                   [](std::span<const double> a) {
                     return make_color_jitter(a[0], a.size() > 1 ? a[1] : 0.0, a.size() > 2 ? a[2] : 0.0, a.size() > 3 ? a[3] : 0.0);
                   }});
  kinds.push_back({{"random_grayscale"}, 0, 1, "random_grayscale[(P)]",
                   [](std::span<const double> a) { return make_random_grayscale(a.empty() ? 0.1 : a[0]); }});
  kinds.push_back({{"grayscale"}, 0, 1, "grayscale[(CHANNELS)]", [](std::span<const double> a) {
                     return std::make_shared<colour_transform>(colour_op::grayscale, a.empty() ? 1.0 : a[0]);
                   }});
}

}  // namespace pinfeed::loaders
