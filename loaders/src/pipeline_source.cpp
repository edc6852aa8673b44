#include "pinfeed/loaders/pipeline_source.hpp"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/stats.hpp"

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

pipeline_source::pipeline_source(std::shared_ptr<source> base, pipeline steps, pipeline_source_options options)
    : base_(std::move(base)), options_(std::move(options)) {
  if (!base_) throw std::invalid_argument("pipeline_source: base source is null");
  base_fields_ = base_->fields();
  bool found = false;
  for (std::size_t i = 0; i < base_fields_.size(); ++i) {
    if (base_fields_[i].name != options_.image_field) continue;
    const auto& f = base_fields_[i];
    if (f.type != dtype::u8 || f.shape.size() != 3)
      throw std::invalid_argument("pipeline_source: field '" + f.name + "' of '" + base_->name() +
                                  "' must be uint8 [H, W, C]");
    image_index_ = i;
    base_image_ = {f.shape[0], f.shape[1], f.shape[2], dtype::u8};
    found = true;
  }
  if (!found)
    throw std::invalid_argument("pipeline_source: '" + base_->name() + "' has no field '" + options_.image_field + "'");
  (void)steps.output_spec(base_image_);  // validates every step against the input
  const auto tail = fused_tail(steps);
  const bool has_tail = !steps.device_tail().empty();
  if (has_tail && tail) {
    host_ = steps.host_part();
    (options_.device_tail ? consumer_tail_ : host_tail_) = tail;
  } else {
    host_ = steps;  // no tail, or one the fused op cannot express: every step on the host
  }
  host_out_ = host_.empty() ? base_image_ : host_.output_spec(base_image_);
  fields_ = base_fields_;
  auto& out = fields_[image_index_];
  if (host_tail_) {
    if (host_out_.channels != 3 || host_out_.type != dtype::u8)
      throw std::invalid_argument("pipeline_source: the colour/scale tail needs uint8 RGB before it");
    out.type = dtype::f32;
    out.shape = {3, host_out_.height, host_out_.width};  // CHW, as the device op writes it
  } else {
    out.type = host_out_.type;
    out.shape = {host_out_.height, host_out_.width, host_out_.channels};
  }
}

std::string pipeline_source::name() const {
  std::string s = base_->name() + " -> " + (host_.empty() ? std::string("(no host steps)") : host_.to_string());
  if (host_tail_) s += " -> fused tail (host, CHW float)";
  if (consumer_tail_) s += " -> tail on the consumer's device";
  return s;
}

void pipeline_source::produce(sample& s) {
  struct scratch {
    std::vector<std::byte> a, b;
    std::vector<std::byte*> buffers;
  };
  thread_local scratch t;
  // The base writes its non-image fields straight into the slot and its image into scratch.
  t.a.resize(base_image_.bytes());
  t.buffers.resize(base_fields_.size());
  for (std::size_t i = 0; i < base_fields_.size(); ++i)
    t.buffers[i] = i == image_index_ ? t.a.data() : s.bytes(i).data();
  {
    stage_timer timer(stage::read, s.stats(), s.trace(), s.index());
    sample base(s.index(), s.epoch(), s.seed(), base_fields_, t.buffers, s.stats(), s.trace());
    base_->produce(base);
    if (!base.origin().empty()) s.set_origin(base.origin());
  }
  stage_timer timer(stage::transform, s.stats(), s.trace(), s.index());
  image_view cur{t.a.data(), base_image_};
  const auto& steps = host_.steps();
  std::byte* slot_image = s.bytes(image_index_).data();
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const image_spec next = steps[k]->output_spec(cur.spec);
    const bool last = k + 1 == steps.size() && !host_tail_;
    std::vector<std::byte>& other = cur.data == t.a.data() ? t.b : t.a;
    if (!last) other.resize(next.bytes());
    const image_view out{last ? slot_image : other.data(), next};
    try {
      steps[k]->apply(cur, out, s.rng(100 + static_cast<std::uint32_t>(k)));
    } catch (const std::exception& e) {
      throw sample_error(s.index(), "transform " + steps[k]->name(), s.origin(), e.what());
    }
    cur = out;
  }
  if (host_tail_) {
    ops::normalize_hwc_to_chw(cur.as<std::uint8_t>(), slot_image,
                              {1, static_cast<std::size_t>(cur.spec.height), static_cast<std::size_t>(cur.spec.width)},
                              *host_tail_);
  } else if (steps.empty()) {
    std::memcpy(slot_image, cur.data, cur.spec.bytes());
  }
}

}  // namespace pinfeed::loaders
