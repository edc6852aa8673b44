#pragma once
/// @file cuda_handles.hpp
/// Owners of CUDA state, for code that must not leak a handle or leave a device current behind the
/// caller's back: device_guard (the current device for a scope), cuda_stream and cuda_event (a
/// handle destroyed with its owner), and waits that sleep instead of spinning a core.

#include <utility>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/error.hpp"

namespace pinfeed {

namespace detail {
/// Whether the calling thread has a CUDA context current (true when that cannot be told).
[[nodiscard]] bool thread_has_cuda_context() noexcept;
}  // namespace detail

/// Makes `device` current on this thread for a scope and restores the previous one. A thread that
/// had no device current (cudaGetDevice then reports 0 all the same) is left on `device`: making
/// device 0 current on the way out would create a context there, on every rank of a multi-GPU
/// job. Throws cuda_error when the device cannot be made current.
class device_guard {
 public:
  explicit device_guard(int device) {
    int current = 0;
    PINFEED_CUDA_TRY(PINFEED_CUDART(cudaGetDevice)(&current));
    const bool had_context = detail::thread_has_cuda_context();
    if (had_context && current == device) return;  // already there: nothing to do or restore
    if (had_context) previous_ = current;
    PINFEED_CUDA_TRY(PINFEED_CUDART(cudaSetDevice)(device));
  }
  ~device_guard() {
    if (previous_ >= 0) PINFEED_CUDA_TRY_NOTHROW(PINFEED_CUDART(cudaSetDevice)(previous_));
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

namespace detail {
/// A CUDA handle destroyed with its owner by Traits::destroy (cudaStreamDestroy,
/// cudaEventDestroy). Move-only; default-constructed it holds none.
template <class Handle, class Traits>
class owned_handle {
 public:
  owned_handle() noexcept = default;
  ~owned_handle() { reset(); }
  owned_handle(owned_handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  owned_handle& operator=(owned_handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  owned_handle(const owned_handle&) = delete;
  owned_handle& operator=(const owned_handle&) = delete;
  [[nodiscard]] Handle get() const noexcept { return h_; }
  /// Destroys the handle now (work queued on a stream still completes).
  void reset() noexcept {
    if (h_ != nullptr) PINFEED_CUDA_TRY_NOTHROW(Traits::destroy(h_));
    h_ = nullptr;
  }

 protected:
  Handle h_ = nullptr;
};
struct stream_traits {
  static cuda_result destroy(cudaStream_t s) noexcept { return PINFEED_CUDART(cudaStreamDestroy)(s); }
};
struct event_traits {
  static cuda_result destroy(cudaEvent_t e) noexcept { return PINFEED_CUDART(cudaEventDestroy)(e); }
};
}  // namespace detail

/// A stream destroyed with its owner. create() makes one on the current device (non-blocking with
/// respect to the legacy stream by default).
class cuda_stream : public detail::owned_handle<cudaStream_t, detail::stream_traits> {
 public:
  [[nodiscard]] static cuda_stream create(unsigned flags = detail::cuda_stream_non_blocking) {
    cuda_stream out;
    PINFEED_CUDA_TRY(PINFEED_CUDART(cudaStreamCreateWithFlags)(&out.h_, flags));
    return out;
  }
};

/// An event destroyed with its owner. create() makes one without timing, by default one a waiting
/// host thread sleeps on (cudaEventBlockingSync) instead of spinning a core the workers need.
class cuda_event : public detail::owned_handle<cudaEvent_t, detail::event_traits> {
 public:
  [[nodiscard]] static cuda_event create(unsigned flags = detail::cuda_event_disable_timing |
                                                         detail::cuda_event_blocking_sync) {
    cuda_event out;
    PINFEED_CUDA_TRY(PINFEED_CUDART(cudaEventCreateWithFlags)(&out.h_, flags));
    return out;
  }
};

/// Waits for the work queued on `stream` so far by recording `event` there and waiting on it.
/// With an event created with cudaEventBlockingSync the thread sleeps instead of spinning a core
/// that the workers need (cudaStreamSynchronize spins unless the whole device is set to block).
inline void wait_for_stream(cudaStream_t stream, cudaEvent_t event) {
  PINFEED_CUDA_TRY(PINFEED_CUDART(cudaEventRecord)(event, stream));
  PINFEED_CUDA_TRY(PINFEED_CUDART(cudaEventSynchronize)(event));
}

/// The same for teardown: never throws (failures are logged), and synchronizes the stream itself
/// when there is no event to wait on.
inline void wait_for_stream_nothrow(cudaStream_t stream, cudaEvent_t event) noexcept {
  if (event == nullptr) {
    PINFEED_CUDA_TRY_NOTHROW(PINFEED_CUDART(cudaStreamSynchronize)(stream));
    return;
  }
  PINFEED_CUDA_TRY_NOTHROW(PINFEED_CUDART(cudaEventRecord)(event, stream));
  PINFEED_CUDA_TRY_NOTHROW(PINFEED_CUDART(cudaEventSynchronize)(event));
}

}  // namespace pinfeed
