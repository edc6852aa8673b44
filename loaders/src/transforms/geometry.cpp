// The geometry steps: rotate, affine, shear_x, shear_y, translate_x, translate_y (pinfeed/ops/geometry.hpp
// states their arithmetic, torchvision v2's on uint8 tensors). Each takes an optional fill after its
// numbers and interpolation=nearest|bilinear (nearest by default, as torchvision's).
#include <algorithm>
#include <array>
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/ops/geometry.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

enum class geometry_op { rotate, affine, shear_x, shear_y, translate_x, translate_y };

struct geometry_info {
  const char* name;
  std::size_t values;  // the numbers before the fill
  const char* usage;
};

geometry_info info(geometry_op op) {
  switch (op) {
    case geometry_op::rotate: return {"rotate", 1, "rotate(DEGREES[, FILL][, interpolation=nearest|bilinear])"};
    case geometry_op::affine:
      return {"affine", 6, "affine(ANGLE, TX, TY, SCALE, SHEAR_X, SHEAR_Y[, FILL][, interpolation=nearest|bilinear])"};
    case geometry_op::shear_x: return {"shear_x", 1, "shear_x(FACTOR[, FILL][, interpolation=nearest|bilinear])"};
    case geometry_op::shear_y: return {"shear_y", 1, "shear_y(FACTOR[, FILL][, interpolation=nearest|bilinear])"};
    case geometry_op::translate_x: return {"translate_x", 1, "translate_x(PIXELS[, FILL][, interpolation=nearest|bilinear])"};
    case geometry_op::translate_y: return {"translate_y", 1, "translate_y(PIXELS[, FILL][, interpolation=nearest|bilinear])"};
  }
  return {"?", 0, "?"};
}

/// Whether a warp's matrix can be sampled through: every entry finite.
bool finite(const std::array<double, 6>& m) {
  return std::all_of(m.begin(), m.end(), [](double x) { return std::isfinite(x); });
}

