#include "h2d_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/task_arena.h>

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/detail/parallel.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Median seconds of `repeats` runs of `fn`.
double median_seconds(int repeats, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void emit(std::ostream& out, const char* impl, const char* device, double bytes, double seconds,
          const h2d_options& o) {
  nlohmann::json j{{"bench", "h2d"},        {"impl", impl},
                   {"device", device},      {"batch_bytes", o.batch_bytes},
                   {"sample_bytes", o.sample_bytes}, {"workers", o.workers},
                   {"batches", o.batches},  {"median_s", seconds},
                   {"gb_per_s", bytes / seconds / 1e9}};
  out << j.dump() << std::endl;
}

/// The batches' memcpy work on the workers' threads into a ring of slots, without a loader.
double bare_memcpy_seconds(const h2d_options& o, std::size_t per_batch, const std::vector<std::byte>& sample_data) {
  const std::size_t batch_bytes = per_batch * o.sample_bytes;
  const std::size_t slots = o.prefetch + 1;
  host_buffer arena(slots * batch_bytes, false);
  tbb::task_arena threads(static_cast<int>(o.workers), 0);
  return median_seconds(o.repeats, [&] {
    threads.execute([&] {
      for (std::size_t b = 0; b < o.batches; ++b) {
        std::byte* slot = arena.data() + (b % slots) * batch_bytes;
        pinfeed::detail::parallel_for(0, per_batch, [&](std::size_t j) {
          std::memcpy(slot + j * o.sample_bytes, sample_data.data(), o.sample_bytes);
        });
      }
    });
  });
}

/// The same work through a loader's ring onto `device`: median seconds of an epoch.
double ring_seconds(const h2d_options& o, std::shared_ptr<source> src, std::size_t per_batch,
                    const std::string& device) {
  loader_options lo;
  lo.batch_size = per_batch;
  lo.workers = o.workers;
  lo.prefetch = o.prefetch;
  lo.device = device;
  loader l(std::move(src), lo);
  return median_seconds(o.repeats, [&] {
    l.start_epoch(0);
    while (auto b = l.next()) {
    }
    if (l.device().is_cuda()) PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));
  });
}

/// cudaMemcpy of a batch from pageable and from pinned memory, then the ring onto the GPU.
void run_h2d_cuda(const h2d_options& o, std::ostream& out, const std::shared_ptr<source>& src, std::size_t per_batch) {
  const std::size_t batch_bytes = per_batch * o.sample_bytes;
  const double total = static_cast<double>(batch_bytes) * o.batches;
  const int dev = resolve_device("auto").index;
  PINFEED_CUDA_TRY(cudaSetDevice(dev));
  device_buffer d(batch_bytes);
  std::vector<std::byte> pageable(batch_bytes, std::byte{1});
  host_buffer pinned(batch_bytes, true);
  std::memset(pinned.data(), 1, batch_bytes);
  auto copy_loop = [&](const void* src_ptr) {
    return median_seconds(o.repeats, [&] {
      for (std::size_t b = 0; b < o.batches; ++b)
        PINFEED_CUDA_TRY(cudaMemcpy(d.data(), src_ptr, batch_bytes, cudaMemcpyHostToDevice));
    });
  };
  emit(out, "cudaMemcpy_pageable", "cuda", total, copy_loop(pageable.data()), o);
  emit(out, "cudaMemcpy_pinned", "cuda", total, copy_loop(pinned.data()), o);
  emit(out, "ring", "cuda", total, ring_seconds(o, src, per_batch, "cuda:" + std::to_string(dev)), o);
}

}  // namespace

void run_h2d(const h2d_options& o, std::ostream& out) {
  if (o.sample_bytes == 0 || o.batch_bytes < o.sample_bytes)
    throw std::invalid_argument("h2d bench: need 0 < sample_bytes <= batch_bytes");
  const std::size_t per_batch = o.batch_bytes / o.sample_bytes;
  const std::size_t batch_bytes = per_batch * o.sample_bytes;
  const double total = static_cast<double>(batch_bytes) * o.batches;
  std::vector<std::byte> sample_data(o.sample_bytes);
  fill_random_bytes(philox_stream(1, 0, 0), sample_data);

  // CPU: the same memcpy work with and without the ring.
  const double bare = bare_memcpy_seconds(o, per_batch, sample_data);
  emit(out, "bare_memcpy", "cpu", total, bare, o);
  auto src = make_source(per_batch * o.batches, {{"data", dtype::u8, {static_cast<std::int64_t>(o.sample_bytes)}}},
                         [&](sample& s) { std::memcpy(s.bytes(0).data(), sample_data.data(), o.sample_bytes); });
  const double ring = ring_seconds(o, src, per_batch, "cpu");
  emit(out, "ring", "cpu", total, ring, o);
  out << nlohmann::json{{"bench", "h2d"}, {"impl", "ring_overhead"}, {"device", "cpu"},
                        {"ratio_ring_over_bare", ring / bare}}
             .dump()
      << std::endl;

  if (!cuda_devices().usable) {
    out << nlohmann::json{{"bench", "h2d"}, {"skipped", "gpu"}, {"reason", cuda_devices().reason}}.dump()
        << std::endl;
    return;
  }
  run_h2d_cuda(o, out, src, per_batch);
}

}  // namespace pinfeed::bench
