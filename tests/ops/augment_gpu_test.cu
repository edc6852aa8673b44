// The augmentation jobs on the device against the host (pinfeed/ops/augment.hpp), bit for bit:
// every op and policy table on a batch of mixed sizes and channels, in one to three rounds; and the
// rounds captured into a CUDA graph and replayed.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <vector>

#include <chrono>

#include "gpu_setup.hpp"
#include "pinfeed/doctor/stages.hpp"  // busy_kernel_ms: a stream kept busy
#include "ops/augment_cases.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/detail/job_launch.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

namespace {

/// The jobs the device runs for an image of height x width x channels: of aug_cases (which the
/// host test runs whole), every kind, each op's distinct jobs up to six of them, and every 11th
/// warp (so that both interpolations, fill or none, and both tables' magnitudes and signs come
/// round): the simulator's time is what limits them.
std::vector<aug_job> gpu_jobs(std::uint32_t h, std::uint32_t w, int c) {
  std::vector<aug_job> out;
  std::vector<std::vector<aug_job>> by_kind(static_cast<std::size_t>(aug_kind::count_));
  std::size_t warps = 0;
  for (const auto& k : test::aug_cases(h, w, c)) {
    if (k.job.kind == aug_kind::warp) {
      if (warps++ % 11 == 0) out.push_back(k.job);
      continue;
    }
    auto& seen = by_kind[static_cast<std::size_t>(k.job.kind)];
    const bool again = std::any_of(seen.begin(), seen.end(), [&](const aug_job& j) { return std::memcmp(&j, &k.job, sizeof j) == 0; });
    if (!again) seen.push_back(k.job);
  }
  for (const auto& seen : by_kind)
    for (std::size_t i = 0, n = std::min<std::size_t>(seen.size(), 6); i < n; ++i) out.push_back(seen[i * seen.size() / n]);
  return out;
}

/// A batch: the images of `sizes` side by side (with a gap after each), and `rounds` jobs a sample:
/// every sample runs entry `next` of its own list (then next + 1, ...), so each entry meets every size.
struct aug_batch {
  std::vector<aug_job> jobs;
  std::vector<std::uint8_t> images;
  std::size_t samples = 0, rounds = 0;
};

aug_batch make_batch(const std::vector<std::array<std::uint32_t, 3>>& sizes, std::size_t rounds, std::size_t& next) {
  aug_batch b;
  b.samples = sizes.size();
  b.rounds = rounds;
  std::vector<std::uint64_t> offsets;
  std::uint64_t bytes = 0;
  for (const auto& s : sizes) {
    offsets.push_back(bytes);
    bytes += std::uint64_t{s[0]} * s[1] * s[2] + 5;
  }
  b.images = test::aug_image(bytes, 7 + next);
  b.jobs.resize(b.samples * rounds);
  for (std::size_t j = 0; j < b.samples; ++j) {
    const auto list = gpu_jobs(sizes[j][0], sizes[j][1], static_cast<int>(sizes[j][2]));
    for (std::size_t r = 0; r < rounds; ++r) {
      aug_job job = list[(next + r) % list.size()];
      job.offset = offsets[j];
      b.jobs[r * b.samples + j] = job;
    }
  }
  next += rounds;
  return b;
}

std::vector<std::uint8_t> on_device(const aug_batch& b, cudaStream_t stream) {
  const std::uint64_t bytes = b.images.size();
  device_buffer images(bytes), spare(bytes), scratch(aug_scratch_bytes(b.samples)), jobs(b.jobs.size() * sizeof(aug_job));
  test::upload(images.data(), b.images.data(), bytes);
  test::upload(jobs.data(), b.jobs.data(), b.jobs.size() * sizeof(aug_job));
  test::fill_device(spare.data(), 0x5A, bytes);
  augment_batch_device(reinterpret_cast<const aug_job*>(jobs.data()), b.jobs.data(), b.samples, b.rounds,
                       reinterpret_cast<std::uint8_t*>(images.data()), reinterpret_cast<std::uint8_t*>(spare.data()), bytes, scratch.data(),
                       scratch.size(), stream);
  std::vector<std::uint8_t> out(bytes);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(out.data(), images.data(), bytes, cudaMemcpyDeviceToHost, stream));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

}  // namespace