class geometry_transform final : public transform {
 public:
  geometry_transform(geometry_op op, std::vector<double> values, std::optional<double> fill, ops::interpolation mode)
      : op_(op), values_(std::move(values)), fill_(fill), mode_(mode) {
    const std::string what = std::string(info(op).name) + ": ";
    for (std::size_t k = 0; k < values_.size(); ++k)
      if (!std::isfinite(values_[k])) throw bad_transform_argument(k, what + "every value must be finite, got " + format_number(values_[k]));
    if (op == geometry_op::affine && !(values_[3] > 0.0))
      throw bad_transform_argument(3, what + "the scale must be greater than 0, got " + format_number(values_[3]));
    if (op == geometry_op::affine) {
      // The warp samples through the inverse matrix, which (about the image's middle) depends on
      // the parameters alone: one that overflows (a scale near 0, a translation near the largest
      // double) would fail every sample, so it is refused here.
      if (!finite(ops::inverse_affine_matrix(0.0, 0.0, values_[0], values_[1], values_[2], values_[3], values_[4], values_[5])))
        throw bad_transform_argument(3, what + "scale " + format_double(values_[3]) + " with translation (" + format_double(values_[1]) +
                                            ", " + format_double(values_[2]) + ") has no finite inverse warp");
    }
    if (fill_ && !(*fill_ >= 0.0 && *fill_ <= 255.0))
      throw bad_transform_argument(values_.size(), what + "the fill must be in [0, 255], got " + format_number(*fill_));
  }
  std::string name() const override {
    std::string s = std::string(info(op_).name) + "(";
    for (std::size_t k = 0; k < values_.size(); ++k) s += (k ? "," : "") + format_double(values_[k]);
    if (fill_) s += "," + format_number(*fill_);
    if (mode_ == ops::interpolation::bilinear) s += ",interpolation=bilinear";
    return s + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    return in;
  }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream) const override {
    if (in.type != dtype::u8) return std::nullopt;
    const auto h = static_cast<std::uint32_t>(in.height), w = static_cast<std::uint32_t>(in.width);
    const int c = static_cast<int>(in.channels);
    const auto& v = values_;
    const auto op = [&](ops::aug_op o) { return std::vector<ops::aug_job>{ops::aug_job_of(o, v[0], h, w, c, mode_, fill_)}; };
    switch (op_) {
      case geometry_op::rotate: return op(ops::aug_op::rotate);
      case geometry_op::affine:
        return std::vector<ops::aug_job>{ops::affine_job(v[0], v[1], v[2], v[3], v[4], v[5], h, w, c, mode_, fill_)};
      case geometry_op::shear_x: return op(ops::aug_op::shear_x);
      case geometry_op::shear_y: return op(ops::aug_op::shear_y);
      case geometry_op::translate_x: return op(ops::aug_op::translate_x);
      case geometry_op::translate_y: return op(ops::aug_op::translate_y);
    }
    return std::nullopt;
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const auto* src = in.as<std::uint8_t>();
    auto* dst = out.as<std::uint8_t>();
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const int c = in.spec.channels;
    const auto& v = values_;
    switch (op_) {
      case geometry_op::rotate: ops::rotate_u8(src, h, w, c, v[0], mode_, fill_, dst); break;
      case geometry_op::affine: ops::affine_u8(src, h, w, c, v[0], v[1], v[2], v[3], v[4], v[5], mode_, fill_, dst); break;
      case geometry_op::shear_x: ops::shear_x_u8(src, h, w, c, v[0], mode_, fill_, dst); break;
      case geometry_op::shear_y: ops::shear_y_u8(src, h, w, c, v[0], mode_, fill_, dst); break;
      case geometry_op::translate_x: ops::translate_x_u8(src, h, w, c, v[0], mode_, fill_, dst); break;
      case geometry_op::translate_y: ops::translate_y_u8(src, h, w, c, v[0], mode_, fill_, dst); break;
    }
  }

 private:
  geometry_op op_;
  std::vector<double> values_;
  std::optional<double> fill_;
  ops::interpolation mode_;
};

std::shared_ptr<transform> make_geometry(geometry_op op, std::vector<double> values, std::optional<double> fill,
                                         ops::interpolation mode) {
  return std::make_shared<geometry_transform>(op, std::move(values), fill, mode);
}

