#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/random.hpp"
#include "test_util.hpp"

using namespace pinfeed::ops;

TEST_CASE("gpu.normalize.bit_identical_to_cpu" * doctest::test_suite("gpu")) {
  if (!pinfeed::test::gpu_available("normalize CPU == GPU")) return;
  const image_batch_shape shape{5, 67, 131};
  std::vector<std::byte> in(shape.pixels() * 3);
  pinfeed::fill_random_bytes(pinfeed::philox_stream(3, 0, 0), in);
  normalize_params p;
  p.mean = {0.485f, 0.456f, 0.406f};
  p.std = {0.229f, 0.224f, 0.225f};
  std::vector<float> cpu(in.size()), gpu(in.size());
  normalize_hwc_to_chw(reinterpret_cast<const std::uint8_t*>(in.data()), cpu.data(), shape, p);
  pinfeed::device_buffer d_in(in.size()), d_out(in.size() * sizeof(float));
  PINFEED_CUDA_TRY(cudaMemcpy(d_in.data(), in.data(), in.size(), cudaMemcpyHostToDevice));
  normalize_hwc_to_chw_device(reinterpret_cast<const std::uint8_t*>(d_in.data()),
                              reinterpret_cast<float*>(d_out.data()), shape, p, nullptr);
  PINFEED_CUDA_TRY(cudaMemcpy(gpu.data(), d_out.data(), d_out.size(), cudaMemcpyDeviceToHost));
  CHECK(std::memcmp(cpu.data(), gpu.data(), d_out.size()) == 0);
}
