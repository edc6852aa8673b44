// The geometry steps: rotate, affine, shear_x, shear_y, translate_x, translate_y (pinfeed/ops/geometry.hpp
// states their arithmetic, torchvision v2's on uint8 tensors). Each takes an optional fill after its
// numbers and interpolation=nearest|bilinear (nearest by default, as torchvision's).
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

class geometry_transform final : public transform {
 public:
  geometry_transform(geometry_op op, std::vector<double> values, std::optional<double> fill, ops::interpolation mode)
      : op_(op), values_(std::move(values)), fill_(fill), mode_(mode) {
    const std::string what = std::string(info(op).name) + ": ";
    for (std::size_t k = 0; k < values_.size(); ++k)
      if (!std::isfinite(values_[k])) throw bad_transform_argument(k, what + "every value must be finite, got " + format_number(values_[k]));
    if (op == geometry_op::affine && !(values_[3] > 0.0))
      throw bad_transform_argument(3, what + "the scale must be greater than 0, got " + format_number(values_[3]));
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
    require_type(*this, in, false);
    if (in.channels != 1 && in.channels != 3)
      throw pinfeed::invalid_argument(name() + ": needs 1 or 3 channels, input is " + shape_text(in));
    return in;
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

}  // namespace

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
}

}  // namespace pinfeed::loaders
