// CUDA's runtime API first, then every public pinfeed header (the umbrella header), and code that
// names both: the handle types are one type, and CUDA's calls stay unambiguous beside
// `using namespace pinfeed`.
#include <cuda_runtime_api.h>

#include <pinfeed/pinfeed.hpp>

#include <type_traits>

using namespace pinfeed;

static_assert(std::is_same_v<cudaStream_t, CUstream_st*>);
static_assert(std::is_same_v<cudaEvent_t, CUevent_st*>);

[[maybe_unused]] static const char* both_worlds(cudaStream_t stream) {
  const cudaError_t status = cudaStreamQuery(stream);
  [[maybe_unused]] const cuda_result ours{};
  device_guard* guard = nullptr;  // a pinfeed type that wraps runtime calls inline
  (void)guard;
  return status == cudaSuccess ? cudaGetErrorName(status) : cudaGetErrorString(status);
}
