// Streams a user names to the loader, as CUDA and DLPack define them: cudaStreamPerThread (DLPack's
// stream=2) is the naming thread's stream, whichever thread frees the view; cudaStreamLegacy
// (stream=1) is the device's legacy stream; and a view made, freed or a batch released while its
// stream is being captured into a CUDA graph leaves the capture as the user made it.
#include <doctest/doctest.h>

#include <cstring>
#include <thread>
#include <vector>

#include <dlpack/dlpack.h>

#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/detail/capture.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"
#include "runtime/gpu_loader_fixtures.cuh"

using namespace pinfeed;

namespace {

/// Sums a batch's bytes into *out (one block), at once.
__global__ void sum_bytes(const std::uint8_t* data, std::size_t n, unsigned long long* out) {
  unsigned long long local = 0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) local += data[i];
  atomicAdd(out, local);
}

}  // namespace

TEST_CASE("runtime.streams.per_thread_stream_is_the_naming_threads") {
  // No device needed: which handle orders after a named stream's work, on which thread.
  const detail::named_stream per_thread = detail::name_stream(cudaStreamPerThread);
  const detail::named_stream legacy = detail::name_stream(cudaStreamLegacy);
  const detail::named_stream null = detail::name_stream(nullptr);
  auto* own = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});
  const detail::named_stream ordinary = detail::name_stream(own);
  // On the naming thread each handle is itself.
  CHECK(detail::stream_here(per_thread) == cudaStreamPerThread);
  CHECK(detail::stream_here(legacy) == cudaStreamLegacy);
  CHECK(detail::stream_here(null) == nullptr);
  CHECK(detail::stream_here(ordinary) == own);
  // On another thread the per-thread stream would be that thread's: the legacy stream stands for
  // the naming thread's (it waits for every blocking stream's earlier work). The others are shared.
  cudaStream_t there[4] = {};
  std::thread other([&] {
    there[0] = detail::stream_here(per_thread);
    there[1] = detail::stream_here(legacy);
    there[2] = detail::stream_here(null);
    there[3] = detail::stream_here(ordinary);
  });
  other.join();
  CHECK(there[0] == cudaStreamLegacy);
  CHECK(there[1] == cudaStreamLegacy);
  CHECK(there[2] == nullptr);
  CHECK(there[3] == own);
}

TEST_CASE("gpu.loader.views_on_the_per_thread_and_legacy_streams_freed_on_another_thread" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("DLPack views on cudaStreamPerThread and cudaStreamLegacy")) return;
  // The simulator knows neither special handle, and runs one operation at a time (a copy could not
  // overtake the reader there anyway).
  if (test::needs_real_gpu("cudaStreamPerThread / cudaStreamLegacy, and a copy that could overtake a reader")) return;
  for (cudaStream_t named : {cudaStreamPerThread, cudaStreamLegacy}) {
    CAPTURE(named == cudaStreamPerThread ? "cudaStreamPerThread" : "cudaStreamLegacy");
    loader l(random_source(24), gpu_options(8, 1));  // 2 slots: batch 2 is copied into batch 0's
    device_buffer sum(sizeof(unsigned long long));
    test::fill_device(sum.data(), 0, sizeof(unsigned long long));
    cudaEvent_t done;
    PINFEED_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    auto b0 = l.next();
    REQUIRE(b0);
    DLManagedTensor* view = b0->to_dlpack("data", named);
    const std::size_t bytes = b0->field("data").bytes();
    b0.reset();
    // This thread reads the view on its stream for a quarter of a second; another frees it.
    spin_then_sum<<<1, 256, 0, named>>>(static_cast<const std::uint8_t*>(view->dl_tensor.data), bytes, 250'000'000,
                                        reinterpret_cast<unsigned long long*>(sum.data()));
    PINFEED_CHECK_LAUNCH();
    PINFEED_CUDA_TRY(cudaEventRecord(done, named));
    std::thread other([view] { view->deleter(view); });
    other.join();
    auto b1 = l.next();
    REQUIRE(b1);
    auto b2 = l.next();  // into batch 0's slot: its copy waited for the reader on this thread's stream
    REQUIRE(b2);
    PINFEED_CUDA_TRY(cudaEventSynchronize(b2->ready_event()));
    CHECK(cudaEventQuery(done) == cudaSuccess);
    unsigned long long got = 0;
    PINFEED_CUDA_TRY(cudaMemcpy(&got, sum.data(), sizeof got, cudaMemcpyDeviceToHost));
    CHECK(got == reference_sum(77, 0, 8));  // the reader saw batch 0 whole
    check_batch_is_its_own(*b2);
    PINFEED_CUDA_TRY(cudaEventDestroy(done));
  }
}

