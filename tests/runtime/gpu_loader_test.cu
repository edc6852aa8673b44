// GPU cases of the loader: device batches, copy/compute overlap, slot reuse ordered by events.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"
#include "runtime/gpu_loader_fixtures.cuh"

using namespace pinfeed;

TEST_CASE("gpu.loader.device_batches_equal_host_reference" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("loader on a GPU")) return;
  loader l(random_source(100), gpu_options(8, 3));
  CHECK(l.device().is_cuda());
  CHECK(l.device_bytes() == l.host_bytes());
  std::vector<std::byte> back(8 * kBytes), expect(kBytes);
  std::size_t seen = 0;
  while (auto b = l.next()) {
    const auto v = b->field("data");
    REQUIRE(v.location.is_cuda());
    REQUIRE(b->ready_event() != nullptr);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), v.data, v.bytes(), cudaMemcpyDeviceToHost, b->stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(b->stream()));
    for (std::size_t j = 0; j < b->size(); ++j) {
      fill_random_bytes(philox_stream(77, 0, b->indices()[j]), expect);
      REQUIRE(std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) == 0);
    }
    DLManagedTensor* dl = b->to_dlpack("data");
    CHECK(dl->dl_tensor.device.device_type == kDLCUDA);
    CHECK(dl->dl_tensor.data == v.data);
    dl->deleter(dl);
    seen += b->size();
  }
  CHECK(seen == 100);
  const auto st = l.stats();
  CHECK(st[stage::copy].count == 13);
  CHECK(st.device_bytes == l.device_bytes());
}

TEST_CASE("gpu.loader.slot_reuse_waits_for_consumer_work" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("slot reuse ordering")) return;
  // 2 slots; each batch is released right after a 5 ms kernel that reads it is queued. If a copy
  // overwrote a slot before the kernel finished, the sums would be wrong.
  constexpr std::size_t kBatch = 4, kBatches = 24;
  loader l(random_source(kBatch * kBatches), gpu_options(kBatch, 1));
  PINFEED_CUDA_TRY(cudaSetDevice(l.device().index));
  device_buffer sums(kBatches * sizeof(unsigned long long));
  PINFEED_CUDA_TRY(cudaMemsetAsync(sums.data(), 0, sums.size(), l.stream()));
  auto* d_sums = reinterpret_cast<unsigned long long*>(sums.data());
  while (auto b = l.next()) {
    const auto v = b->field("data");
    spin_then_sum<<<1, 256, 0, b->stream()>>>(static_cast<const std::uint8_t*>(v.data), v.bytes(), 5'000'000,
                                              d_sums + b->index());
    PINFEED_CHECK_LAUNCH();
  }
  std::vector<unsigned long long> got(kBatches);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), sums.data(), sums.size(), cudaMemcpyDeviceToHost, l.stream()));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));
  for (std::size_t b = 0; b < kBatches; ++b) {
    CAPTURE(b);
    CHECK(got[b] == reference_sum(77, b * kBatch, kBatch));
  }
}

namespace {
/// Batch 0's slot is read by a 500 ms kernel on the consumer stream and released; returns the
/// event recorded after that kernel and batch 1, taken while the kernel runs.
struct kernel_on_batch0 {
  cudaEvent_t kernel_done = nullptr;
  std::optional<batch> b1;
};
kernel_on_batch0 run_kernel_on_batch0(loader& l, device_buffer& sum) {
  PINFEED_CUDA_TRY(cudaSetDevice(l.device().index));
  PINFEED_CUDA_TRY(cudaMemsetAsync(sum.data(), 0, sum.size(), l.stream()));
  kernel_on_batch0 out;
  PINFEED_CUDA_TRY(cudaEventCreateWithFlags(&out.kernel_done, cudaEventDisableTiming));
  auto b0 = l.next();
  REQUIRE(b0);
  const auto v = b0->field("data");
  // 500 ms on the consumer stream: long enough that everything below happens while it runs.
  spin_then_sum<<<1, 256, 0, l.stream()>>>(static_cast<const std::uint8_t*>(v.data), v.bytes(), 500'000'000,
                                           reinterpret_cast<unsigned long long*>(sum.data()));
  PINFEED_CHECK_LAUNCH();
  PINFEED_CUDA_TRY(cudaEventRecord(out.kernel_done, l.stream()));
  b0.reset();
  out.b1 = l.next();  // must not wait for the kernel
  REQUIRE(out.b1);
  return out;
}
}  // namespace