/// RandomRotation and RandomAffine: each sample's parameters drawn as torchvision draws them, then
/// the warp; their fill is 0 by default, as torchvision's (its mask blend: with bilinear the border
/// differs from no fill).
class random_warp_transform final : public transform {
 public:
  /// rotation: {min, max}; affine: {min, max, translate_x, translate_y, scale_min, scale_max, shear_min, shear_max}
  random_warp_transform(bool affine, std::vector<double> ranges, std::optional<double> fill, ops::interpolation mode)
      : affine_(affine), r_(std::move(ranges)), fill_(fill), mode_(mode) {
    const std::string what = affine ? "random_affine: " : "random_rotation: ";
    for (std::size_t k = 0; k < r_.size(); ++k)
      if (!std::isfinite(r_[k])) throw bad_transform_argument(k, what + "every value must be finite, got " + format_number(r_[k]));
    if (r_[0] > r_[1]) throw bad_transform_argument(0, what + "the degrees' range is empty: " + format_number(r_[0]) + " > " + format_number(r_[1]));
    if (affine) {
      for (const std::size_t k : {std::size_t{2}, std::size_t{3}})
        if (!(r_[k] >= 0.0 && r_[k] <= 1.0))
          throw bad_transform_argument(k - 1, what + "a translation is a fraction of the size in [0, 1], got " + format_number(r_[k]));
      if (!(r_[4] > 0.0 && r_[4] <= r_[5]))
        throw bad_transform_argument(3, what + "the scale range must be positive and increasing, got " + format_number(r_[4]) + ", " + format_number(r_[5]));
      if (r_[6] > r_[7]) throw bad_transform_argument(5, what + "the shear's range is empty");
      // The least scale, the widest shears and translations of an image of 2^31 pixels a side:
      // where even that warp's inverse is finite, every drawn one is.
      const double far = 2147483648.0;
      for (const double shear : {r_[6], r_[7]})
        for (const double sign : {-1.0, 1.0}) {
          if (!finite(ops::inverse_affine_matrix(far, far, 0.0, sign * r_[2] * far, sign * r_[3] * far, r_[4], shear, 0.0)))
            throw bad_transform_argument(3, what + "the least scale " + format_double(r_[4]) + " has no finite inverse warp");
        }
    }
    if (fill_ && !(*fill_ >= 0.0 && *fill_ <= 255.0))
      throw bad_transform_argument(affine ? 6 : 1, what + "the fill must be in [0, 255], got " + format_number(*fill_));
  }
  std::string name() const override {
    std::string s = affine_ ? "random_affine(" + format_double(r_[1]) + "," + format_double(r_[2]) + "," + format_double(r_[3]) +
                                  "," + format_double(r_[4]) + "," + format_double(r_[5]) + "," + format_double(r_[7])
                            : "random_rotation(" + format_double(r_[1]);
    s += "," + (fill_ ? format_number(*fill_) : std::string("0"));
    if (mode_ == ops::interpolation::bilinear) s += ",interpolation=bilinear";
    return s + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    return in;
  }
  /// angle, tx, ty, scale, shear: RandomAffine's order (the translations rounded half to even).
  std::array<double, 5> draw(std::int64_t h, std::int64_t w, philox_stream& rng) const {
    std::array<double, 5> d{uniform_between(rng, r_[0], r_[1]), 0.0, 0.0, 1.0, 0.0};
    if (!affine_) return d;
    const double max_dx = r_[2] * static_cast<double>(w), max_dy = r_[3] * static_cast<double>(h);
    d[1] = std::nearbyint(uniform_between(rng, -max_dx, max_dx));
    d[2] = std::nearbyint(uniform_between(rng, -max_dy, max_dy));
    d[3] = uniform_between(rng, r_[4], r_[5]);
    d[4] = uniform_between(rng, r_[6], r_[7]);
    return d;
  }
  std::string explain(const image_spec& in, philox_stream rng) const override {
    const auto d = draw(in.height, in.width, rng);
    std::string s = affine_ ? "affine(" + format_double(d[0]) + "," + format_double(d[1]) + "," + format_double(d[2]) + "," +
                                  format_double(d[3]) + "," + format_double(d[4]) + ",0"
                            : "rotate(" + format_double(d[0]);
    if (fill_) s += "," + format_number(*fill_);
    if (mode_ == ops::interpolation::bilinear) s += ",interpolation=bilinear";
    return s + ")";
  }
  int device_rounds() const override { return 1; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    if (in.type != dtype::u8) return std::nullopt;
    const auto h = static_cast<std::uint32_t>(in.height), w = static_cast<std::uint32_t>(in.width);
    const int c = static_cast<int>(in.channels);
    const auto d = draw(in.height, in.width, rng);
    if (!affine_) return std::vector<ops::aug_job>{ops::aug_job_of(ops::aug_op::rotate, d[0], h, w, c, mode_, fill_)};
    return std::vector<ops::aug_job>{ops::affine_job(d[0], d[1], d[2], d[3], d[4], 0.0, h, w, c, mode_, fill_)};
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const auto d = draw(h, w, rng);
    if (!affine_) return ops::rotate_u8(in.as<std::uint8_t>(), h, w, in.spec.channels, d[0], mode_, fill_, out.as<std::uint8_t>());
    ops::affine_u8(in.as<std::uint8_t>(), h, w, in.spec.channels, d[0], d[1], d[2], d[3], d[4], 0.0, mode_, fill_,
                   out.as<std::uint8_t>());
  }

 private:
  bool affine_;
  std::vector<double> r_;
  std::optional<double> fill_;
  ops::interpolation mode_;
};

}  // namespace

