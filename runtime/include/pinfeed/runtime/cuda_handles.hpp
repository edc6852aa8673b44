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
    PINFEED_CUDA_TRY(cudaGetDevice(&current));
    const bool had_context = detail::thread_has_cuda_context();
    if (had_context && current == device) return;  // already there: nothing to do or restore
    if (had_context) previous_ = current;
    PINFEED_CUDA_TRY(cudaSetDevice(device));
  }
  ~device_guard() {
    if (previous_ >= 0) PINFEED_CUDA_TRY_NOTHROW(cudaSetDevice(previous_));
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

/// A stream destroyed with its owner. Move-only. Default-constructed it holds none; create() makes
/// one on the current device (non-blocking with respect to the legacy stream by default).
class cuda_stream {
 public:
  cuda_stream() noexcept = default;
  [[nodiscard]] static cuda_stream create(unsigned flags = cudaStreamNonBlocking) {
    cuda_stream out;
    PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&out.s_, flags));
    return out;
  }
  ~cuda_stream() { reset(); }
  cuda_stream(cuda_stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  cuda_stream& operator=(cuda_stream&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  [[nodiscard]] cudaStream_t get() const noexcept { return s_; }
  /// Destroys the stream now (work queued on it still completes).
  void reset() noexcept {
    if (s_ != nullptr) PINFEED_CUDA_TRY_NOTHROW(cudaStreamDestroy(s_));
    s_ = nullptr;
  }

 private:
  cudaStream_t s_ = nullptr;
};

/// An event destroyed with its owner. Move-only. Default-constructed it holds none; create() makes
/// one without timing, by default one a waiting host thread sleeps on (cudaEventBlockingSync)
/// instead of spinning a core the workers need.
class cuda_event {
 public:
  cuda_event() noexcept = default;
  [[nodiscard]] static cuda_event create(unsigned flags = cudaEventDisableTiming | cudaEventBlockingSync) {
    cuda_event out;
    PINFEED_CUDA_TRY(cudaEventCreateWithFlags(&out.e_, flags));
    return out;
  }
  ~cuda_event() { reset(); }
  cuda_event(cuda_event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  cuda_event& operator=(cuda_event&& o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }
  void reset() noexcept {
    if (e_ != nullptr) PINFEED_CUDA_TRY_NOTHROW(cudaEventDestroy(e_));
    e_ = nullptr;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

/// Waits for the work queued on `stream` so far by recording `event` there and waiting on it.
/// With an event created with cudaEventBlockingSync the thread sleeps instead of spinning a core
/// that the workers need (cudaStreamSynchronize spins unless the whole device is set to block).
inline void wait_for_stream(cudaStream_t stream, cudaEvent_t event) {
  PINFEED_CUDA_TRY(cudaEventRecord(event, stream));
  PINFEED_CUDA_TRY(cudaEventSynchronize(event));
}

/// The same for teardown: never throws (failures are logged), and synchronizes the stream itself
/// when there is no event to wait on.
inline void wait_for_stream_nothrow(cudaStream_t stream, cudaEvent_t event) noexcept {
  if (event == nullptr) {
    PINFEED_CUDA_TRY_NOTHROW(cudaStreamSynchronize(stream));
    return;
  }
  PINFEED_CUDA_TRY_NOTHROW(cudaEventRecord(event, stream));
  PINFEED_CUDA_TRY_NOTHROW(cudaEventSynchronize(event));
}

}  // namespace pinfeed
