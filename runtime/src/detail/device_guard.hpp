#pragma once
// Makes a CUDA device current on this thread for a scope and restores the previous one.

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/error.hpp"

namespace pinfeed::detail {

class device_guard {
 public:
  explicit device_guard(int device) {
    PINFEED_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) PINFEED_CUDA_TRY(cudaSetDevice(device));
    else previous_ = -1;
  }
  ~device_guard() {
    if (previous_ >= 0) PINFEED_CUDA_TRY_NOTHROW(cudaSetDevice(previous_));
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

/// Waits for the work queued on `stream` so far by recording `event` there and waiting on it.
/// With an event created with cudaEventBlockingSync the thread sleeps instead of spinning a core
/// that the workers need (cudaStreamSynchronize spins unless the whole device is set to block).
inline void wait_for_stream(cudaStream_t stream, cudaEvent_t event) {
  PINFEED_CUDA_TRY(cudaEventRecord(event, stream));
  PINFEED_CUDA_TRY(cudaEventSynchronize(event));
}

/// The same for teardown: never throws (failures are logged), and synchronises the stream itself
/// when there is no event to wait on.
inline void wait_for_stream_nothrow(cudaStream_t stream, cudaEvent_t event) noexcept {
  if (event == nullptr) {
    PINFEED_CUDA_TRY_NOTHROW(cudaStreamSynchronize(stream));
    return;
  }
  PINFEED_CUDA_TRY_NOTHROW(cudaEventRecord(event, stream));
  PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(event));
}

}  // namespace pinfeed::detail
