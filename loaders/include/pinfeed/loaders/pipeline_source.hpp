#pragma once
/// @file pipeline_source.hpp
/// A source whose image field goes through a transform pipeline on the worker, straight into the
/// slot. Trailing colour/scale/normalise steps are either fused on the host (one rounding, CHW
/// float output, the same bits as the GPU op) or left to the GPU (uint8 HWC in the slot: 4x fewer
/// bytes to copy; the consumer runs pinfeed::ops::normalize_hwc_to_chw_device with tail_params()).

#include <memory>
#include <optional>
#include <string>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/source.hpp"

namespace pinfeed::loaders {

struct pipeline_source_options {
  std::string image_field = "image";
  /// Leave the trailing pointwise steps to the consumer's device (the slot keeps uint8).
  bool device_tail = false;
};

/// The trailing pointwise steps of `p` as one normalize_params (ycbcr? -> scale? -> normalize?),
/// or nullopt when the tail has another shape (it then runs step by step on the host).
[[nodiscard]] std::optional<ops::normalize_params> fused_tail(const pipeline& p);

class pipeline_source final : public source {
 public:
  /// Throws std::invalid_argument when `base` has no uint8 [H, W, C] field named image_field or the
  /// pipeline cannot take it (naming the step).
  pipeline_source(std::shared_ptr<source> base, pipeline steps, pipeline_source_options options = {});

  std::uint64_t size() const override { return base_->size(); }
  std::vector<field_spec> fields() const override { return fields_; }
  void produce(sample& s) override;
  std::string name() const override;

  /// Host steps run per sample, and the pointwise tail the consumer must run (device_tail mode;
  /// nullopt otherwise).
  [[nodiscard]] const pipeline& host_steps() const noexcept { return host_; }
  [[nodiscard]] const std::optional<ops::normalize_params>& tail_params() const noexcept { return consumer_tail_; }

 private:
  std::shared_ptr<source> base_;
  pipeline_source_options options_;
  pipeline host_;                                       // steps run one by one on the worker
  std::optional<ops::normalize_params> host_tail_;      // fused tail run on the worker (CHW float out)
  std::optional<ops::normalize_params> consumer_tail_;  // fused tail left to the consumer
  std::vector<field_spec> base_fields_, fields_;
  std::size_t image_index_ = 0;
  image_spec base_image_, host_out_;
};

}  // namespace pinfeed::loaders
