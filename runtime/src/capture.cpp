// Capture-state and pointer queries (detail/capture.hpp). CUDA builds only.
#include "pinfeed/runtime/detail/capture.hpp"

#include <string>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::detail {

bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  PINFEED_CUDA_TRY(err);
  return status != cudaStreamCaptureStatusNone;
}

void require_device_visible(const void* ptr, const char* who, const char* name) {
  if (ptr == nullptr) return;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    throw pinfeed::invalid_argument(std::string(who) + ": cannot query pointer " + name);
  }
  if (attr.type == cudaMemoryTypeUnregistered)
    throw pinfeed::invalid_argument(std::string(who) + ": " + name + " is pageable host memory, not visible to the device");
}

cudaStream_t stream_here(const named_stream& s) noexcept {
  if (s.handle == cudaStreamPerThread && s.thread != std::this_thread::get_id()) return cudaStreamLegacy;
  return s.handle;
}

bool record_after(cudaEvent_t event, const named_stream& s) {
  const cudaStream_t here = stream_here(s);
  if (stream_capturing(here)) return false;
  const cudaError_t err = cudaEventRecord(event, here);
  if (err == cudaErrorStreamCaptureImplicit || err == cudaErrorStreamCaptureUnsupported ||
      err == cudaErrorStreamCaptureInvalidated) {
    (void)cudaGetLastError();  // a capture began since the query: deferred as for one under way
    return false;
  }
  PINFEED_CUDA_TRY(err);
  return true;
}

void wait_for_event(const named_stream& s, cudaEvent_t event) {
  const cudaStream_t here = stream_here(s);
  if (stream_capturing(here)) {
    with_relaxed_capture([&] { PINFEED_CUDA_TRY(cudaEventSynchronize(event)); });
    return;
  }
  PINFEED_CUDA_TRY(cudaStreamWaitEvent(here, event, 0));
}

}  // namespace pinfeed::detail
