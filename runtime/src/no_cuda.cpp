// The device helpers in a CPU-only build (PINFEED_WITH_CUDA=OFF).
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed {

void fill_random_bytes_device(philox_stream, void* d_out, std::size_t bytes, cudaStream_t) {
  if (bytes == 0) return;
  if (d_out == nullptr) throw pinfeed::invalid_argument("fill_random_bytes_device: null output pointer");
  throw pinfeed::runtime_error(std::string("fill_random_bytes_device: ") + detail::kNoCuda);
}

}  // namespace pinfeed
