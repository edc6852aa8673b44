#pragma once
// Many ranks on one node (`pinfeed bench node --ranks N`): N local ranks of `pinfeed run` started
// together on this host, as a launcher would (LOCAL_RANK / LOCAL_WORLD_SIZE, RANK / WORLD_SIZE),
// for three settings side by side in one run: every rank on auto with the node plan, every rank on
// auto at the full TBB cap (PINFEED_NODE_PLAN=off: what pinfeed did before it had a plan), and
// every fixed split of workers per rank (the best one reported).

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pinfeed::bench {

struct node_bench_options {
  std::size_t ranks = 2;                ///< local ranks started together
  std::uint64_t samples = 4096;         ///< synthetic images of the whole dataset (each rank takes its shard)
  std::size_t height = 1024, width = 1024;
  std::string transforms = "crop(256),mask(0.25),ycbcr,scale";  ///< the article's pipeline (CPU-bound)
  std::size_t batch = 32;
  int rounds = 3;                       ///< every setting once a round, interleaved; a row's figure is its median
  std::vector<std::size_t> fixed;       ///< the fixed workers per rank tried; empty: 1 to the hardware threads / ranks
  std::string tool;                     ///< the pinfeed executable (empty: this one, /proc/self/exe)
};

/// JSON lines: first {setting: many_workers}: 64 fixed workers on a source that waits 20 ms per
/// sample (no CPU) against the 3,200 samples/s that latency allows, and whether their batches equal
/// those of 8 workers; then one row per setting {bench: node, ranks, setting: plan|tbb_cap|fixed, workers (fixed)
/// or rank_workers (what each rank ran on auto), node_images_per_s (all ranks' images / the wall time
/// from the first start to the last exit), rounds_images_per_s}, then a summary {plan_over_tbb_cap,
/// plan_over_best_fixed, best_fixed_workers}, each with the host fields. Throws std::runtime_error
/// naming the rank, the setting and its output when a rank fails.
void run_node_bench(const node_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