TEST_CASE("gpu.loader.next_never_waits_for_consumer_kernels" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("next() while the consumer's kernel runs")) return;
  loader l(random_source(64), gpu_options(8, 2));
  device_buffer sum(sizeof(unsigned long long));
  auto k = run_kernel_on_batch0(l, sum);
  CHECK(cudaEventQuery(k.kernel_done) == cudaErrorNotReady);
  PINFEED_CUDA_TRY(cudaEventSynchronize(k.kernel_done));
  unsigned long long got = 0;
  PINFEED_CUDA_TRY(cudaMemcpy(&got, sum.data(), sizeof(got), cudaMemcpyDeviceToHost));
  CHECK(got == reference_sum(77, 0, 8));  // the kernel read batch 0 intact
  PINFEED_CUDA_TRY(cudaEventDestroy(k.kernel_done));
}

TEST_CASE("gpu.loader.copy_overlaps_consumer_kernel_and_host_never_blocks" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("copy/compute overlap")) return;
  if (test::needs_real_gpu("a copy overlapping a running kernel needs a copy engine; the simulator runs one "
                           "operation at a time")) return;
  loader l(random_source(64), gpu_options(8, 2));
  device_buffer sum(sizeof(unsigned long long));
  auto k = run_kernel_on_batch0(l, sum);
  CHECK(cudaEventQuery(k.kernel_done) == cudaErrorNotReady);
  // The copy of batch 1 runs on the copy stream and completes while the kernel still runs.
  PINFEED_CUDA_TRY(cudaEventSynchronize(k.b1->ready_event()));
  CHECK(cudaEventQuery(k.kernel_done) == cudaErrorNotReady);
  PINFEED_CUDA_TRY(cudaEventSynchronize(k.kernel_done));
  PINFEED_CUDA_TRY(cudaEventDestroy(k.kernel_done));
}

TEST_CASE("gpu.loader.destroy_with_copies_in_flight" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("destroy with copies in flight")) return;
  test::run_with_timeout(std::chrono::seconds(120), [&] {
    for (int round = 0; round < 20; ++round) {
      loader l(random_source(4096), gpu_options(16, 1 + round % 4));
      for (int i = 0; i < round % 3; ++i) REQUIRE(l.next());
    }
  }, "GPU loader destructions");
}

TEST_CASE("gpu.loader.user_stream" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("user-provided consumer stream")) return;
  cudaStream_t s;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    auto o = gpu_options(8, 2);
    o.stream = s;
    loader l(random_source(32), o);
    CHECK(l.stream() == s);
    std::size_t n = 0;
    while (auto b = l.next()) {
      CHECK(b->stream() == s);
      n += b->size();
    }
    CHECK(n == 32);
  }
  PINFEED_CUDA_TRY(cudaStreamDestroy(s));  // the loader did not destroy a stream it does not own
}

TEST_CASE("gpu.loader.consumer_on_its_own_stream_releases_after" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("consumer on its own stream")) return;
  // The consumer reads each batch only on a stream of its own (5 ms per batch) and releases it with
  // release_after(): with 2 slots, every copy into a slot must wait for that stream's kernel.
  constexpr std::size_t kBatch = 4, kBatches = 24;
  loader l(random_source(kBatch * kBatches), gpu_options(kBatch, 1));
  PINFEED_CUDA_TRY(cudaSetDevice(l.device().index));
  cudaStream_t mine;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  device_buffer sums(kBatches * sizeof(unsigned long long));
  PINFEED_CUDA_TRY(cudaMemsetAsync(sums.data(), 0, sums.size(), mine));
  auto* d_sums = reinterpret_cast<unsigned long long*>(sums.data());
  while (auto b = l.next()) {
    const auto v = b->field("data");
    PINFEED_CUDA_TRY(cudaStreamWaitEvent(mine, b->ready_event(), 0));
    spin_then_sum<<<1, 256, 0, mine>>>(static_cast<const std::uint8_t*>(v.data), v.bytes(), 5'000'000,
                                       d_sums + b->index());
    PINFEED_CHECK_LAUNCH();
    b->release_after(mine);
    CHECK(!*b);
  }
  std::vector<unsigned long long> got(kBatches);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), sums.data(), sums.size(), cudaMemcpyDeviceToHost, mine));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(mine));
  for (std::size_t b = 0; b < kBatches; ++b) {
    CAPTURE(b);
    CHECK(got[b] == reference_sum(77, b * kBatch, kBatch));
  }
  PINFEED_CUDA_TRY(cudaStreamDestroy(mine));
}

