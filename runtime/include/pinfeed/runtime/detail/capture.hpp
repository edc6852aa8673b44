#pragma once
// Driver queries and one-time allocations made safely beside a CUDA graph capture: a stream's
// capture state, the thread's capture mode relaxed for one call, and whether the device can reach
// a pointer. CUDA builds only: a CPU-only build has no capture and no device pointer.

#include "pinfeed/runtime/cuda_api.hpp"

#if PINFEED_WITH_CUDA
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::detail {

/// Runs `fn` with this thread's capture mode relaxed, so that a driver query or a one-time
/// allocation does not invalidate a capture another thread runs in global mode. The mode is
/// restored also when `fn` throws.
template <class Fn>
void with_relaxed_capture(Fn&& fn) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  PINFEED_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
  try {
    fn();
  } catch (...) {
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    throw;
  }
  PINFEED_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
}

/// True while `stream` is being captured into a graph (also when it is the legacy default stream
/// and a blocking stream of the device is being captured): then nothing that is not capturable may run.
bool stream_capturing(cudaStream_t stream);

/// Throws pinfeed::invalid_argument ("<who>: <name> is pageable host memory, ...") unless the
/// device can reach `ptr` (null passes). Queries the driver: call it outside a capture of the
/// caller's stream, inside with_relaxed_capture when another thread may be capturing.
void require_device_visible(const void* ptr, const char* who, const char* name);

}  // namespace pinfeed::detail
#endif
