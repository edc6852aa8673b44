// A ten-line training loop on pinfeed. The "step" normalizes each batch on the batch's device.
// Then the doctor examines the same source with the same step and says what limits it.
#include <cstdio>
#include <vector>

#include <pinfeed/loaders/decode.hpp>
#include <pinfeed/pinfeed.hpp>

int main() {
  std::printf("pinfeed %s (%s), JPEG Huffman decoder: %s\n", PINFEED_VERSION_STRING,
              PINFEED_WITH_CUDA ? "CUDA build" : "CPU-only build", pinfeed::loaders::jpeg_huffman_in_use().reason.c_str());
  auto source = pinfeed::loaders::make_synthetic_source({.samples = 256, .height = 64, .width = 64});
  pinfeed::loader loader(source, {.batch_size = 32, .workers = 2});
  const pinfeed::ops::image_batch_shape shape{32, 64, 64};
  std::vector<float> host_out(shape.pixels() * 3);
  pinfeed::device_buffer device_out;
  if (loader.device().is_cuda()) device_out = pinfeed::device_buffer(host_out.size() * sizeof(float));
  auto step = [&](const pinfeed::tensor_view& images, std::size_t n, cudaStream_t stream) {
    const pinfeed::ops::image_batch_shape s{n, 64, 64};
    const auto* pixels = static_cast<const std::uint8_t*>(images.data);
    if (images.location.is_cuda())
      pinfeed::ops::normalize_hwc_to_chw_device({pixels, device_out.data(), s}, {}, stream);
    else
      pinfeed::ops::normalize_hwc_to_chw_host({pixels, host_out.data(), s}, {});
  };

  std::size_t samples = 0;
  for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      step(batch->field("image"), batch->size(), batch->stream());  // [32, 64, 64, 3] uint8, on the GPU when there is one
      samples += batch->size();
    }
  }
  std::printf("trained on %zu samples (%s), consumer wait %.1f%%\n", samples, loader.device().to_string().c_str(),
              100 * loader.stats().consumer_wait_fraction());

  // The doctor on the same source and step: a ladder of cached modes, then a verdict.
  pinfeed::doctor_pipeline pipeline;
  pipeline.own = source;
  pinfeed::doctor_options options;
  options.loader = {.batch_size = 32, .workers = 2};
  options.step = [&](const pinfeed::step_batch& b) { step(b.field("image"), b.size, b.stream); };
  options.min_mode_seconds = 0.2;
  const pinfeed::doctor_report report = pinfeed::doctor(pipeline, options);
  std::printf("doctor: %s\n", report.verdict.c_str());
  return samples == 512 && report.mode("L0")->ran ? 0 : 1;
}
