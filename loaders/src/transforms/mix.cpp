// The batch ops mixup, cutmix and mixup_cutmix: the last step of a pipeline, run on whole batches
// by pipeline_source (pinfeed/ops/mix.hpp); on a sample they leave the image as it is.
#include <cmath>
#include <cstring>
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

class batch_mix_transform final : public transform {
 public:
  explicit batch_mix_transform(batch_mix mix) : mix_(mix) {
    ops::check_mix_recipe(mix_.recipe);
    if (mix_.classes < 0)
      throw bad_transform_argument(mix_.recipe.op == ops::mix_op::mixup_cutmix ? 2 : 1,
                                   op_name() + ": num_classes must be 1 or more (0: the source's), not " + std::to_string(mix_.classes));
  }
  std::string name() const override {
    std::string s = op_name() + "(";
    if (mix_.recipe.op != ops::mix_op::cutmix) s += format_number(mix_.recipe.alpha_mixup);
    if (mix_.recipe.op == ops::mix_op::mixup_cutmix) s += ",";
    if (mix_.recipe.op != ops::mix_op::mixup) s += format_number(mix_.recipe.alpha_cutmix);
    if (mix_.classes > 0) s += ",num_classes=" + std::to_string(mix_.classes);
    return s + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    if (in.type != dtype::f32)
      throw pinfeed::invalid_argument(op_name() + ": mixes float32 images: put normalize or scale before it (its input is " +
                                      shape_text(in) + ")");
    return in;
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.spec.bytes());
  }
  bool in_place() const override { return true; }
  std::string explain(const image_spec&, philox_stream) const override { return ""; }  // nothing a sample
  std::optional<batch_mix> batch_op() const override { return mix_; }

 private:
  std::string op_name() const { return ops::mix_op_name(mix_.recipe.op); }
  batch_mix mix_;
};

/// num_classes as given: a whole number from 0 (the source's count) up.
std::int64_t classes_argument(const char* op, std::size_t index, double v) {
  if (!(v >= 0.0 && v < 1e12) || v != std::floor(v))
    throw bad_transform_argument(index, std::string(op) + ": num_classes is a whole number of classes, not " + format_number(v));
  return static_cast<std::int64_t>(v);
}

/// A bad alpha, with the parser's caret under it (the first argument, or mixup_cutmix's second).
ops::mix_recipe checked(ops::mix_recipe r) {
  try {
    ops::check_mix_recipe(r);
  } catch (const pinfeed::invalid_argument& e) {
    const bool first = r.op == ops::mix_op::cutmix || !(r.alpha_mixup > 0.0 && std::isfinite(r.alpha_mixup));
    throw bad_transform_argument(first ? 0 : 1, e.what());
  }
  return r;
}

}  // namespace

std::shared_ptr<transform> make_batch_mix(const ops::mix_recipe& recipe, std::int64_t classes) {
  return std::make_shared<batch_mix_transform>(batch_mix{recipe, classes});
}

void add_mix_kinds(std::vector<transform_kind>& kinds) {
  const transform_option classes{"num_classes", {}, 0.0};
  kinds.push_back({{"mixup"}, 1, 1, "mixup(ALPHA[, num_classes=N])",
                   [](std::span<const double> a) {
                     return make_batch_mix(checked({ops::mix_op::mixup, a[0], 1.0}), classes_argument("mixup", 1, a[1]));
                   },
                   {classes}});
  kinds.push_back({{"cutmix"}, 1, 1, "cutmix(ALPHA[, num_classes=N])",
                   [](std::span<const double> a) {
                     return make_batch_mix(checked({ops::mix_op::cutmix, 1.0, a[0]}), classes_argument("cutmix", 1, a[1]));
                   },
                   {classes}});
  kinds.push_back({{"mixup_cutmix"}, 2, 2, "mixup_cutmix(MIXUP_ALPHA, CUTMIX_ALPHA[, num_classes=N])",
                   [](std::span<const double> a) {
                     return make_batch_mix(checked({ops::mix_op::mixup_cutmix, a[0], a[1]}),
                                           classes_argument("mixup_cutmix", 2, a[2]));
                   },
                   {classes}});
}

}  // namespace pinfeed::loaders