TEST_CASE("gpu.loader.failed_sample_drops_its_batch_only" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("sample error on the GPU path")) return;
  auto src = make_source(64, {{"data", dtype::u8, {kBytes}}}, [](sample& s) {
    if (s.index() == 21) throw std::runtime_error("corrupt sample");
    fill_random_bytes(s.rng(), s.bytes(0));
  });
  auto o = gpu_options(8, 3);
  o.order.shuffle = false;
  loader l(src, o);
  std::vector<std::byte> back(8 * kBytes), expect(kBytes);
  std::size_t batches = 0;
  for (std::uint64_t b = 0; b < l.batches_per_epoch(); ++b) {
    if (b == 2) {  // samples 16..23
      CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("corrupt sample"), sample_error);
      continue;
    }
    auto batch = l.next();
    REQUIRE(batch);
    CHECK(batch->index() == b);
    const auto v = batch->field("data");
    PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), v.data, v.bytes(), cudaMemcpyDeviceToHost, batch->stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(batch->stream()));
    for (std::size_t j = 0; j < batch->size(); ++j) {
      fill_random_bytes(philox_stream(77, 0, batch->indices()[j]), expect);
      REQUIRE(std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) == 0);
    }
    ++batches;
  }
  CHECK(batches == 7);
  CHECK(!l.next());
}

TEST_CASE("gpu.loader.restart_epoch_while_batches_are_held" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("start_epoch with held batches")) return;
  auto o = gpu_options(8, 2);
  o.max_batches_in_use = 2;
  loader l(random_source(256), o);
  auto check = [&](const batch& b) {
    std::vector<std::byte> back(b.size() * kBytes), expect(kBytes);
    const auto v = b.field("data");
    PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), v.data, v.bytes(), cudaMemcpyDeviceToHost, b.stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(b.stream()));
    for (std::size_t j = 0; j < b.size(); ++j) {
      fill_random_bytes(philox_stream(77, b.epoch(), b.indices()[j]), expect);  // a sample's bytes depend on the epoch
      if (std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) != 0) return false;
    }
    return true;
  };
  auto h0 = l.next(), h1 = l.next();
  REQUIRE(h0);
  REQUIRE(h1);
  test::run_with_timeout(std::chrono::seconds(60), [&] {
    for (std::uint32_t e = 1; e <= 3; ++e) {
      l.start_epoch(e);  // the held batches keep their slots; the new epoch runs on the others
      for (int i = 0; i < 10; ++i) {
        auto b = l.next();
        REQUIRE(b);
        CHECK(b->epoch() == e);
        CHECK(check(*b));
      }
      CHECK(check(*h0));  // still intact while the new epoch's copies run
      CHECK(check(*h1));
    }
  }, "restarting epochs while batches are held");
  h0.reset();
  h1.reset();
  std::size_t seen = 0;
  l.start_epoch(4);
  while (auto b = l.next()) seen += b->size();
  CHECK(seen == 256);
}

