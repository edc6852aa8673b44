#pragma once
// The balanced sampler benchmark (`pinfeed bench sampler`): the article's table.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct sampler_bench_options {
  std::vector<std::int64_t> sizes{1000, 10000, 100000, 1000000, 10000000};  ///< N
  std::int64_t max_cpu_n = 1000000;  ///< the CPU runs sizes up to this N
  std::int64_t rows = 32;            ///< B of the batched runs (single-row runs use B = 1)
  std::int64_t d = 16;               ///< feature floats gathered per pick
  std::string device = "all";        ///< cpu, cuda or all
  int repeats = 7;
  double min_sample_ms = 20.0;       ///< each timed sample repeats the call until it takes this long
  /// SIMD levels the CPU rows are measured at, one after another (scalar, avx2, avx512, all);
  /// empty: the level in use. Rows carry the level as "simd".
  std::vector<std::string> simd;
  /// Only the GPU sampler's temp-storage queries, for every B in temp_rows and N in sizes (no
  /// kernel runs, so a GPU simulator answers them too).
  bool temp_only = false;
  std::vector<std::int64_t> temp_rows{1, 32, 256, 4096, 65535};
};

/// Writes JSON lines {op, impl, device, B, N, K, D, median_ms, p10_ms, p90_ms, samples_per_s}
/// (samples = rows sampled) for: naive_loop, static_single (B = 1), batched (B = rows), graph
/// (GPU: the batched call replayed from a CUDA graph), floor (one plain pass reading the labels)
/// and, on the GPU where the CCCL has it, cub_topk (cub::DeviceTopK selecting K of the same random
/// keys per row; otherwise a row saying why it is skipped). GPU rows of pinfeed's calls carry
/// temp_bytes, the temp storage the call queried. With temp_only: rows {op: "sampler_temp", B, N, K,
/// temp_bytes, multiprocessors} instead, K = N/10 capped so that B * K stays below 2^31.
void run_sampler(const sampler_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
