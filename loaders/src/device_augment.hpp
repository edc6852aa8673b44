#pragma once
// The steps a pipeline_source runs on the GPU (pipeline_source_options::augment_on): on the
// workers, each sample's jobs (pinfeed/ops/augment.hpp) drawn from its own streams into a scratch
// field, aug_jobs, a job a round; before the copy, the batch's jobs put round by round with each
// sample's place in the image field; after it, on the copy stream, augment_batch_device over the
// device slot's image field. The device scratch (a second image field and the counts) is sized
// from the batch size and counted in the loader's memory budget (device_memory).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/source.hpp"

namespace pinfeed::loaders::detail {

/// Sample s's jobs for `steps` (the first being step `first` of the whole pipeline: its stream is
/// rng(100 + first)) on images shaped `image`, into its field `field` (device_jobs_of's, padded).
void write_sample_jobs(sample& s, std::size_t field, const pipeline& steps, std::size_t first, const image_spec& image);
/// Before the copy: the jobs of slot field `field`, sample-major as the workers wrote them, put in
/// rounds in place (ops::round_major_jobs), sample j's image at j * per_image of the batch.
void jobs_in_rounds(const slot_view& slot, std::size_t field, std::size_t rounds, std::uint64_t per_image);

class device_augmenter {
 public:
  /// `steps`: those the device runs, in order, the first being step `first_index` of the whole
  /// pipeline (its stream is rng(100 + index)); `image`: the image field's shape (uint8 HWC, the
  /// same before and after each step); `jobs_field`: the index of aug_jobs in the fields;
  /// `pixel_field`: the field of those pixels (the image field, or the pixels the source's device
  /// tail reads).
  device_augmenter(pipeline steps, std::size_t first_index, const image_spec& image, std::size_t jobs_field,
                   std::size_t pixel_field = 0);
  ~device_augmenter();

  /// The most jobs a sample takes (device_rounds_of the steps).
  [[nodiscard]] std::size_t rounds() const noexcept { return rounds_; }
  /// The aug_jobs field for `rounds` jobs a sample.
  [[nodiscard]] static field_spec jobs_field(std::size_t rounds);
  /// Why the steps from `first` on cannot all run on the device for images shaped `image` (empty:
  /// they can): the first step without a device form, or one that changes the image's shape.
  [[nodiscard]] static std::string refusal(const pipeline& steps, std::size_t first, const image_spec& image);

  /// Sample s's jobs into its aug_jobs field (copies after its last). Throws what a step throws.
  void write_jobs(sample& s) const;
  void before_copy(const slot_view& slot) const;
  void after_copy(const slot_view& slot);
  /// What after_copy keeps on a loader's device for batches of `batch_size`.
  [[nodiscard]] std::vector<memory_use> device_memory(std::size_t batch_size) const;
  [[nodiscard]] const pipeline& steps() const noexcept { return steps_; }

 private:
  struct scratch;
  pipeline steps_;
  std::size_t first_, field_, pixel_field_, rounds_ = 0;
  image_spec image_;
  std::uint64_t image_bytes_;
  std::mutex scratch_mutex_;
  std::map<std::pair<int, cudaStream_t>, std::unique_ptr<scratch>> scratch_;
};

/// The steps after the colour/scale tail, on its float CHW images (random_erasing after
/// normalize): their jobs (ops::aug_job, drawn from each sample's streams as the steps draw them)
/// run by erase_float_host on a worker after the host's fused tail, or, where the tail runs on the
/// device (finishes_on_device), written into a scratch field, tail_jobs, and run by
/// erase_float_device after the device's tail.
class float_tail {
 public:
  /// `steps`: the steps, the first being step `first_index` of the whole pipeline (its stream is
  /// rng(100 + index)); `image`: the tail's images as the steps see them (float32, height x width
  /// x 3); `jobs_field`: the index of tail_jobs (0: none, the host runs them).
  float_tail(pipeline steps, std::size_t first_index, const image_spec& image);
  /// The trailing steps of `steps` that run on the tail's float images with a device form, when a
  /// fused tail precedes them (their number; 0: none).
  [[nodiscard]] static std::size_t trailing(const pipeline& steps, const image_spec& in);
  [[nodiscard]] const pipeline& steps() const noexcept { return steps_; }
  /// The tail_jobs field.
  [[nodiscard]] field_spec jobs_field() const;
  void use_field(std::size_t jobs_field) noexcept { field_ = jobs_field; }
  /// On a worker: sample s's steps on its CHW image `chw` (the host's tail made it).
  void run_host(sample& s, float* chw) const;
  /// Sample s's jobs into tail_jobs.
  void write_jobs(sample& s) const;
  void before_copy(const slot_view& slot) const;
  /// After the device's tail made the images in field `image_field`, on the copy stream.
  void after_copy(const slot_view& slot, std::size_t image_field) const;

 private:
  pipeline steps_;
  std::size_t first_, field_ = 0, rounds_;
  image_spec image_;
  std::uint64_t floats_;  ///< an image's
};

}  // namespace pinfeed::loaders::detail
