// Every public pinfeed header (the umbrella header) first, then CUDA's runtime API.
#include <pinfeed/pinfeed.hpp>

#include <cuda_runtime_api.h>

[[maybe_unused]] static int devices() {
  int n = 0;
  return ::cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

[[maybe_unused]] static void wait(cudaStream_t stream, pinfeed::cuda_event& event) {
  pinfeed::wait_for_stream(stream, event.get());
}
