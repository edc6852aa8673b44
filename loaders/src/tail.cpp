// The colour/scale tail of a pipeline: the trailing ycbcr, scale and normalize as one fused op
// (fused_tail), which runs on the host (into the slot, float CHW), on the consumer's device
// (device_tail: the slot keeps uint8), or on the loader's device after the device's decode or
// steps (finish_on_device: the image field made there); and the steps on its floats after it
// (random_erasing after normalize: float_tail).
#include "pinfeed/loaders/pipeline_source.hpp"

#include <memory>
#include <vector>

#include "device_augment.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {

std::optional<ops::normalize_params> fused_tail(const pipeline& p) {
  ops::normalize_params params;
  params.scale = 1.0f;
  int stage = 0;  // the order the fused op applies them: ycbcr, then scale, then normalize
  const pipeline tail = p.device_tail();
  for (const auto& t : tail.steps()) {
    const pointwise_step step = *t->pointwise();
    const int at = step.which == pointwise_step::kind::ycbcr ? 1 : step.which == pointwise_step::kind::scale ? 2 : 3;
    if (at <= stage) return std::nullopt;  // repeated or out of order: not one fused op
    stage = at;
    if (at == 1) params.ycbcr = true;
    if (at == 2) params.scale = step.factor;
    if (at == 3) {
      params.mean = step.mean;
      params.std = step.std;
    }
  }
  return params;
}

void pipeline_source::split_float_tail(pipeline& steps, const image_spec& in) {
  const std::size_t n = detail::float_tail::trailing(steps, in);
  if (n == 0) return;
  const auto& all = steps.steps();
  const std::size_t first = all.size() - n;
  pipeline rest(std::vector<std::shared_ptr<transform>>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first)));
  float_tail_ = std::make_unique<detail::float_tail>(
      pipeline(std::vector<std::shared_ptr<transform>>(all.begin() + static_cast<std::ptrdiff_t>(first), all.end())), first,
      rest.output_spec(in));
  steps = std::move(rest);
}

void pipeline_source::require_tail_input() const {
  const field_spec& f = fields_[0];
  const bool chw = host_tail_.has_value();  // already the tail's output: its input was checked
  if (!chw && (f.type != dtype::u8 || f.shape.size() != 3 || f.shape[2] != 3))
    throw pinfeed::invalid_argument("pipeline_source: the colour/scale tail needs uint8 RGB before it");
}

void pipeline_source::finish_on_device() {
  if (device_finish_) return;
  require_tail_input();
  const bool chw = host_tail_.has_value();  // the field as the host tail makes it, or the uint8 the consumer's takes
  const std::int64_t h = fields_[0].shape[chw ? 1 : 0], w = fields_[0].shape[chw ? 2 : 1];
  device_finish_ = host_tail_ ? *host_tail_ : *consumer_tail_;
  host_tail_.reset();
  consumer_tail_.reset();
  fields_[0] = field_spec{"image", dtype::f32, {3, h, w}};
  fields_[0].device_only = true;
  pixel_field_ = fields_.size();
  fields_.push_back(field_spec{"pixels", dtype::u8, {h, w, 3}, false, true});
  if (float_tail_) {
    float_tail_->use_field(fields_.size());
    fields_.push_back(float_tail_->jobs_field());
  }
}

pipeline pipeline_source::float_steps() const { return float_tail_ ? float_tail_->steps() : pipeline(); }

}  // namespace pinfeed::loaders
