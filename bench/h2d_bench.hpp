#pragma once
// Host-to-device and ring benchmarks (`pinfeed bench h2d`).

#include <cstddef>
#include <ostream>

namespace pinfeed::bench {

struct h2d_options {
  std::size_t batch_bytes = 32u << 20;  ///< bytes per batch (default 32 MiB)
  std::size_t sample_bytes = 1u << 20;  ///< bytes per sample (batch = batch_bytes / sample_bytes samples)
  std::size_t batches = 64;             ///< batches per measurement
  std::size_t workers = 2;
  std::size_t prefetch = 4;
  int repeats = 5;                      ///< measurements; the median is reported
};

/// Runs the benchmark and writes one JSON object per line to `out`:
///  - CPU (always): "bare_memcpy" - memcpy of each sample into the slots of a same-sized arena by the
///    same number of threads, no ring; "ring" - the same bytes through a loader (workers, slot
///    states, in-order delivery); "ring_overhead" = ring time / bare time.
///  - GPU (when a device is usable): cudaMemcpy H2D from pageable and from pinned memory, and the
///    loader's ring with its copy engine (end to end GB/s).
void run_h2d(const h2d_options& options, std::ostream& out);

}  // namespace pinfeed::bench