TEST_CASE("gpu.loader.after_copy_hook_sees_each_copy_on_the_copy_stream" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("after_copy hook")) return;
  std::mutex m;
  std::vector<std::size_t> bytes;
  std::vector<cudaStream_t> streams;
  auto o = gpu_options(8, 2);
  o.after_copy = [&](std::size_t b, cudaStream_t s) {  // on the workers: calls may overlap, in any order
    std::lock_guard lock(m);
    bytes.push_back(b);
    streams.push_back(s);
  };
  {
    loader l(random_source(20), o);
    std::size_t n = 0;
    while (auto b = l.next()) n += b->size();
    CHECK(n == 20);
    for (auto s : streams) {
      CHECK(s != nullptr);
      CHECK(s != l.stream());  // the copy stream, not the consumer's
    }
  }
  REQUIRE(bytes.size() == 3);  // 8 + 8 + 4 samples, the batches in any order
  std::sort(bytes.begin(), bytes.end());
  CHECK(bytes == std::vector<std::size_t>{4 * kBytes, 8 * kBytes, 8 * kBytes});
  // A hook that throws fails that batch, with its message.
  o.after_copy = [](std::size_t, cudaStream_t) { throw std::runtime_error("hook refused the copy"); };
  loader l(random_source(20), o);
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("hook refused the copy"), std::runtime_error);
  // One that throws something else fails that batch with an error naming the hook.
  o.after_copy = [](std::size_t, cudaStream_t) { throw 3; };
  loader k(random_source(20), o);
  CHECK_THROWS_WITH_AS((void)k.next(), doctest::Contains("after_copy hook threw an exception that is not a std::exception"),
                       pinfeed::runtime_error);
}

TEST_CASE("gpu.loader.every_thread_works_on_the_loader_device" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("loader on device 1")) return;
  if (!test::device_one_with_device_zero_untouched()) return;
  // A rank of a multi-GPU job: loader, feeder, workers and the consumer's checksums on cuda:1,
  // from threads with no device current. Device 0 must not get a context.
  std::vector<std::string> on_gpu, on_cpu;
  test::on_fresh_thread([&] {
    loader_options o = gpu_options(8, 3);
    o.device = "cuda:1";
    loader l(random_source(40), o);
    REQUIRE(l.device().index == 1);
    // The checksum copies the batch to the host from yet another fresh thread.
    while (auto b = l.next()) test::on_fresh_thread([&] { on_gpu.push_back(checksum_line(*b)); });
  });
  CHECK(test::primary_context_active(1) == std::optional<bool>(true));
  CHECK(test::primary_context_active(0) == std::optional<bool>(false));
  loader_options o = gpu_options(8, 3);
  o.device = "cpu";
  loader l(random_source(40), o);
  while (auto b = l.next()) on_cpu.push_back(checksum_line(*b));
  CHECK(on_gpu.size() == 5);
  CHECK(on_gpu == on_cpu);  // the bytes copied to device 1 are the host's
}

TEST_CASE("gpu.loader.held_batches_past_the_limit_are_refused" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("held batches on a GPU")) return;
  // prefetch 1 + max_batches_in_use 1: 2 slots. Holding both, next() used to wait forever.
  loader l(random_source(24), gpu_options(4, 1));
  std::vector<std::byte> back(4 * kBytes), expect(kBytes);
  std::size_t checked = 0;
  auto check = [&](const batch& b) {
    const auto v = b.field<std::uint8_t>("data");
    REQUIRE(v.location().is_cuda());
    PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), v.data(), v.elements().size(), cudaMemcpyDeviceToHost, b.stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(b.stream()));
    for (std::size_t j = 0; j < b.size(); ++j) {
      fill_random_bytes(philox_stream(77, 0, b.indices()[j]), expect);
      REQUIRE(std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) == 0);
      ++checked;
    }
  };
  auto b0 = l.next();
  REQUIRE(b0);
  auto b1 = l.next();
  REQUIRE(b1);
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("holds 2 batches"), batches_held_error);
  CHECK(l.next_batch() == 2);
  check(*b0);
  b0.reset();  // one back: the loop goes on, with the right data
  check(*b1);
  std::uint64_t expect_index = 2;
  while (auto b = l.next()) {
    CHECK(b->index() == expect_index++);
    check(*b);
  }
  CHECK(expect_index == 6);
  CHECK(checked == 24);
}