TEST_CASE("augment.a_failed_job_launch_names_its_kernel_grid_and_first_job") {
  // The job kernels share one launch loop (detail::launch_over_jobs), so the file and line of a
  // failed launch say nothing of which: the error names the kernel, its grid and its first job.
  // Built here without a launch (no GPU needed): what a failed launch throws.
  try {
    ops::detail::throw_launch_error(cudaErrorInvalidConfiguration, "blur_kernel", dim3(5, 300), 256, 65535, "augment.cu", 160);
    FAIL("throw_launch_error returned");
  } catch (const cuda_error& e) {
    CHECK(std::string(e.what()).find("blur_kernel<<<(5, 300), 256>>> (the jobs from 65535 on)") != std::string::npos);
    CHECK(e.code() == cudaErrorInvalidConfiguration);
    CHECK(e.file() == "augment.cu");
    CHECK(e.line() == 160);
  }
}

TEST_CASE("gpu.augment.every_op_on_a_mixed_batch_equals_the_host_bit_for_bit" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("augmentation jobs CPU == GPU")) return;
  // Sizes: one pixel, a grey strip, square ones (quarter turns), odd sides; 24x24 and 17x31 take
  // three blocks an image (the counts' atomics from several blocks).
  std::vector<std::array<std::uint32_t, 3>> sizes{{1, 1, 3}, {2, 5, 1}, {24, 24, 3}, {17, 31, 3}, {16, 16, 1}};
  if (!test::small_gpu_shapes()) sizes.push_back({224, 224, 3});
  const cuda_stream stream = cuda_stream::create();
  std::size_t next_case = 0, total_cases = 0;
  for (const auto& s : sizes) total_cases = std::max(total_cases, gpu_jobs(s[0], s[1], static_cast<int>(s[2])).size());
  int batches = 0;
  std::set<int> kinds_on_the_largest;  // the kinds the 24x24 RGB image (three blocks) took
  // Round counts 1 to 3 (odd ones copy the result back), until every entry of the longest list ran.
  for (std::size_t rounds = 1; next_case < total_cases; rounds = rounds % 3 + 1) {
    CAPTURE(rounds);
    CAPTURE(next_case);
    const aug_batch b = make_batch(sizes, rounds, next_case);
    for (std::size_t r = 0; r < rounds; ++r) kinds_on_the_largest.insert(static_cast<int>(b.jobs[r * b.samples + 2].kind));
    std::vector<std::uint8_t> host = b.images, spare(b.images.size());
    augment_batch_host(b.jobs.data(), b.samples, b.rounds, host.data(), spare.data(), host.size());
    const std::vector<std::uint8_t> device = on_device(b, stream.get());
    CHECK(device == host);
    if (device != host) {  // name the first sample that differs
      for (std::size_t j = 0; j < b.samples; ++j) {
        const aug_job& f = b.jobs[j];
        const std::uint64_t n = std::uint64_t{f.height} * f.width * f.channels;
        if (std::memcmp(device.data() + f.offset, host.data() + f.offset, n) != 0) {
          std::uint64_t at = 0;
          while (device[f.offset + at] == host[f.offset + at]) ++at;
          MESSAGE("sample " << j << ": first difference at byte " << at << " (pixel " << at / f.channels << "): device "
                            << int{device[f.offset + at]} << ", host " << int{host[f.offset + at]} << ", input "
                            << int{b.images[f.offset + at]});
          std::string ops;
          for (std::size_t r = 0; r < b.rounds; ++r) ops += std::string(aug_kind_name(b.jobs[r * b.samples + j].kind)) + " ";
          FAIL_CHECK("sample " << j << " (" << f.height << "x" << f.width << "x" << int{f.channels} << "): " << ops);
        }
      }
      break;
    }
    ++batches;
  }
  CHECK(batches >= 3);
  CHECK(kinds_on_the_largest.size() == static_cast<std::size_t>(aug_kind::count_));  // every kind, on several blocks an image
}

