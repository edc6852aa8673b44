// Device side of the runtime: bulk Philox bytes (the device twin of fill_random_bytes).
#include <cstdint>
#include <stdexcept>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed {
namespace {

__global__ void fill_random_kernel(philox_stream stream, std::byte* out, std::size_t bytes) {
  const std::size_t blocks = (bytes + 15) / 16;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < blocks;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const philox_block b = stream.block_at(static_cast<std::uint32_t>(i));
    const std::size_t base = 16 * i;
    if (base + 16 <= bytes && (reinterpret_cast<std::uintptr_t>(out) % 16) == 0) {
      *reinterpret_cast<uint4*>(out + base) = make_uint4(b.v[0], b.v[1], b.v[2], b.v[3]);
    } else {
      const auto* src = reinterpret_cast<const std::byte*>(b.v);
      for (std::size_t j = 0; j < 16 && base + j < bytes; ++j) out[base + j] = src[j];
    }
  }
}

}  // namespace

void fill_random_bytes_device(philox_stream stream, void* d_out, std::size_t bytes, cudaStream_t cuda_stream) {
  if (bytes == 0) return;
  if (d_out == nullptr) throw pinfeed::invalid_argument("fill_random_bytes_device: null output pointer");
  constexpr int kThreads = 256;
  const std::size_t blocks = (bytes + 15) / 16;
  const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((blocks + kThreads - 1) / kThreads, 65535));
  fill_random_kernel<<<grid, kThreads, 0, cuda_stream>>>(stream, static_cast<std::byte*>(d_out), bytes);
  PINFEED_CHECK_LAUNCH();
}

}  // namespace pinfeed