std::shared_ptr<transform> make_random_rotation(double degrees, std::optional<double> fill, ops::interpolation mode) {
  return std::make_shared<random_warp_transform>(false, std::vector<double>{-degrees, degrees}, fill, mode);
}
std::shared_ptr<transform> make_random_affine(double degrees, double translate_x, double translate_y, double scale_min,
                                              double scale_max, double shear, std::optional<double> fill, ops::interpolation mode) {
  return std::make_shared<random_warp_transform>(
      true, std::vector<double>{-degrees, degrees, translate_x, translate_y, scale_min, scale_max, -shear, shear}, fill, mode);
}

std::shared_ptr<transform> make_rotate(double degrees, std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::rotate, {degrees}, fill, mode);
}
std::shared_ptr<transform> make_affine(double angle, double tx, double ty, double scale, double shear_x, double shear_y,
                                       std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::affine, {angle, tx, ty, scale, shear_x, shear_y}, fill, mode);
}
std::shared_ptr<transform> make_shear_x(double factor, std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::shear_x, {factor}, fill, mode);
}
std::shared_ptr<transform> make_shear_y(double factor, std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::shear_y, {factor}, fill, mode);
}
std::shared_ptr<transform> make_translate_x(double pixels, std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::translate_x, {pixels}, fill, mode);
}
std::shared_ptr<transform> make_translate_y(double pixels, std::optional<double> fill, ops::interpolation mode) {
  return make_geometry(geometry_op::translate_y, {pixels}, fill, mode);
}

void add_geometry_kinds(std::vector<transform_kind>& kinds) {
  for (const geometry_op op : {geometry_op::rotate, geometry_op::affine, geometry_op::shear_x, geometry_op::shear_y,
                               geometry_op::translate_x, geometry_op::translate_y}) {
    const geometry_info i = info(op);
    kinds.push_back({{i.name}, i.values, i.values + 1, i.usage,
                     [op, n = i.values](std::span<const double> a) {
                       // a: the values, the fill if given, then interpolation (0 nearest, 1 bilinear).
                       const std::size_t given = a.size() - 1;
                       std::optional<double> fill;
                       if (given > n) fill = a[n];
                       return make_geometry(op, std::vector<double>(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n)), fill,
                                            a[given] == 0.0 ? ops::interpolation::nearest : ops::interpolation::bilinear);
                     },
                     {{"interpolation", {"nearest", "bilinear"}, 0.0}}});
  }
  const auto mode_of = [](double v) { return v == 0.0 ? ops::interpolation::nearest : ops::interpolation::bilinear; };
  kinds.push_back({{"random_rotation"}, 1, 2, "random_rotation(DEGREES[, FILL][, interpolation=nearest|bilinear])",
                   [=](std::span<const double> a) {
                     if (!(a[0] >= 0.0)) throw bad_transform_argument(0, "random_rotation: degrees must be >= 0, got " + format_number(a[0]));
                     return make_random_rotation(a[0], a.size() > 2 ? a[1] : 0.0, mode_of(a.back()));
                   },
                   {{"interpolation", {"nearest", "bilinear"}, 0.0}}});
  kinds.push_back({{"random_affine"}, 6, 7,
                   "random_affine(DEGREES, TRANSLATE_X, TRANSLATE_Y, SCALE_MIN, SCALE_MAX, SHEAR[, FILL][, interpolation=nearest|bilinear])",
                   [=](std::span<const double> a) {
                     for (const std::size_t k : {std::size_t{0}, std::size_t{5}})
                       if (!(a[k] >= 0.0)) throw bad_transform_argument(k, "random_affine: degrees and shear must be >= 0, got " + format_number(a[k]));
                     return make_random_affine(a[0], a[1], a[2], a[3], a[4], a[5], a.size() > 7 ? a[6] : 0.0, mode_of(a.back()));
                   },
                   {{"interpolation", {"nearest", "bilinear"}, 0.0}}});
}

}  // namespace pinfeed::loaders
