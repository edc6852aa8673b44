// MixUp and CutMix on the device against the host's (pinfeed/ops/mix.hpp), bit for bit, over
// shapes, layouts, batch sizes and draws; and the calls captured into a CUDA graph and replayed.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "pinfeed/ops/mix.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/random.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

namespace {

struct shape {
  std::size_t count;
  std::int64_t h, w, c, classes;
};

/// A batch's images and one-hot labels, from `seed`.
void fill_batch(const shape& s, std::uint64_t seed, std::vector<float>& images, std::vector<float>& labels) {
  philox_stream r(seed, 0, 0);
  images.resize(s.count * static_cast<std::size_t>(s.h * s.w * s.c));
  for (auto& v : images) v = static_cast<float>(r.next_u32() >> 8) / 16777216.0f * 4.0f - 2.0f;
  labels.assign(s.count * static_cast<std::size_t>(s.classes), 0.0f);
  for (std::size_t i = 0; i < s.count; ++i) labels[i * static_cast<std::size_t>(s.classes) + r.below(static_cast<std::uint32_t>(s.classes))] = 1.0f;
}

}  // namespace

TEST_CASE("gpu.mix.device_equals_host_bit_for_bit" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("mixup/cutmix CPU == GPU")) return;
  // Odd sides and a grid-stride loop of several passes (the simulator has 4 SMs: 8 blocks each at
  // most), one sample (its own partner), and batches of each op from mixup_cutmix's draws.
  std::vector<shape> shapes{{5, 37, 29, 3, 10}, {1, 9, 7, 3, 4}, {3, 64, 80, 1, 2}};
  if (!test::small_gpu_shapes()) shapes.push_back({64, 224, 224, 3, 1000});
  int compared = 0, mixups = 0, cutmixes = 0;
  for (const shape& s : shapes)
    for (const mix_layout layout : {mix_layout::hwc, mix_layout::chw})
      for (std::uint64_t b = 0; b < 4; ++b) {
        CAPTURE(s.count);
        CAPTURE(s.h);
        CAPTURE(s.w);
        CAPTURE(static_cast<int>(layout));
        CAPTURE(b);
        std::vector<float> images, labels;
        fill_batch(s, 10 + b, images, labels);
        const mix_params p = draw_mix({mix_op::mixup_cutmix, 0.8, 1.0}, 3, 1, b + 5 * static_cast<std::uint64_t>(s.h), s.h, s.w);
        (p.op == mix_op::mixup ? mixups : cutmixes) += 1;
        device_buffer d_images(images.size() * sizeof(float)), d_labels(labels.size() * sizeof(float));
        test::upload(d_images.data(), images.data(), images.size() * sizeof(float));
        test::upload(d_labels.data(), labels.data(), labels.size() * sizeof(float));
        std::vector<float> host_images = images, host_labels = labels;
        mix_batch_host({host_images.data(), s.count, s.h, s.w, s.c, layout, host_labels.data(), s.classes}, p);
        mix_batch_device({reinterpret_cast<float*>(d_images.data()), s.count, s.h, s.w, s.c, layout,
                          reinterpret_cast<float*>(d_labels.data()), s.classes},
                         p, nullptr);
        std::vector<float> gpu_images(images.size()), gpu_labels(labels.size());
        PINFEED_CUDA_TRY(cudaMemcpy(gpu_images.data(), d_images.data(), images.size() * sizeof(float), cudaMemcpyDeviceToHost));
        PINFEED_CUDA_TRY(cudaMemcpy(gpu_labels.data(), d_labels.data(), labels.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(std::memcmp(gpu_images.data(), host_images.data(), images.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(gpu_labels.data(), host_labels.data(), labels.size() * sizeof(float)) == 0);
        // The batch changed (a mix that wrote nothing would pass the comparison above); a sample
        // alone may mix into itself unchanged.
        if (s.count > 1) CHECK((host_labels != labels || host_images != images));
        ++compared;
      }
  CHECK(compared == static_cast<int>(shapes.size()) * 8);
  CHECK(mixups > 0);
  CHECK(cutmixes > 0);
}

TEST_CASE("gpu.mix.captured_in_a_graph_and_replayed" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("mixup/cutmix graph capture")) return;
  // Both ops captured on a stream (no allocation, no synchronization: a capture would refuse them),
  // the graph launched, and the result the host's.
  const shape s{4, 16, 12, 3, 5};
  cudaStream_t stream = nullptr;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const mix_op op : {mix_op::mixup, mix_op::cutmix}) {
    CAPTURE(static_cast<int>(op));
    std::vector<float> images, labels;
    fill_batch(s, 77, images, labels);
    const mix_params p = draw_mix({op, 0.5, 0.5}, 1, 0, 3, s.h, s.w);
    device_buffer d_images(images.size() * sizeof(float)), d_labels(labels.size() * sizeof(float));
    test::upload(d_images.data(), images.data(), images.size() * sizeof(float));
    test::upload(d_labels.data(), labels.data(), labels.size() * sizeof(float));
    const mix_batch_args device_args{reinterpret_cast<float*>(d_images.data()), s.count, s.h, s.w, s.c, mix_layout::chw,
                                     reinterpret_cast<float*>(d_labels.data()), s.classes};
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    PINFEED_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    mix_batch_device(device_args, p, stream);
    PINFEED_CUDA_TRY(cudaStreamEndCapture(stream, &graph));
    PINFEED_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
    PINFEED_CUDA_TRY(cudaGraphLaunch(exec, stream));
    PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));
    std::vector<float> host_images = images, host_labels = labels;
    mix_batch_host({host_images.data(), s.count, s.h, s.w, s.c, mix_layout::chw, host_labels.data(), s.classes}, p);
    std::vector<float> gpu_images(images.size()), gpu_labels(labels.size());
    PINFEED_CUDA_TRY(cudaMemcpy(gpu_images.data(), d_images.data(), images.size() * sizeof(float), cudaMemcpyDeviceToHost));
    PINFEED_CUDA_TRY(cudaMemcpy(gpu_labels.data(), d_labels.data(), labels.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(gpu_images == host_images);
    CHECK(gpu_labels == host_labels);
    PINFEED_CUDA_TRY(cudaGraphExecDestroy(exec));
    PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
  }
  PINFEED_CUDA_TRY(cudaStreamDestroy(stream));
}