TEST_CASE("gpu.augment.captured_in_a_graph_and_replayed" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("augmentation jobs graph capture")) return;
  // Two rounds with the counting ops (contrast, equalize, autocontrast): the memset, the counts,
  // the tables and the pixels captured once and replayed on fresh input; no allocation and no
  // synchronisation inside, so the capture holds.
  std::vector<std::array<std::uint32_t, 3>> sizes{{24, 24, 3}, {17, 31, 1}, {40, 23, 3}};
  const std::uint64_t per = 40 * 31 * 3;
  const std::uint64_t bytes = per * sizes.size();
  std::vector<aug_job> jobs;
  const aug_op ops[2][3] = {{aug_op::equalize, aug_op::contrast, aug_op::autocontrast}, {aug_op::rotate, aug_op::equalize, aug_op::contrast}};
  for (int r = 0; r < 2; ++r)
    for (std::size_t j = 0; j < sizes.size(); ++j)
      jobs.push_back(aug_job_for(ops[r][j], ops[r][j] == aug_op::rotate ? 33.0 : 0.4, sizes[j][0], sizes[j][1],
                                 static_cast<int>(sizes[j][2]), interpolation::bilinear, 3.0, j * per));
  device_buffer images(bytes), spare(bytes), scratch(aug_scratch_bytes(sizes.size())), d_jobs(jobs.size() * sizeof(aug_job));
  test::upload(d_jobs.data(), jobs.data(), jobs.size() * sizeof(aug_job));
  const cuda_stream stream = cuda_stream::create();
  cudaGraph_t graph = nullptr;
  PINFEED_CUDA_TRY(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
  augment_batch_device(reinterpret_cast<const aug_job*>(d_jobs.data()), jobs.data(), sizes.size(), 2,
                       reinterpret_cast<std::uint8_t*>(images.data()), reinterpret_cast<std::uint8_t*>(spare.data()), bytes, scratch.data(),
                       scratch.size(), stream.get());
  PINFEED_CUDA_TRY(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec = nullptr;
  PINFEED_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  for (std::uint64_t replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    const auto input = test::aug_image(bytes, 40 + replay);
    test::upload(images.data(), input.data(), bytes);
    PINFEED_CUDA_TRY(cudaGraphLaunch(exec, stream.get()));
    std::vector<std::uint8_t> got(bytes), want = input, host_spare(bytes);
    PINFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), images.data(), bytes, cudaMemcpyDeviceToHost, stream.get()));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    augment_batch_host(jobs.data(), sizes.size(), 2, want.data(), host_spare.data(), bytes);
    CHECK(got == want);
    if (got != want) {
      std::size_t at = 0;
      while (got[at] == want[at]) ++at;
      MESSAGE("first difference at byte " << at << ": device " << int{got[at]} << ", host " << int{want[at]} << ", input " << int{input[at]});
    }
    CHECK(got != input);
  }
  PINFEED_CUDA_TRY(cudaGraphExecDestroy(exec));
  PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
}



TEST_CASE("gpu.augment.never_waits_for_the_device" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("augmentation jobs host synchronization")) return;
  // Queued behind a kernel that keeps the stream busy for a second, the rounds' launches (memset,
  // counts, tables, pixels, the copy back) return at once: a hidden synchronization would wait for
  // it. On the simulator too, which runs the stream's work on a thread of its own.
  const std::uint64_t per = 24 * 24 * 3, bytes = 2 * per;
  std::vector<aug_job> jobs{aug_job_for(aug_op::equalize, 0, 24, 24, 3, interpolation::nearest, std::nullopt, 0),
                            aug_job_for(aug_op::contrast, 0.3, 24, 24, 3, interpolation::nearest, std::nullopt, per),
                            aug_job_for(aug_op::rotate, 20, 24, 24, 3, interpolation::bilinear, 9.0, 0),
                            aug_job_for(aug_op::autocontrast, 0, 24, 24, 3, interpolation::nearest, std::nullopt, per),
                            hue_job(0.2, 24, 24, 3, 0),
                            aug_job_for(aug_op::invert, 0, 24, 24, 3, interpolation::nearest, std::nullopt, per)};
  device_buffer images(bytes), spare(bytes), scratch(aug_scratch_bytes(2)), d_jobs(jobs.size() * sizeof(aug_job));
  test::upload(d_jobs.data(), jobs.data(), jobs.size() * sizeof(aug_job));
  const auto input = test::aug_image(bytes, 77);
  const cuda_stream stream = cuda_stream::create();
  const auto run = [&] {
    augment_batch_device(reinterpret_cast<const aug_job*>(d_jobs.data()), jobs.data(), 2, 3, reinterpret_cast<std::uint8_t*>(images.data()),
                         reinterpret_cast<std::uint8_t*>(spare.data()), bytes, scratch.data(), scratch.size(), stream.get());
  };
  test::upload(images.data(), input.data(), bytes);
  run();  // warm-up: modules loaded
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  test::upload(images.data(), input.data(), bytes);
  const cuda_event busy_done = cuda_event::create(0), done = cuda_event::create(0);
  constexpr double kBusyMs = 1000.0;
  busy_kernel_ms(kBusyMs, stream.get());
  PINFEED_CUDA_TRY(cudaEventRecord(busy_done.get(), stream.get()));
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const double call_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(cudaEventQuery(busy_done.get()) == cudaErrorNotReady);
  CHECK(call_ms < kBusyMs);
  PINFEED_CUDA_TRY(cudaEventRecord(done.get(), stream.get()));
  PINFEED_CUDA_TRY(cudaEventSynchronize(done.get()));
  std::vector<std::uint8_t> got(bytes), want = input, host_spare(bytes);
  PINFEED_CUDA_TRY(cudaMemcpy(got.data(), images.data(), bytes, cudaMemcpyDeviceToHost));
  augment_batch_host(jobs.data(), 2, 3, want.data(), host_spare.data(), bytes);
  CHECK(got == want);
}

