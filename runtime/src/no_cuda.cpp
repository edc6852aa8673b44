// The device helpers in a CPU-only build (PINFEED_WITH_CUDA=OFF).
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed {

void fill_random_bytes_device(philox_stream, void* d_out, std::size_t bytes, cudaStream_t) {
  if (bytes == 0) return;
  if (d_out == nullptr) throw std::invalid_argument("fill_random_bytes_device: null output pointer");
  throw std::runtime_error(std::string("fill_random_bytes_device: ") + detail::kNoCuda);
}

}  // namespace pinfeed
