#pragma once
// Driver queries and one-time allocations made safely beside a CUDA graph capture: a stream's
// capture state, the thread's capture mode relaxed for one call, and whether the device can reach
// a pointer; and the streams users name (a reader's, the consumer's), resolved where they were
// named and fenced without joining a capture. CUDA builds only, but for named_stream: a CPU-only
// build has no capture, no stream and no device pointer.

#include <thread>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::detail {

/// A stream as the thread that gave it to pinfeed meant it. cudaStreamPerThread names that
/// thread's per-thread default stream, whichever thread later fences it; 0 and cudaStreamLegacy
/// name the device's legacy default stream (pinfeed is built without per-thread default streams,
/// so 0 is the legacy stream in its calls); any other handle names itself.
struct named_stream {
  cudaStream_t handle = nullptr;
  std::thread::id thread{};  // the thread that named it
};

/// `s` as the calling thread names it.
inline named_stream name_stream(cudaStream_t s) noexcept { return {s, std::this_thread::get_id()}; }

}  // namespace pinfeed::detail

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

/// This thread in relaxed capture mode while the scope lives (when `on`), its mode restored after:
/// pinfeed's own threads (the feeder, the copy stage on the workers, teardown, slot allocation)
/// wait on events, allocate and free while a user's thread may be capturing a graph in global mode
/// (torch.cuda.graph's default). In global mode those calls would be refused and would invalidate
/// the user's capture; in relaxed mode this thread is not held to it. Never throws: a thread whose
/// mode cannot be changed keeps it.
class relaxed_capture_scope {
 public:
  explicit relaxed_capture_scope(bool on) noexcept {
    if (on && cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess) set_ = true;
    else if (on) (void)cudaGetLastError();
  }
  ~relaxed_capture_scope() {
    if (set_) (void)cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  relaxed_capture_scope(const relaxed_capture_scope&) = delete;
  relaxed_capture_scope& operator=(const relaxed_capture_scope&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool set_ = false;
};

/// True while `stream` is being captured into a graph (also when it is the legacy default stream
/// and a blocking stream of the device is being captured): then nothing that is not capturable may run.
bool stream_capturing(cudaStream_t stream);

/// Throws pinfeed::invalid_argument ("<who>: <name> is pageable host memory, ...") unless the
/// device can reach `ptr` (null passes). Queries the driver: call it outside a capture of the
/// caller's stream, inside with_relaxed_capture when another thread may be capturing.
void require_device_visible(const void* ptr, const char* who, const char* name);

/// The handle that, used on the calling thread, orders after the work queued so far on `s`: the
/// handle itself, but for another thread's per-thread default stream the legacy default stream.
/// Work on the legacy stream waits for the earlier work of every blocking stream of the device,
/// per-thread default streams included, so a fence recorded there follows the naming thread's
/// work (and more: conservative, never early).
cudaStream_t stream_here(const named_stream& s) noexcept;

/// Records `event` after the work queued so far on `s` and returns true. Returns false, recording
/// nothing, while that stream is being captured into a graph: a record there would add a node to
/// the user's capture, and the copy stream's later wait on it would join the capture (its
/// cudaStreamEndCapture then fails); on the legacy stream it would invalidate the capture of every
/// blocking stream. Also false where a capture began between the query and the record (the record
/// refused as one a capture forbids). The caller keeps `s` and records the fence once the capture
/// has ended.
bool record_after(cudaEvent_t event, const named_stream& s);

/// Makes the work queued next on `s` (named by the calling thread) wait for `event`, the host not
/// waiting. While `s` is being captured, the host waits for `event` instead: a capture cannot wait
/// for work recorded outside it (that invalidates it), and the captured work then reads what the
/// event guarded.
void wait_for_event(const named_stream& s, cudaEvent_t event);

}  // namespace pinfeed::detail
#else
namespace pinfeed::detail {
// A CPU-only build has no stream: nothing to order, nothing being captured.
struct relaxed_capture_scope {
  explicit relaxed_capture_scope(bool) noexcept {}
};
inline cudaStream_t stream_here(const named_stream& s) noexcept { return s.handle; }
inline bool stream_capturing(cudaStream_t) { return false; }
inline bool record_after(cudaEvent_t, const named_stream&) { return true; }
inline void wait_for_event(const named_stream&, cudaEvent_t) {}
}  // namespace pinfeed::detail
#endif
