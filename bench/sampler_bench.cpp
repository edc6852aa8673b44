#include "sampler_bench.hpp"

#include "bench_rows.hpp"
#include "baselines.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/detail/parallel.hpp"

namespace pinfeed::bench {
namespace {

struct timing {
  double median_ms, p10_ms, p90_ms;
};

/// Times `fn` (which must have finished its work when it returns): repeats samples, each running
/// fn enough times to last min_sample_ms; reports per-call percentiles.
timing measure(const sampler_bench_options& o, const std::function<void()>& fn) {
  using clock = std::chrono::steady_clock;
  fn();  // warm-up (and first-touch of the buffers)
  auto t0 = clock::now();
  fn();
  const double once = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  const int inner = std::max(1, static_cast<int>(o.min_sample_ms / std::max(once, 1e-3)));
  std::vector<double> ms;
  for (int r = 0; r < o.repeats; ++r) {
    t0 = clock::now();
    for (int i = 0; i < inner; ++i) fn();
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count() / inner);
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) { return ms[static_cast<std::size_t>(q * (ms.size() - 1) + 0.5)]; };
  return {pct(0.5), pct(0.1), pct(0.9)};
}

void emit(std::ostream& out, const char* impl, const char* device, std::int64_t b, std::int64_t n, std::int64_t k,
          std::int64_t d, const timing& t, std::size_t temp_bytes = 0) {
  nlohmann::json row = {{"op", "sampler"},           {"impl", impl},
                        {"device", device},          {"B", b},
                        {"N", n},                    {"K", k},
                        {"D", d},                    {"median_ms", t.median_ms},
                        {"p10_ms", t.p10_ms},        {"p90_ms", t.p90_ms},
                        {"samples_per_s", b * 1000.0 / t.median_ms}};
  if (temp_bytes != 0) row["temp_bytes"] = temp_bytes;
  out << with_host(row).dump() << std::endl;
}

/// The article's input: labels uniform in {0, 1} (int64), features [B, N, D] floats.
std::vector<std::int64_t> make_labels(std::int64_t count) {
  std::vector<std::int64_t> labels(static_cast<std::size_t>(count));
  philox_stream s(2024, 0, 0, 5);
  for (auto& l : labels) l = s.next_u32() & 1;
  return labels;
}

/// Host inputs and outputs. Feature buffers are page-aligned, as a framework's allocator would
/// align them (PyTorch aligns CPU tensors to 64 bytes).
struct host_case {
  std::vector<std::int64_t> labels, indices, gathered_labels;
  host_buffer features, gathered;
  std::vector<std::int32_t> valid;
  ops::sampler_args args(std::int64_t rows, std::int64_t n, std::int64_t d) {
    ops::sampler_args a;
    a.rows = rows;
    a.n = n;
    a.labels = labels.data();
    a.indices = indices.data();
    a.valid = valid.data();
    if (d > 0) {
      a.features = features.data();
      a.feature_bytes = static_cast<std::size_t>(d) * sizeof(float);
      a.gathered_features = gathered.data();
    }
    a.gathered_labels = gathered_labels.data();
    return a;
  }
};

void run_cpu(const sampler_bench_options& o, std::int64_t n, std::ostream& out) {
  const std::int64_t k = n / 10, d = o.d, rows = o.rows;
  host_case c;
  c.labels = make_labels(rows * n);
  c.features = host_buffer(static_cast<std::size_t>(rows * n * d) * sizeof(float), false);
  std::fill_n(reinterpret_cast<float*>(c.features.data()), rows * n * d, 1.0f);
  c.indices.resize(rows * k);
  c.gathered_labels.resize(rows * k);
  c.gathered = host_buffer(static_cast<std::size_t>(rows * k * d) * sizeof(float), false);
  c.valid.resize(rows);
  ops::sampler_params p;
  p.k = k;
  for (const std::int64_t b : {std::int64_t{1}, rows}) {
    const auto a = c.args(b, n, d);
    emit(out, "naive_loop", "cpu", b, n, k, d, measure(o, [&] { naive_sample_cpu(a, p); }));
    emit(out, b == 1 ? "static_single" : "batched", "cpu", b, n, k, d,
         measure(o, [&] { ops::balanced_sample_host(a, p); }));
    // One pass reading the labels, in 64 chunks on the workers (pinfeed's parallel_for, whose
    // hand-offs ThreadSanitizer sees).
    std::atomic<std::int64_t> sink{0};
    std::vector<std::int64_t> part(64);
    const auto total = static_cast<std::size_t>(b * n);
    emit(out, "floor", "cpu", b, n, k, d, measure(o, [&] {
           pinfeed::detail::parallel_for(0, part.size(), [&](std::size_t q) {
             std::int64_t acc = 0;
             for (std::size_t i = q * total / part.size(); i < (q + 1) * total / part.size(); ++i) acc += c.labels[i];
             part[q] = acc;
           });
           std::int64_t all = 0;
           for (const auto v : part) all += v;
           sink += all;
         }));
  }
}

__attribute__((unused)) void sync(cudaStream_t s) { PINFEED_CUDA_TRY(cudaStreamSynchronize(s)); }

/// The GPU sampler on `b` rows of `a`: the naive loop (where CUDA is built), one call (static or
/// batched), and the same call replayed from a CUDA graph.
void time_gpu_sampler(const sampler_bench_options& o, std::ostream& out, const ops::sampler_args& a,
                      const ops::sampler_params& p, cudaStream_t s, std::int64_t k) {
  const std::int64_t b = a.rows, n = a.n, d = o.d;
#if PINFEED_WITH_CUDA
  {
    std::size_t naive_bytes = 0;
    naive_sample_gpu(nullptr, naive_bytes, a, p, s);
    device_buffer naive_temp(naive_bytes);
    emit(out, "naive_loop", "cuda", b, n, k, d, measure(o, [&] {
           naive_sample_gpu(naive_temp.data(), naive_bytes, a, p, s);
           sync(s);
         }));
  }
#endif
  std::size_t bytes = 0;
  ops::balanced_sample_device(nullptr, bytes, a, p, s);
  device_buffer temp(bytes);
  emit(out, b == 1 ? "static_single" : "batched", "cuda", b, n, k, d, measure(o, [&] {
         ops::balanced_sample_device(temp.data(), bytes, a, p, s);
         sync(s);
       }), bytes);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PINFEED_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  ops::balanced_sample_device(temp.data(), bytes, a, p, s);
  PINFEED_CUDA_TRY(cudaStreamEndCapture(s, &graph));
  PINFEED_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  emit(out, "graph", "cuda", b, n, k, d, measure(o, [&] {
         PINFEED_CUDA_TRY(cudaGraphLaunch(exec, s));
         sync(s);
       }), bytes);
  PINFEED_CUDA_TRY(cudaGraphExecDestroy(exec));
  PINFEED_CUDA_TRY(cudaGraphDestroy(graph));
}

/// What the GPU sampler is measured against on `b` rows of `n` labels: the floor of one pass over
/// the labels and, where the CCCL has it, cub::DeviceTopK.
void time_gpu_baselines(const sampler_bench_options& o, std::ostream& out, const void* d_labels,
                        const ops::sampler_params& p, cudaStream_t s, std::int64_t b, std::int64_t n, std::int64_t k) {
  const std::int64_t d = o.d;
  // Floor: one pass reading the labels (a device-to-device copy of them reads every byte once).
  device_buffer scratch(static_cast<std::size_t>(b * n) * 8);
  const timing t = measure(o, [&] {
    PINFEED_CUDA_TRY(cudaMemcpyAsync(scratch.data(), d_labels, scratch.size(), cudaMemcpyDeviceToDevice, s));
    sync(s);
  });
  emit(out, "floor", "cuda", b, n, k, d, t);
#if PINFEED_WITH_CUDA
  // NVIDIA's own selection: cub::DeviceTopK of the same random keys, row by row (no balance,
  // no order, no gathers), where the CCCL has it.
  if (const std::string why = cub_topk_unavailable(); why.empty()) {
    cub_topk_baseline topk(b, n, k);
    emit(out, "cub_topk", "cuda", b, n, k, 0, measure(o, [&] {
           topk.run(p.seed, s);
           sync(s);
         }));
  } else {
    out << with_host({{"op", "sampler"}, {"impl", "cub_topk"}, {"device", "cuda"}, {"skipped", why}}).dump()
        << std::endl;
  }
#else
  (void)p;
#endif
}

void run_gpu(const sampler_bench_options& o, std::int64_t n, std::ostream& out) {
  const std::int64_t k = n / 10, d = o.d, rows = o.rows;
  const auto labels = make_labels(rows * n);
  device_buffer d_labels(labels.size() * 8), d_features(static_cast<std::size_t>(rows * n * d) * 4),
      d_idx(rows * k * 8), d_valid(rows * 4), d_glab(rows * k * 8), d_gathered(static_cast<std::size_t>(rows * k * d) * 4);
  PINFEED_CUDA_TRY(cudaMemcpy(d_labels.data(), labels.data(), labels.size() * 8, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemset(d_features.data(), 0, d_features.size()));
  cudaStream_t s;
  PINFEED_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ops::sampler_params p;
  p.k = k;
  for (const std::int64_t b : {std::int64_t{1}, rows}) {
    ops::sampler_args a;
    a.rows = b;
    a.n = n;
    a.labels = d_labels.data();
    a.indices = d_idx.data();
    a.valid = reinterpret_cast<std::int32_t*>(d_valid.data());
    if (d > 0) {
      a.features = d_features.data();
      a.feature_bytes = static_cast<std::size_t>(d) * 4;
      a.gathered_features = d_gathered.data();
    }
    a.gathered_labels = d_glab.data();
    time_gpu_sampler(o, out, a, p, s, k);
    time_gpu_baselines(o, out, d_labels.data(), p, s, b, n, k);
  }
  PINFEED_CUDA_TRY(cudaStreamDestroy(s));
}

/// The temp storage the GPU sampler asks for, shape by shape: a size query only, nothing runs.
void run_temp_table(const sampler_bench_options& o, std::ostream& out) {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  for (const std::int64_t b : o.temp_rows) {
    if (b < 1 || b > 65535) throw std::invalid_argument("bench sampler: rows must be in [1, 65535], got " + std::to_string(b));
    for (const std::int64_t n : o.sizes) {
      ops::sampler_args a;
      a.rows = b;
      a.n = n;
      ops::sampler_params p;
      p.k = std::min<std::int64_t>(n / 10, (std::int64_t{1} << 31) / b - 1);
      std::size_t bytes = 0;
      ops::balanced_sample_device(nullptr, bytes, a, p, nullptr);
      out << with_host({{"op", "sampler_temp"}, {"B", b}, {"N", n}, {"K", p.k}, {"temp_bytes", bytes},
                        {"multiprocessors", multiprocessor_count(device)}})
                 .dump()
          << std::endl;
    }
  }
}

}  // namespace

void run_sampler(const sampler_bench_options& o, std::ostream& out) {
  if (o.device != "cpu" && o.device != "cuda" && o.device != "all")
    throw std::invalid_argument("bench sampler: device must be cpu, cuda or all, got '" + o.device + "'");
  const bool gpu = o.device != "cpu" && cuda_devices().usable;
  if (o.device == "cuda" && !gpu)
    throw std::runtime_error("bench sampler: --device cuda but no CUDA device is usable (" + cuda_devices().reason + ")");
  if (o.temp_only) {
    if (!gpu) throw std::runtime_error("bench sampler: --temp-only queries the GPU sampler, but no CUDA device is usable (" +
                                       cuda_devices().reason + ")");
    run_temp_table(o, out);
    return;
  }
  const auto levels = simd_levels(o.simd);
  for (const std::int64_t n : o.sizes) {
    if (n < 10) throw std::invalid_argument("bench sampler: N must be >= 10, got " + std::to_string(n));
    if (o.device != "cuda" && n <= o.max_cpu_n) for_each_simd_level(levels, [&] { run_cpu(o, n, out); });
    if (gpu) run_gpu(o, n, out);
  }
  if (o.device == "all" && !gpu)
    out << with_host({{"op", "sampler"}, {"skipped", "cuda"}, {"reason", cuda_devices().reason}}).dump() << std::endl;
}

}  // namespace pinfeed::bench
