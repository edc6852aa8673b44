// Built without CUDA: the GPU stand-in step says so.
#include <stdexcept>
#include <string>

#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {

void busy_kernel_ms(double ms, cudaStream_t) {
  if (!(ms > 0)) return;
  throw pinfeed::runtime_error(std::string("busy_kernel_ms: ") + detail::kNoCuda);
}

}  // namespace pinfeed
