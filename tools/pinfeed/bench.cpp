// pinfeed bench: the benchmarks, JSON lines on stdout (bench/).
#include <iostream>

#include "commands.hpp"

#if PINFEED_TOOL_BENCH
#include "augment_bench.hpp"
#include "autotune_bench.hpp"
#include "decode_bench.hpp"
#include "doctor_bench.hpp"
#include "h2d_bench.hpp"
#include "node_bench.hpp"
#include "pipeline_bench.hpp"
#include "remote_bench.hpp"
#include "sampler_bench.hpp"
#endif

namespace pinfeed::tool {

#if PINFEED_TOOL_BENCH
namespace {

/// Registers `sub` to run `bench(options, std::cout)`, asking for `workers` threads.
template <class Options>
void registered(command_list& out, CLI::App* sub, Options& o, void (*bench)(const Options&, std::ostream&),
                std::size_t Options::*workers = nullptr) {
  out.push_back({sub, [&o, bench] { bench(o, std::cout); return 0; },
                 [&o, workers] { return workers != nullptr ? o.*workers : std::size_t{0}; }});
}

/// The options of the benchmarks that time epochs over the generated JPEG dataset.
template <class Options>
void add_dataset_options(CLI::App* cmd, Options& o) {
  cmd->add_option("--data", o.data_dir, "where the generated JPEG dataset is kept");
  cmd->add_option("--images", o.images, "JPEGs in the dataset")->check(CLI::PositiveNumber);
  cmd->add_option("-w,--workers", o.workers, "worker threads (0: one per hardware thread)");
  cmd->add_option("-b,--batch", o.batch, "batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--repeats", o.repeats, "epochs timed (median)")->check(CLI::PositiveNumber);
}

void add_h2d(CLI::App* bench, command_list& out) {
  static bench::h2d_options ho;
  auto* h2d = bench->add_subcommand("h2d", "pageable vs pinned vs ring copy bandwidth; ring overhead vs bare memcpy");
  h2d->add_option("--batch-bytes", ho.batch_bytes, "bytes per batch")->check(CLI::PositiveNumber);
  h2d->add_option("--sample-bytes", ho.sample_bytes, "bytes per sample")->check(CLI::PositiveNumber);
  h2d->add_option("--batches", ho.batches, "batches per measurement")->check(CLI::PositiveNumber);
  h2d->add_option("-w,--workers", ho.workers, "worker threads")->check(CLI::PositiveNumber);
  h2d->add_option("--prefetch", ho.prefetch, "batches produced ahead")->check(CLI::PositiveNumber);
  h2d->add_option("--repeats", ho.repeats, "measurements (median reported)")->check(CLI::PositiveNumber);
  registered(out, h2d, ho, &bench::run_h2d, &bench::h2d_options::workers);
}

void add_sampler(CLI::App* bench, command_list& out) {
  static bench::sampler_bench_options so;
  auto* s = bench->add_subcommand("sampler", "balanced sampler: naive loop, single, batched, graph, label-read floor");
  s->add_option("--sizes", so.sizes, "N values (K = N/10)");
  s->add_option("--max-cpu-n", so.max_cpu_n, "largest N run on the CPU");
  s->add_option("-B,--rows", so.rows, "rows of the batched runs")->check(CLI::PositiveNumber);
  s->add_option("-D,--features", so.d, "feature floats gathered per pick");
  s->add_option("--device", so.device, "cpu, cuda or all");
  s->add_option("--repeats", so.repeats, "timed samples (median, p10, p90)")->check(CLI::PositiveNumber);
  s->add_option("--min-sample-ms", so.min_sample_ms, "each timed sample lasts at least this long");
  s->add_flag("--temp-only", so.temp_only, "only the GPU call's temp storage, B in --temp-rows by N in --sizes (queries, nothing runs)");
  s->add_option("--temp-rows", so.temp_rows, "B values of --temp-only");
  s->add_option("--simd", so.simd, "SIMD levels of the CPU rows, one after another: scalar, avx2, avx512 or all");
  registered(out, s, so, &bench::run_sampler);
}

void add_pipeline(CLI::App* bench, command_list& out) {
  static bench::pipeline_bench_options po;
  auto* p = bench->add_subcommand("pipeline", "images/s: the article's synthetic pipeline, JPEG folder and shards (rrc+flip)");
  add_dataset_options(p, po);
  p->add_option("--synthetic-samples", po.synthetic_samples, "synthetic images per epoch")->check(CLI::PositiveNumber);
  p->add_option("--simd", po.simd, "SIMD levels to measure at, one after another: scalar, avx2, avx512 or all");
  registered(out, p, po, &bench::run_pipeline, &bench::pipeline_bench_options::workers);
}

void add_remote(CLI::App* bench, command_list& out) {
  static bench::remote_bench_options rbo;
  auto* r = bench->add_subcommand("remote", "remote shards: local files vs loopback nginx vs a proxy adding latency");
  add_dataset_options(r, rbo);
  r->add_option("--shard-mb", rbo.shard_mb, "target shard size in MiB")->check(CLI::PositiveNumber);
  r->add_option("--latency-ms", rbo.latency_ms, "latency the proxy adds to every request")->check(CLI::NonNegativeNumber);
  r->add_option("--requests-in-flight", rbo.requests_in_flight, "remote reader: requests at once (0: its default)");
  r->add_option("--read-ahead", rbo.read_ahead, "remote reader: samples read ahead (0: its default)");
  r->add_option("--window-shards", rbo.window_shards, "whole-shard rows: shards shuffled together (0: the remote readers' default)")
      ->check(CLI::NonNegativeNumber);
  r->add_option("--cache-mb", rbo.cache_mb, "whole-shard rows: cache size (0: three windows of the window, or of 4 shards)")
      ->check(CLI::NonNegativeNumber);
  r->add_flag("!--preempting-servers", rbo.batch_servers,
              "run nginx and the proxy with the default scheduling policy, not SCHED_BATCH");
  r->add_flag("!--preempting-fetch", rbo.batch_fetch,
              "run the readers' transfer threads with the default scheduling policy (batch_scheduling off)");
  registered(out, r, rbo, &bench::run_remote, &bench::remote_bench_options::workers);
}

void add_doctor_bench(CLI::App* bench, command_list& out) {
  static bench::doctor_bench_options dbo;
  auto* d = bench->add_subcommand("doctor", "the doctor's overhead: pinfeed run's loop vs the doctor's L0, and the ladder's time");
  d->add_option("--transforms", dbo.transforms, "pipeline on the 1024x1024 synthetic source");
  d->add_option("--samples", dbo.samples, "synthetic images per epoch")->check(CLI::PositiveNumber);
  d->add_option("-b,--batch", dbo.batch, "batch size")->check(CLI::PositiveNumber);
  d->add_option("-w,--workers", dbo.workers, "worker threads (0: this process's cores in the node plan)");
  d->add_option("--seconds", dbo.seconds, "timed seconds per measurement")->check(CLI::PositiveNumber);
  d->add_option("--repeats", dbo.repeats, "measurements of each (medians compared)")->check(CLI::PositiveNumber);
  d->add_flag("!--no-ladder", dbo.ladder, "skip timing the whole ladder");
  registered(out, d, dbo, &bench::run_doctor_bench, &bench::doctor_bench_options::workers);
}

void add_autotune(CLI::App* bench, command_list& out) {
  static bench::autotune_bench_options ao;
  auto* a = bench->add_subcommand("autotune", "workers and prefetch auto vs the best of a grid: synthetic, JPEG folder, remote shards");
  a->add_option("--data", ao.data_dir, "dataset directory (generated once, kept)");
  a->add_option("--images", ao.images, "JPEGs in the folder and the shards")->check(CLI::PositiveNumber);
  a->add_option("--synthetic-samples", ao.synthetic_samples, "synthetic images per epoch")->check(CLI::PositiveNumber);
  a->add_option("-b,--batch", ao.batch, "batch size")->check(CLI::PositiveNumber);
  a->add_option("--epochs", ao.epochs, "timed epochs per run, after one untimed")->check(CLI::PositiveNumber);
  a->add_option("--rounds", ao.rounds, "every setting once a round (median reported)")->check(CLI::PositiveNumber);
  a->add_option("--latency-ms", ao.latency_ms, "latency added to every remote request")->check(CLI::NonNegativeNumber);
  a->add_option("--workers", ao.workers, "the grid's workers (default: 1 to the hardware threads)")->check(CLI::PositiveNumber)->delimiter(',');
  a->add_option("--prefetch", ao.prefetch, "the grid's prefetch values")->check(CLI::PositiveNumber)->delimiter(',');
  a->add_option("--requests-in-flight", ao.in_flight, "the remote grid's requests in flight")->check(CLI::Range(1, 1024))->delimiter(',');
  a->add_option("--workloads", ao.workloads, "synthetic, jpeg_folder, remote")->delimiter(',');
  registered(out, a, ao, &bench::run_autotune);
}

void add_node(CLI::App* bench, command_list& out) {
  static bench::node_bench_options no;
  auto* n = bench->add_subcommand("node", "N local ranks on this host: auto with the node plan vs auto at TBB's cap vs fixed splits");
  n->add_option("--ranks", no.ranks, "local ranks started together")->check(CLI::Range(std::size_t{1}, std::size_t{256}));
  n->add_option("--samples", no.samples, "synthetic images of the dataset (shared among the ranks)")->check(CLI::PositiveNumber);
  n->add_option("--height", no.height, "image height")->check(CLI::PositiveNumber);
  n->add_option("--width", no.width, "image width")->check(CLI::PositiveNumber);
  n->add_option("-b,--batch", no.batch, "batch size")->check(CLI::PositiveNumber);
  n->add_option("--transforms", no.transforms, "per-sample pipeline of every rank (empty: none)");
  n->add_option("--rounds", no.rounds, "every setting once a round (median reported)")->check(CLI::PositiveNumber);
  n->add_option("--fixed", no.fixed, "fixed workers per rank to try (default: 1 to hardware threads / ranks)")
      ->check(CLI::PositiveNumber)->delimiter(',');
  registered(out, n, no, &bench::run_node_bench);
}

void add_decode(CLI::App* bench, command_list& out) {
  static bench::decode_bench_options deo;
  auto* d = bench->add_subcommand("decode", "JPEG: the host path's CPU time vs the host half of hybrid decoding, and bytes per image into the slot");
  d->add_option("--photos", deo.photos_dir, "photos to cut 500x375 images from (scripts/fetch-photos.sh DIR)");
  d->add_option("--images", deo.images, "images per quality")->check(CLI::PositiveNumber);
  d->add_option("--qualities", deo.qualities, "JPEG qualities")->check(CLI::Range(1, 100))->delimiter(',');
  d->add_option("--repeats", deo.repeats, "timed passes (median)")->check(CLI::PositiveNumber);
  registered(out, d, deo, &bench::run_decode_bench);
}

void add_augment(CLI::App* bench, command_list& out) {
  static bench::augment_bench_options ao;
  auto* a = bench->add_subcommand("augment", "each augmentation op's microseconds per 224x224 image, and a recipe's images/s on JPEGs");
  add_dataset_options(a, ao);
  a->add_option("--photos", ao.photos_dir, "photos to cut the 224x224 image from (scripts/fetch-photos.sh DIR)");
  a->add_option("--ops", ao.ops, "the op spellings to time (default: every op)")->delimiter(';');
  a->add_option("--recipe", ao.recipe, "the pipeline timed over the JPEG dataset");
  a->add_flag("!--no-recipe", ao.run_recipe, "time the ops only");
  a->add_option("--seconds", ao.seconds, "seconds per op and round")->check(CLI::PositiveNumber);
  a->add_option("--device", ao.device,
                "cpu (default: the host ops, one thread) or cuda (the device ops on batches, and the recipe decoded and "
                "augmented on the GPU against the host; says it skipped without a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  a->add_option("--device-recipe", ao.device_recipe, "with --device cuda: the recipe timed both ways");
  registered(out, a, ao, &bench::run_augment_bench, &bench::augment_bench_options::workers);
}

}  // namespace

void add_bench(CLI::App& app, command_list& out) {
  auto* bench = app.add_subcommand("bench", "benchmarks (JSON lines on stdout)");
  bench->require_subcommand(1);
  add_h2d(bench, out);
  add_sampler(bench, out);
  add_pipeline(bench, out);
  add_remote(bench, out);
  add_doctor_bench(bench, out);
  add_autotune(bench, out);
  add_node(bench, out);
  add_decode(bench, out);
  add_augment(bench, out);
}
#else
void add_bench(CLI::App&, command_list&) {}
#endif

}  // namespace pinfeed::tool
