// pinfeed's Philox against CUDA's own implementation (curand_philox4x32_x.h), both run on the
// host here, and the device fill against the host fill on a GPU.
#define QUALIFIERS static __forceinline__ __host__ __device__
#include <curand_philox4x32_x.h>

#include <doctest/doctest.h>

#include <vector>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/random.hpp"
#include "test_util.hpp"

TEST_CASE("philox.matches_curand") {
  std::uint32_t x = 12345;
  auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int i = 0; i < 10000; ++i) {
    const uint4 c{next(), next(), next(), next()};
    const uint2 k{next(), next()};
    const uint4 ref = curand_Philox4x32_10(c, k);
    const auto ours = pinfeed::philox4x32_10({{c.x, c.y, c.z, c.w}}, k.x, k.y);
    REQUIRE(ours.v[0] == ref.x);
    REQUIRE(ours.v[1] == ref.y);
    REQUIRE(ours.v[2] == ref.z);
    REQUIRE(ours.v[3] == ref.w);
  }
}

TEST_CASE("gpu.philox.device_fill_equals_host" * doctest::test_suite("gpu")) {
  if (!pinfeed::test::gpu_available("device Philox fill")) return;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{1000003},
                            std::size_t{3u << 20}}) {
    const pinfeed::philox_stream s(99, 3, 12345);
    std::vector<std::byte> host(bytes), back(bytes);
    pinfeed::fill_random_bytes(s, host);
    pinfeed::device_buffer d(bytes + 1);
    // Also an unaligned destination: the kernel must fall back to byte stores.
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      if (offset + bytes > d.size()) continue;
      pinfeed::fill_random_bytes_device(s, d.data() + offset, bytes, nullptr);
      PINFEED_CUDA_TRY(cudaMemcpy(back.data(), d.data() + offset, bytes, cudaMemcpyDeviceToHost));
      CHECK(back == host);
    }
  }
  CHECK_THROWS_AS(pinfeed::fill_random_bytes_device(pinfeed::philox_stream(0, 0, 0), nullptr, 4, nullptr),
                  std::invalid_argument);
}