TEST_CASE("gpu.augment.erase_on_float_images_equals_the_host_in_both_layouts_and_in_a_graph" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("erase on float images")) return;
  // random_erasing after normalize: a batch of mixed sizes, boxes of noise (streams read from odd
  // words on) and of values, a sample with none; HWC and CHW; captured once and replayed.
  const std::vector<std::array<std::uint32_t, 3>> sizes{{24, 24, 3}, {17, 31, 1}, {40, 23, 3}, {5, 7, 3}};
  const std::uint64_t per = 40 * 31 * 3, floats = per * sizes.size();
  std::vector<aug_job> jobs;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    const std::uint32_t h = sizes[j][0], w = sizes[j][1];
    const int c = static_cast<int>(sizes[j][2]);
    const std::uint32_t box[4] = {h / 4, w / 3, h - h / 4 - 1, w / 2};
    philox_stream noise(77, 1, j, 101);
    for (std::size_t k = 0; k < j; ++k) (void)noise.next_u32();
    const double value[3] = {-1.75, 0.5, 2.25};
    if (j == 3) jobs.push_back(aug_job_of(aug_op::identity, 0, h, w, c, interpolation::nearest, std::nullopt, j * per));
    else jobs.push_back(j == 1 ? erase_job(box, value, h, w, c, j * per) : erase_noise_job(box, noise, h, w, c, j * per));
  }
  device_buffer images(floats * sizeof(float)), d_jobs(jobs.size() * sizeof(aug_job));
  test::upload(d_jobs.data(), jobs.data(), jobs.size() * sizeof(aug_job));
  const cuda_stream stream = cuda_stream::create();
  for (const mix_layout layout : {mix_layout::hwc, mix_layout::chw}) {
    CAPTURE(static_cast<int>(layout));
    cudaGraph_t graph = nullptr;
    PINFEED_CUDA_TRY(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    erase_float_device(reinterpret_cast<const aug_job*>(d_jobs.data()), jobs.data(), jobs.size(), reinterpret_cast<float*>(images.data()),
                       floats, layout, stream.get());
    PINFEED_CUDA_TRY(cudaStreamEndCapture(stream.get(), &graph));
    cudaGraphExec_t exec = nullptr;
    PINFEED_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      std::vector<float> input(floats);
      philox_stream r(5, static_cast<std::uint32_t>(replay), 0);
      for (auto& v : input) v = r.uniform() - 0.5f;
      test::upload(images.data(), input.data(), floats * sizeof(float));
      PINFEED_CUDA_TRY(cudaGraphLaunch(exec, stream.get()));
      std::vector<float> got(floats), want = input;
      PINFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), images.data(), floats * sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
      PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
      erase_float_host(jobs.data(), jobs.size(), want.data(), floats, layout);
      CHECK(std::memcmp(got.data(), want.data(), floats * sizeof(float)) == 0);
      std::size_t changed = 0;
      for (std::size_t i = 0; i < floats; ++i) changed += std::memcmp(&got[i], &input[i], sizeof(float)) != 0 ? 1 : 0;
      CHECK(changed > 500);  // three boxes of about a third of their images each
    }
    PINFEED_CUDA_TRY(cudaGraphExecDestroy(exec));
    PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
  }
}