TEST_CASE("gpu.loader.views_and_releases_inside_a_graph_capture_leave_it_intact" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("DLPack views and releases inside a CUDA graph capture")) return;
  cuda_stream consumer = cuda_stream::create(), reader = cuda_stream::create();
  loader_options o = gpu_options(8, 1);
  o.stream = consumer.get();
  loader l(random_source(40), o);
  device_buffer sums(2 * sizeof(unsigned long long));
  test::fill_device(sums.data(), 0, 2 * sizeof(unsigned long long));
  auto* sum = reinterpret_cast<unsigned long long*>(sums.data());

  // A view made before the capture and read on `reader`: freed inside a capture of `reader`, its
  // fence waits for the capture's end (recording it there would add a node to the user's graph and
  // join the copy stream into the capture). A view made inside the capture orders the captured
  // read without waiting on an event from outside it (that would invalidate the capture).
  auto b0 = l.next();
  REQUIRE(b0);
  DLManagedTensor* before = b0->to_dlpack("data", reader.get());
  const std::size_t bytes = b0->field("data").bytes();
  sum_bytes<<<1, 256, 0, reader.get()>>>(static_cast<const std::uint8_t*>(before->dl_tensor.data), bytes, sum);
  PINFEED_CHECK_LAUNCH();
  PINFEED_CUDA_TRY(cudaStreamBeginCapture(reader.get(), cudaStreamCaptureModeGlobal));
  DLManagedTensor* inside = b0->to_dlpack("data", reader.get());
  sum_bytes<<<1, 256, 0, reader.get()>>>(static_cast<const std::uint8_t*>(inside->dl_tensor.data), bytes, sum + 1);
  PINFEED_CHECK_LAUNCH();
  before->deleter(before);
  inside->deleter(inside);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(reader.get(), &graph) == cudaSuccess);
  CHECK(graph != nullptr);
  CHECK(l.stats().capture_deferred == 2);

  // The batch released inside a capture of the consumer stream: its release event too.
  PINFEED_CUDA_TRY(cudaStreamBeginCapture(consumer.get(), cudaStreamCaptureModeGlobal));
  b0.reset();
  cudaGraph_t release_graph = nullptr;
  CHECK(cudaStreamEndCapture(consumer.get(), &release_graph) == cudaSuccess);
  CHECK(release_graph != nullptr);
  CHECK(l.stats().capture_deferred == 3);

  // The captured read never ran (a graph that reads a view freed inside its capture is the user's
  // to launch or not); the eager one saw batch 0 whole. The loader runs on, and batch 2 lands in
  // batch 0's slot after the fences the captures deferred.
  if (graph != nullptr) PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
  if (release_graph != nullptr) PINFEED_CUDA_TRY(cudaGraphDestroy(release_graph));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(reader.get()));
  unsigned long long got[2] = {0, 0};
  PINFEED_CUDA_TRY(cudaMemcpy(got, sums.data(), sizeof got, cudaMemcpyDeviceToHost));
  CHECK(got[0] == reference_sum(77, 0, 8));
  CHECK(got[1] == 0);
  auto b1 = l.next();
  REQUIRE(b1);
  auto b2 = l.next();
  REQUIRE(b2);
  CHECK(b2->index() == 2);
  check_batch_is_its_own(*b2);
}
