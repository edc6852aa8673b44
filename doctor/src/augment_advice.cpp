// Where the steps after the decode ran, and what they cost an image on a worker and on the GPU: the
// full pipeline's choice (pipeline_source's augment_on), timed on the images the pipeline's first
// steps make of some of the samples.
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "ladder.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed::doctor_run {

namespace {
constexpr std::uint64_t kTimedImages = 16;  ///< on one worker thread
constexpr std::size_t kDeviceBatch = 64;    ///< images a device launch takes

/// Milliseconds an image of `steps` on one thread, over `images` (each the shape `spec`), each step
/// drawing from the sample's stream as in a loader.
double host_ms(const loaders::pipeline& steps, std::size_t first_index, const loaders::image_spec& spec,
               const std::vector<std::vector<std::uint8_t>>& images) {
  std::vector<std::uint8_t> a, b;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < images.size(); ++i) {
    a = images[i];
    b.resize(a.size());
    for (std::size_t k = 0; k < steps.steps().size(); ++k) {
      steps.steps()[k]->apply({reinterpret_cast<std::byte*>(a.data()), spec}, {reinterpret_cast<std::byte*>(b.data()), spec},
                              philox_stream(0, 0, i, 100 + static_cast<std::uint32_t>(first_index + k)));
      a.swap(b);
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(images.size());
}

/// Milliseconds an image of `steps` on the GPU: a batch of kDeviceBatch of `images` (in turn), its
/// jobs drawn as the workers draw them, the median of 5 launches after one to warm up.
double device_ms(const loaders::pipeline& steps, std::size_t first_index, const loaders::image_spec& spec,
                 const std::vector<std::vector<std::uint8_t>>& images) {
  const std::size_t rounds = loaders::device_rounds_of(steps.steps());
  const std::uint64_t per = spec.bytes(), bytes = per * kDeviceBatch;
  std::vector<ops::aug_job> drawn, jobs(rounds * kDeviceBatch);
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t j = 0; j < kDeviceBatch; ++j) {
    std::copy(images[j % images.size()].begin(), images[j % images.size()].end(), host.begin() + static_cast<std::ptrdiff_t>(j * per));
    const auto mine = loaders::device_jobs_of(steps.steps(), spec, [&](std::size_t k) {
      return philox_stream(0, 0, j, 100 + static_cast<std::uint32_t>(first_index + k));
    });
    drawn.insert(drawn.end(), mine.begin(), mine.end());
  }
  ops::round_major_jobs(drawn.data(), kDeviceBatch, rounds, per, jobs.data());
  device_buffer images_d(bytes), spare(bytes), scratch(ops::aug_scratch_bytes(kDeviceBatch)), jobs_d(jobs.size() * sizeof(ops::aug_job));
  PINFEED_CUDA_TRY(cudaMemcpy(jobs_d.data(), jobs.data(), jobs.size() * sizeof(ops::aug_job), cudaMemcpyHostToDevice));
  const cuda_stream stream = cuda_stream::create();
  std::vector<double> t;
  for (int k = 0; k < 6; ++k) {
    PINFEED_CUDA_TRY(cudaMemcpy(images_d.data(), host.data(), bytes, cudaMemcpyHostToDevice));
    const auto t0 = std::chrono::steady_clock::now();
    ops::augment_batch_device(reinterpret_cast<const ops::aug_job*>(jobs_d.data()), jobs.data(), kDeviceBatch, rounds,
                              reinterpret_cast<std::uint8_t*>(images_d.data()), reinterpret_cast<std::uint8_t*>(spare.data()), bytes,
                              scratch.data(), scratch.size(), stream.get());
    PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    if (k > 0) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kDeviceBatch);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

void ladder::judge_augment() {
  const loaders::pipeline& steps = piped_->steps_after_decode();
  if (steps.empty()) return;
  r_.augment_path = loaders::to_string(piped_->augment_path());
  r_.augment_steps = steps.to_string();
  r_.augment_why = piped_->augment_refusal();
  try {
    // Their input: the shape the steps before them give (the steps keep it), images made of smooth
    // fields and noise (their cost hardly depends on the content).
    const loaders::image_spec spec = piped_->steps().steps().empty() ? p_.reader->image_shape()
                                                                     : loaders::pipeline(std::vector<std::shared_ptr<loaders::transform>>(
                                                                           piped_->steps().steps().begin(),
                                                                           piped_->steps().steps().begin() + 1))
                                                                           .output_spec(p_.reader->image_shape());
    if (spec.type != dtype::u8 || !spec.fixed() || steps.output_spec(spec).bytes() != spec.bytes()) return;
    std::vector<std::vector<std::uint8_t>> images(kTimedImages, std::vector<std::uint8_t>(spec.bytes()));
    philox_stream rng(5, 0, 0);
    for (auto& img : images)
      for (std::size_t i = 0; i < img.size(); ++i)
        img[i] = static_cast<std::uint8_t>((i / 3 % static_cast<std::size_t>(spec.width) + i / (3 * static_cast<std::size_t>(spec.width)) + rng.below(40)) % 256);
    r_.augment_host_ms = host_ms(steps, 0, spec, images);
    if (gpu_ && r_.augment_why.empty()) r_.augment_device_ms = device_ms(steps, 0, spec, images);
  } catch (const std::exception& e) {
    r_.augment_why += std::string(r_.augment_why.empty() ? "" : "; ") + "not timed: " + e.what();
  }
}

}  // namespace pinfeed::doctor_run
