// A pipeline's batch op (mixup, cutmix, mixup_cutmix: pinfeed/ops/mix.hpp): its checks against the
// fields when the source is made, each sample's one-hot row, and the mix of each whole batch (on
// the host slot for a CPU loader, on the device after the copy for a CUDA one).
#include <algorithm>
#include <string>

#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {

std::optional<batch_mix> pipeline_source::split_batch_op(pipeline& steps) {
  std::optional<batch_mix> mix;
  const auto& all = steps.steps();
  for (std::size_t k = 0; k < all.size(); ++k)
    if (const auto m = all[k]->batch_op()) {
      if (k + 1 != all.size())
        throw pinfeed::invalid_argument("pipeline_source: " + all[k]->name() + " works on whole batches: it must be the pipeline's last step, not step " +
                                        std::to_string(k + 1) + " of " + std::to_string(all.size()));
      mix = m;
    }
  if (mix) steps = pipeline(std::vector<std::shared_ptr<transform>>(all.begin(), all.end() - 1));
  return mix;
}

void pipeline_source::plan_batch_op(const batch_mix& mix) {
  const std::string op = steps_.steps().back()->name();
  // With the tail left to the consumer, the batch op needs it run before it (on the device after
  // the device path, else the constructor moves it to the host): it mixes the tail's floats.
  const bool chw = host_tail_ || consumer_tail_;
  if (!consumer_tail_ && fields_[0].type != dtype::f32)
    throw pinfeed::invalid_argument("pipeline_source: " + op + " mixes float32 images: put normalize or scale before it (the image is " +
                                    std::string(dtype_name(fields_[0].type)) + ")");
  std::size_t label = 0;
  for (std::size_t i = 1; i < fields_.size(); ++i)
    if (fields_[i].name == "label") label = i;
  if (label == 0)
    throw pinfeed::invalid_argument("pipeline_source: " + op + " mixes labels, and '" + reader_->name() + "' has no field 'label'");
  const field_spec& f = fields_[label];
  if ((f.type != dtype::i64 && f.type != dtype::i32) || !f.shape.empty() || f.variable)
    throw pinfeed::invalid_argument("pipeline_source: " + op + " takes one int64 or int32 class index a sample in field 'label', and '" +
                                    reader_->name() + "' gives " + std::string(dtype_name(f.type)) +
                                    (f.shape.empty() ? std::string(" scalars") : " arrays of " + std::to_string(f.shape[0])));
  const std::int64_t classes = mix.classes > 0 ? mix.classes : reader_->classes();
  if (classes <= 0)
    throw pinfeed::invalid_argument("pipeline_source: " + op + ": num_classes is unknown: '" + reader_->name() +
                                    "' does not say how many classes its labels count; give it as num_classes=N");
  const std::int64_t h = fields_[0].shape[host_tail_ ? 1 : 0], w = fields_[0].shape[host_tail_ ? 2 : 1];
  (void)ops::draw_mix(mix.recipe, 0, 0, 0, h, w);  // the image's sides, checked once here
  batch_ = batch_op_plan{mix, label, classes, chw ? ops::mix_layout::chw : ops::mix_layout::hwc, f.type};
  fields_[label] = field_spec{"label", dtype::f32, {classes}};
}

void pipeline_source::mix_batch(const slot_view& slot, bool device) const {
  const batch_op_plan& b = *batch_;
  const field_spec& image = fields_[0];
  const bool chw = b.layout == ops::mix_layout::chw;
  const std::int64_t h = image.shape[chw ? 1 : 0], w = image.shape[chw ? 2 : 1], c = image.shape[chw ? 0 : 2];
  const ops::mix_params p = ops::draw_mix(b.mix.recipe, slot.seed, slot.epoch, slot.batch, h, w);
  const auto& at = device ? slot.device : slot.host;
  const ops::mix_batch_args a{reinterpret_cast<float*>(at[0]), slot.count, h, w, c, b.layout,
                              reinterpret_cast<float*>(at[b.label_field]), b.classes};
  if (device) ops::mix_batch_device(a, p, slot.stream);
  else ops::mix_batch_host(a, p);
}

void pipeline_source::finish_batch(const slot_view& slot) {
  // On a CUDA loader the batch is mixed on the device, after the copy (after_copy).
  if (batch_ && (slot.device.empty() || slot.device[0] == nullptr)) mix_batch(slot, false);
}

void pipeline_source::write_soft_label(sample& out, std::uint64_t index, const std::byte* label, const std::string& origin) const {
  const std::int64_t y = batch_->label_type == dtype::i64 ? *reinterpret_cast<const std::int64_t*>(label)
                                                          : *reinterpret_cast<const std::int32_t*>(label);
  if (y < 0 || y >= batch_->classes)
    throw sample_error(index, "label", origin,
                       "label " + std::to_string(y) + " is outside the " + std::to_string(batch_->classes) + " classes of " +
                           steps_.steps().back()->name());
  const std::span<float> row = out.as<float>(batch_->label_field);
  std::fill(row.begin(), row.end(), 0.0f);
  row[static_cast<std::size_t>(y)] = 1.0f;
}

}  // namespace pinfeed::loaders