TEST_CASE("gpu.loader.dlpack_views_on_reader_streams_order_the_slots_next_copy" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("DLPack views on reader streams")) return;
  // prefetch 1 + max_batches_in_use 1: 2 slots, so batch 2 is copied into batch 0's slot.
  loader l(random_source(24), gpu_options(8, 1));
  cuda_stream reader1 = cuda_stream::create(), reader2 = cuda_stream::create();
  device_buffer sums(2 * sizeof(unsigned long long));
  test::fill_device(sums.data(), 0, 2 * sizeof(unsigned long long));
  auto* sum = reinterpret_cast<unsigned long long*>(sums.data());
  cudaEvent_t done[2];
  for (auto& e : done) PINFEED_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  auto b0 = l.next();
  REQUIRE(b0);
  // Two views of batch 0, each read on a stream of its own by a long kernel (as a framework would
  // queue work on its tensor), then freed at once with the kernels still queued: no synchronize.
  // With a DLPack 1.x header the second is a versioned view: both kinds order their stream alike.
  DLManagedTensor* view0 = b0->to_dlpack("data", reader1.get());
#if PINFEED_HAS_DLPACK_VERSIONED
  DLManagedTensorVersioned* view1 = b0->to_dlpack_versioned("data", reader2.get());
  CHECK(view1->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
#else
  DLManagedTensor* view1 = b0->to_dlpack("data", reader2.get());
#endif
  const DLTensor* tensors[2] = {&view0->dl_tensor, &view1->dl_tensor};
  const std::size_t bytes = b0->field("data").bytes();
  b0.reset();
  for (int k = 0; k < 2; ++k) {
    cudaStream_t s = k == 0 ? reader1.get() : reader2.get();
    REQUIRE(tensors[k]->device.device_type == kDLCUDA);
    spin_then_sum<<<1, 256, 0, s>>>(static_cast<const std::uint8_t*>(tensors[k]->data), bytes,
                                    k == 0 ? 300'000'000 : 200'000'000, sum + k);
    PINFEED_CHECK_LAUNCH();
    PINFEED_CUDA_TRY(cudaEventRecord(done[k], s));
  }
  view0->deleter(view0);
  std::thread other([view1] { view1->deleter(view1); });  // a framework's deleter, on its own thread
  other.join();
  auto b1 = l.next();  // the loader runs on
  REQUIRE(b1);
  auto b2 = l.next();  // into batch 0's slot (batch 1 holds the other): its copy waited on both fences
  REQUIRE(b2);
  CHECK(b2->index() == 2);
  PINFEED_CUDA_TRY(cudaEventSynchronize(b2->ready_event()));
  // Ordering, not timing: the copy into the slot completed, so the fences before it had, and with
  // them every kernel that read the slot through the views.
  CHECK(cudaEventQuery(done[0]) == cudaSuccess);
  CHECK(cudaEventQuery(done[1]) == cudaSuccess);
  unsigned long long got[2] = {0, 0};
  PINFEED_CUDA_TRY(cudaMemcpy(got, sums.data(), sizeof got, cudaMemcpyDeviceToHost));
  CHECK(got[0] == reference_sum(77, 0, 8));  // both kernels read batch 0 intact
  CHECK(got[1] == reference_sum(77, 0, 8));
  check_batch_is_its_own(*b2);  // batch 2's data is its own
  for (auto& e : done) PINFEED_CUDA_TRY(cudaEventDestroy(e));
}

TEST_CASE("gpu.loader.dlpack_view_deleted_after_the_loader_is_gone" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("a DLPack view outliving its loader")) return;
  cuda_stream reader = cuda_stream::create();
  DLManagedTensor* view = nullptr;
  {
    loader l(random_source(16), gpu_options(8, 1));
    auto b = l.next();
    REQUIRE(b);
    view = b->to_dlpack("data", reader.get());
  }  // the loader and the batch are gone; the view holds the slot's memory
  std::vector<std::byte> back(8 * kBytes), expect(kBytes);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), view->dl_tensor.data, back.size(), cudaMemcpyDeviceToHost, reader.get()));
  std::thread other([view] { view->deleter(view); });  // freed with the copy still queued on `reader`
  other.join();
  PINFEED_CUDA_TRY(cudaStreamSynchronize(reader.get()));
  for (std::size_t j = 0; j < 8; ++j) {
    fill_random_bytes(philox_stream(77, 0, j), expect);
    CHECK(std::memcmp(back.data() + j * kBytes, expect.data(), kBytes) == 0);
  }
}

