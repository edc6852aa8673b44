// A ten-line training loop on pinfeed. The "step" normalises each batch on the batch's device.
#include <cstdio>
#include <vector>

#include <pinfeed/pinfeed.hpp>

int main() {
  auto source = pinfeed::loaders::make_synthetic_source({.samples = 256, .height = 64, .width = 64});
  pinfeed::loader loader(source, {.batch_size = 32, .workers = 2});
  const pinfeed::ops::image_batch_shape shape{32, 64, 64};
  std::vector<float> host_out(shape.pixels() * 3);
  pinfeed::device_buffer device_out;
  if (loader.device().is_cuda()) device_out = pinfeed::device_buffer(host_out.size() * sizeof(float));

  std::size_t samples = 0;
  for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      const auto images = batch->field("image");  // [32, 64, 64, 3] uint8, on the GPU when there is one
      if (images.location.is_cuda())
        pinfeed::ops::normalize_hwc_to_chw_device(static_cast<const std::uint8_t*>(images.data),
                                                  reinterpret_cast<float*>(device_out.data()), shape, {}, batch->stream());
      else
        pinfeed::ops::normalize_hwc_to_chw(static_cast<const std::uint8_t*>(images.data), host_out.data(), shape, {});
      samples += batch->size();
    }
  }
  std::printf("trained on %zu samples (%s), consumer wait %.1f%%\n", samples, loader.device().to_string().c_str(),
              100 * loader.stats().consumer_wait_fraction());
  return samples == 512 ? 0 : 1;
}
