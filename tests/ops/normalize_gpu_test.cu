#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/random.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

TEST_CASE("gpu.normalize.bit_identical_to_cpu" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("normalize CPU == GPU")) return;
  // 12 x 480 x 641 pixels: the grid holds at most 8 blocks per SM, so the grid-stride loop runs
  // several passes (about 13 on a 132-SM H200), and an odd width checks the index arithmetic. The
  // simulated GPU has 4 SMs: 5 x 67 x 131 pixels take 6 passes there, and the large shape is left
  // to a GPU.
  std::vector<image_batch_shape> shapes{{5, 67, 131}};
  if (!test::small_gpu_shapes()) shapes.push_back({12, 480, 641});
  for (const image_batch_shape shape : shapes) {
    CAPTURE(shape.pixels());
    std::vector<std::byte> in(shape.pixels() * 3);
    fill_random_bytes(philox_stream(3, 0, 0), in);
    device_buffer d_in(in.size()), d_out(in.size() * 4);
    test::upload(d_in.data(), in.data(), in.size());
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
      for (bool ycbcr : {false, true})
        for (bool flip : {false, true}) {
          CAPTURE(dtype_name(t));
          CAPTURE(ycbcr);
          CAPTURE(flip);
          normalize_params p;
          p.mean = {0.485f, 0.456f, 0.406f};
          p.std = {0.229f, 0.224f, 0.225f};
          p.ycbcr = ycbcr;
          p.hflip = flip;
          p.out = t;
          const std::size_t bytes = in.size() * dtype_size(t);
          std::vector<std::byte> cpu(bytes), gpu(bytes);
          normalize_hwc_to_chw_host({reinterpret_cast<const std::uint8_t*>(in.data()), cpu.data(), shape}, p);
          // Every output byte must come from this call: the buffer starts as a marker, not as the
          // previous case's (often equal) answer.
          test::fill_device(d_out.data(), 0xEE, bytes);
          normalize_hwc_to_chw_device({reinterpret_cast<const std::uint8_t*>(d_in.data()), d_out.data(), shape}, p, nullptr);
          PINFEED_CUDA_TRY(cudaMemcpy(gpu.data(), d_out.data(), bytes, cudaMemcpyDeviceToHost));
          CHECK(std::memcmp(cpu.data(), gpu.data(), bytes) == 0);
        }
  }
}

TEST_CASE("gpu.encode.one_hot_and_bits_equal_cpu" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("one-hot and bit planes CPU == GPU")) return;
  std::vector<std::int64_t> labels(1000);
  std::vector<std::int32_t> labels32(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    labels[i] = static_cast<std::int64_t>(i * 7 % 23) - 2;
    labels32[i] = static_cast<std::int32_t>(labels[i]);
  }
  device_buffer d_labels(labels.size() * 8), d_labels32(labels.size() * 4), d_out(labels.size() * 20 * 4);
  test::upload(d_labels.data(), labels.data(), labels.size() * 8);
  test::upload(d_labels32.data(), labels32.data(), labels32.size() * 4);
  for (dtype t : {dtype::u8, dtype::f16, dtype::bf16, dtype::f32}) {
    CAPTURE(dtype_name(t));
    const std::size_t bytes = labels.size() * 20 * dtype_size(t);
    std::vector<std::byte> cpu(bytes), gpu(bytes), gpu32(bytes);
    one_hot_host({labels.data(), dtype::i64, labels.size(), 20, cpu.data(), t});
    test::fill_device(d_out.data(), 0xEE, bytes);  // a marker, not an earlier answer
    one_hot_device({d_labels.data(), dtype::i64, labels.size(), 20, d_out.data(), t}, nullptr);
    PINFEED_CUDA_TRY(cudaMemcpy(gpu.data(), d_out.data(), bytes, cudaMemcpyDeviceToHost));
    CHECK(cpu == gpu);
    test::fill_device(d_out.data(), 0xEE, bytes);
    one_hot_device({d_labels32.data(), dtype::i32, labels.size(), 20, d_out.data(), t}, nullptr);
    PINFEED_CUDA_TRY(cudaMemcpy(gpu32.data(), d_out.data(), bytes, cudaMemcpyDeviceToHost));
    CHECK(cpu == gpu32);
  }
  const bit_planes_shape s{3, 1001};
  std::vector<std::byte> packed(3 * 1001);
  fill_random_bytes(philox_stream(5, 0, 0), packed);
  std::vector<std::uint8_t> planes(3 * 8 * 1001), gpu_planes(planes.size()), repacked(packed.size());
  unpack_bits_host({reinterpret_cast<const std::uint8_t*>(packed.data()), planes.data(), s});
  device_buffer d_packed(packed.size()), d_planes(planes.size());
  test::upload(d_packed.data(), packed.data(), packed.size());
  test::fill_device(d_planes.data(), 0xEE, planes.size());
  unpack_bits_device({reinterpret_cast<const std::uint8_t*>(d_packed.data()), reinterpret_cast<std::uint8_t*>(d_planes.data()), s}, nullptr);
  PINFEED_CUDA_TRY(cudaMemcpy(gpu_planes.data(), d_planes.data(), planes.size(), cudaMemcpyDeviceToHost));
  CHECK(gpu_planes == planes);
  test::fill_device(d_packed.data(), 0xEE, packed.size());  // not the bytes it must rebuild
  pack_bits_device({reinterpret_cast<const std::uint8_t*>(d_planes.data()), reinterpret_cast<std::uint8_t*>(d_packed.data()), s}, nullptr);
  PINFEED_CUDA_TRY(cudaMemcpy(repacked.data(), d_packed.data(), repacked.size(), cudaMemcpyDeviceToHost));
  CHECK(std::memcmp(repacked.data(), packed.data(), packed.size()) == 0);
}