namespace {

/// Adds `by` to each of the arena's `n` elements (the source's device work after the copy).
__global__ void add_to_each(std::uint32_t* data, std::uint64_t n, std::uint32_t by) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    data[i] += by;
}

/// Samples claim 1 + i % 29 elements of "tokens" (at most 32) holding i * 100 + k; before the copy
/// the source writes each sample's element count into "count" in the host slot, and after it adds
/// 7 to every element on the device.
class hooked_source final : public source {
 public:
  std::uint64_t size() const override { return 45; }
  std::vector<field_spec> fields() const override {
    return {{"count", dtype::u32, {}}, {"tokens", dtype::u32, {32}, true}};
  }
  void produce(sample& s) override {
    const auto t = s.claim<std::uint32_t>("tokens", 1 + s.index() % 29);
    for (std::size_t k = 0; k < t.size(); ++k) t[k] = static_cast<std::uint32_t>(s.index() * 100 + k);
  }
  void before_copy(const slot_view& slot) override {
    auto* count = reinterpret_cast<std::uint32_t*>(slot.host[0]);
    for (std::size_t j = 0; j < slot.count; ++j) count[j] = static_cast<std::uint32_t>(slot.extents[1][2 * j + 1]);
    before.fetch_add(1);
  }
  void after_copy(const slot_view& slot) override {
    if (slot.used[1] == 0) return;
    // Batches finish on several threads, each launching on the copy stream. A GPU takes launches
    // from any thread; the functional simulator (tools/gpu-sim) does not: two at once can run one
    // launch's kernel with the other's arguments (seen as +7 applied twice to one batch's arena).
    // One launch at a time keeps the case about the loader, on both.
    std::lock_guard lock(launching_);
    add_to_each<<<4, 128, 0, slot.stream>>>(reinterpret_cast<std::uint32_t*>(slot.device[1]), slot.used[1], 7);
    PINFEED_CUDA_TRY(cudaGetLastError());
    after.fetch_add(1);
  }
  std::atomic<int> before{0}, after{0};
  std::mutex launching_;
};

}  // namespace

TEST_CASE("gpu.loader.variable_fields_and_the_sources_copy_hooks" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("variable-size fields")) return;
  auto src = std::make_shared<hooked_source>();
  loader l(src, gpu_options(8, 2));
  std::uint64_t seen = 0;
  std::size_t batches = 0;
  while (auto b = l.next()) {
    ++batches;
    const auto tokens = b->field("tokens");
    CHECK(tokens.location.is_cuda());
    std::vector<std::uint32_t> arena(static_cast<std::size_t>(tokens.shape[0]));
    std::vector<std::uint32_t> count(b->size());
    PINFEED_CUDA_TRY(cudaMemcpyAsync(arena.data(), tokens.data, arena.size() * 4, cudaMemcpyDeviceToHost, b->stream()));
    PINFEED_CUDA_TRY(cudaMemcpyAsync(count.data(), b->field("count").data, count.size() * 4, cudaMemcpyDeviceToHost, b->stream()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(b->stream()));
    const auto extents = b->extents(1);
    std::uint64_t total = 0;
    for (std::size_t j = 0; j < b->size(); ++j) {
      const std::uint64_t i = b->indices()[j];
      CAPTURE(i);
      CHECK(count[j] == 1 + i % 29);  // written by before_copy into the host slot, then copied
      CHECK(extents[2 * j + 1] == 1 + i % 29);
      for (std::size_t k = 0; k < extents[2 * j + 1]; ++k) CHECK(arena[extents[2 * j] + k] == i * 100 + k + 7);
      total += extents[2 * j + 1];
      ++seen;
    }
    CHECK(arena.size() == total);
  }
  CHECK(seen == 45);
  CHECK(src->before.load() == static_cast<int>(batches));
  CHECK(src->after.load() == static_cast<int>(batches));
}
