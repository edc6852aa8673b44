// pinfeed run: a loader over the pipeline the options describe, its throughput and statistics.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/npy.hpp"
#include "pipeline_options.hpp"

namespace pinfeed::tool {
namespace {

/// --cache: none, raw, decoded, steps:K or processed.
sample_cache cache_of(const run_args& a) {
  sample_cache cache;
  cache.pool = a.cache_pool;
  if (a.cache == "raw") cache.stage = cache_stage::raw;
  else if (a.cache == "decoded") cache.stage = cache_stage::decoded;
  else if (a.cache == "processed") cache.stage = cache_stage::finished;
  else if (a.cache.rfind("steps:", 0) == 0) {
    cache.stage = cache_stage::steps;
    std::size_t used = 0;
    try {
      cache.after_steps = std::stoul(a.cache.substr(6), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != a.cache.size() - 6) throw pinfeed::invalid_argument("--cache steps:K needs a number, got '" + a.cache + "'");
  } else if (a.cache != "none") {
    throw pinfeed::invalid_argument("--cache must be none, raw, decoded, steps:K or processed, got '" + a.cache + "'");
  }
  return cache;
}

/// "{rank}" in a state path stands for this process's rank, so that the ranks of one job can each
/// keep a state file.
std::string ranked(std::string path, int rank) {
  for (auto at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}"))
    path.replace(at, 6, std::to_string(rank));
  return path;
}

/// How remote shards are read, said once before the run.
void print_remote_mode(const run_args& a, const loaders::remote_counters& mode) {
  if (mode.window_shards > 0)
    std::fprintf(stderr, "run: remote shards read whole, window %u, cache %.0f MiB (%s; --shard-window 0: a range "
                 "request per sample, the exact global shuffle)\n",
                 mode.window_shards, static_cast<double>(mode.cache_bytes) / 1048576.0,
                 a.shuffle ? "shard-aware shuffle" : "in order");
  else if (a.requests_in_flight > 0)
    std::fprintf(stderr, "run: remote shards read by a range request per sample, %zu in flight\n", a.requests_in_flight);
  else
    std::fprintf(stderr, "run: remote shards read by a range request per sample, %zu to %zu in flight as the latency needs\n",
                 loaders::kMinRequestsInFlight, loaders::kMaxRequestsInFlight);
}

/// What remote reads cost, said after the run.
void print_fetch(const loaders::remote_counters& f) {
  std::fprintf(stderr, "fetch: %llu requests (%llu retries), %.1f MB (%.2fx the shards), %llu %s read ahead, workers waited %.1f ms\n",
               static_cast<unsigned long long>(f.requests), static_cast<unsigned long long>(f.retries),
               static_cast<double>(f.bytes) / 1e6,
               f.shard_bytes > 0 ? static_cast<double>(f.bytes) / static_cast<double>(f.shard_bytes) : 0.0,
               static_cast<unsigned long long>(f.read_ahead), f.window_shards > 0 ? "shards" : "samples", f.wait_ms);
  if (f.window_shards == 0)
    std::fprintf(stderr, "fetch: range reads, %llu in flight and %llu samples read ahead at the end\n",
                 static_cast<unsigned long long>(f.requests_in_flight), static_cast<unsigned long long>(f.read_ahead_depth));
  else
    std::fprintf(stderr, "fetch: whole shards (window %u, cache %.0f MiB): %llu fetched, %llu samples range-read for want of room\n",
                 f.window_shards, static_cast<double>(f.cache_bytes) / 1048576.0, static_cast<unsigned long long>(f.shards),
                 static_cast<unsigned long long>(f.streamed));
}

void print_bad_samples(const loaders::pipeline_source& counted) {
  if (counted.failures() == 0) return;
  std::fprintf(stderr, "skipped %llu bad sample%s (%llu slot%s filled by a stand-in):\n",
               static_cast<unsigned long long>(counted.failures()), counted.failures() == 1 ? "" : "s",
               static_cast<unsigned long long>(counted.replaced()), counted.replaced() == 1 ? "" : "s");
  for (const auto& f : counted.failed()) std::fprintf(stderr, "  %s\n", f.c_str());
}

/// Where the samples were decoded (readers of encoded files).
void print_decoded(const loaders::pipeline_source& counted) {
  if (!counted.reader()->stores_encoded()) return;
  const auto d = counted.decoded();
  std::string where = to_string(counted.decode_path());
  if (counted.decode_path() == loaders::decode_place::device_inexact)
    where = d.nvjpeg_used() ? "device with nvJPEG " + d.nvjpeg + " (inexact pixels)" : "device, exactly (nvJPEG " + d.nvjpeg + ")";
  std::fprintf(stderr, "decode: on the %s; %s\n", where.c_str(), d.to_string().c_str());
}

/// Where the steps after the decode ran, and why not on the device where they could not.
void print_augmented(const loaders::pipeline_source& counted) {
  if (counted.augment_path() == loaders::augment_place::device || counted.finishes_on_device()) {
    std::string what = counted.device_steps().to_string();
    if (counted.finishes_on_device()) {  // the fused tail and the batch op after the device's decode or steps
      what += std::string(what.empty() ? "" : ", then ") + "the fused tail";
      if (!counted.float_steps().empty()) what += ", " + counted.float_steps().to_string();
      if (counted.batch_op()) what += " and " + counted.steps().steps().back()->name();
    }
    std::fprintf(stderr, "augment: on the device: %s\n", what.c_str());
  } else if (!counted.augment_refusal().empty() &&  // (auto over a host decode keeps them there: no news)
             (counted.options().augment_on != loaders::augment_place::automatic ||
              counted.decode_path() != loaders::decode_place::host)) {
    std::fprintf(stderr, "augment: on the host (not the device: %s)\n", counted.augment_refusal().c_str());
  }
}

/// One epoch's share of a run: its batches and samples, and the time from its start to its last
/// batch taken (the first epoch's includes the workers' first images; a cache fills in it).
struct epoch_figures {
  std::uint32_t epoch = 0;
  std::uint64_t batches = 0, samples = 0;
  double seconds = 0;
  [[nodiscard]] double samples_per_s() const { return seconds > 0 ? static_cast<double>(samples) / seconds : 0.0; }
};

void write_json(const run_args& a, const loader& l, const stats_snapshot& st, const loaders::pipeline_source& counted,
                const std::optional<loaders::remote_counters>& fetched, const std::vector<epoch_figures>& epochs) {
  nlohmann::json j{{"samples_per_s", st.samples_per_s()}, {"mb_per_s", st.megabytes_per_s()},
                   {"consumer_wait_fraction", st.consumer_wait_fraction()}, {"batches", st.batches},
                   {"samples", st.samples}, {"errors", st.errors}, {"bad_samples", counted.failures()},
                   {"replaced", counted.replaced()}, {"wall_s", st.wall_ns / 1e9},
                   {"host_bytes", st.host_bytes}, {"device_bytes", st.device_bytes},
                   {"device", l.device().to_string()}, {"workers", l.workers()}, {"prefetch", l.prefetch()},
                   {"tuning", nlohmann::json::parse(l.tuning().to_json())}};
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto& t = st.stages[i];
    j["stages"][std::string(to_string(static_cast<stage>(i)))] = {
        {"count", t.count}, {"total_ms", t.total_ms()}, {"mean_ms", t.mean_ms()}, {"max_ms", t.max_ns / 1e6}};
  }
  j["epochs"] = nlohmann::json::array();
  for (const epoch_figures& f : epochs)
    j["epochs"].push_back({{"epoch", f.epoch}, {"batches", f.batches}, {"samples", f.samples}, {"seconds", f.seconds},
                           {"samples_per_s", f.samples_per_s()}});
  if (fetched) j["fetch"] = nlohmann::json::parse(loaders::to_json(*fetched));
  if (counted.reader()->stores_encoded()) {
    const auto d = counted.decoded();
    j["decode"] = {{"path", to_string(counted.decode_path())}, {"device", d.device}, {"host", d.host}, {"inexact", d.inexact}};
    if (!d.nvjpeg.empty()) j["decode"]["nvjpeg"] = d.nvjpeg;
    for (const auto& [reason, n] : d.host_by_reason) j["decode"]["host_by_reason"][reason] = n;
  }
  j["augment"] = {{"path", to_string(counted.augment_path())},
                  {"device_steps", counted.device_steps().to_string()},
                  {"tail_on_device", counted.finishes_on_device()}};
  if (!counted.augment_refusal().empty()) j["augment"]["not_on_device"] = counted.augment_refusal();
  pinfeed::detail::write_whole_file(a.json, j.dump(2) + "\n", "cannot write '" + a.json + "'");
}

/// --save-batches: each field of the batch as DIR/<number, 6 digits>.<field>.npy ([samples, shape...],
/// its dtype; a device batch copied to the host first).
void save_batch(const std::string& dir, std::uint64_t number, const batch& b, const loader& l) {
  char name[32];
  std::snprintf(name, sizeof name, "%06llu", static_cast<unsigned long long>(number));
  for (std::size_t i = 0; i < b.field_count(); ++i) {
    const tensor_view f = b.field(i);
    npy_array a;
    a.type = f.type;
    a.shape.assign(f.shape.begin(), f.shape.begin() + static_cast<std::ptrdiff_t>(f.shape.size()));
    a.data.resize(f.bytes());
    if (f.location.is_cuda()) {
      PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));
      PINFEED_CUDA_TRY(cudaMemcpy(a.data.data(), f.data, f.bytes(), cudaMemcpyDeviceToHost));
    } else if (f.bytes() > 0) {
      std::memcpy(a.data.data(), f.data, f.bytes());
    }
    write_npy(dir + "/" + name + "." + b.spec(i).name + ".npy", a);
  }
}

/// The batches of the epochs asked for (from a resumed state's epoch), each through the consumer;
/// checksum and index lines printed and batches saved as asked. Returns each epoch's figures.
std::vector<epoch_figures> consume_epochs(const run_args& a, loader& l, std::uint32_t first_epoch, batch_consumer& consume) {
  std::vector<epoch_figures> epochs;
  std::uint64_t delivered = 0;
  const std::string save_dir = a.save_batches.empty() ? std::string() : ranked(a.save_batches, l.order().rank());
  if (!save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(save_dir, ec);
    if (ec || !std::filesystem::is_directory(save_dir))
      throw pinfeed::invalid_argument("--save-batches: cannot make the folder '" + save_dir + "'" + (ec ? ": " + ec.message() : ""));
  }
  for (std::uint32_t e = first_epoch; e < a.epochs && (a.limit == 0 || delivered < a.limit); ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    if (e != first_epoch || a.resume.empty()) l.start_epoch(e);
    epoch_figures& f = epochs.emplace_back();
    f.epoch = e;
    while (a.limit == 0 || delivered < a.limit) {
      auto b = l.next();
      if (!b) break;
      ++delivered;
      ++f.batches;
      f.samples += b->size();
      consume(step_view(*b));
      if (!save_dir.empty()) save_batch(save_dir, delivered - 1, *b, l);
      if (a.checksums) std::printf("%s\n", checksum_line(*b).c_str());
      if (a.print_indices) {
        std::printf("indices %u:%llu", b->epoch(), static_cast<unsigned long long>(b->index()));
        for (auto i : b->indices()) std::printf(" %llu", static_cast<unsigned long long>(i));
        std::printf("\n");
      }
    }
    if (l.device().is_cuda()) PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));  // its last batch consumed
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (a.epochs - first_epoch > 1)
      std::fprintf(stderr, "epoch %u: %llu samples in %.3f s, %.1f samples/s\n", e, static_cast<unsigned long long>(f.samples),
                   f.seconds, f.samples_per_s());
  }
  return epochs;
}

int cmd_run(const run_args& a) {
  const device_choice dev = resolve_device(a.device);
  const pipeline_parts p = make_pipeline(a, dev);
  // The full pipeline tells the consumer's tail; the loader runs it with the cache asked for.
  auto piped = std::make_shared<loaders::pipeline_source>(p.reader, p.steps, p.source);
  auto [src, counted] = make_cached_pipeline(piped, cache_of(a));  // counted: whose bad samples are reported
  if (a.source == "synthetic" && piped->host_steps().empty() && !piped->tail_params() && a.latency_ms <= 0 &&
      a.bandwidth_mb_s <= 0 && a.cache == "none")
    src = loaders::make_synthetic_source({a.samples, a.height, a.width, 1000});  // straight into the slot
  loader l(src, make_loader_options(a, dev));
  const std::string resume_path = ranked(a.resume, l.order().rank()), save_path = ranked(a.save_state, l.order().rank());
  if (!resume_path.empty()) {
    const auto state = pinfeed::detail::read_whole_file(resume_path);
    if (!state) throw pinfeed::runtime_error("cannot read loader state '" + resume_path + "'");
    l.resume(*state);
  }
  std::fprintf(stderr, "run: %s, %llu samples, batch %zu, %zu workers, prefetch %zu, device %s, %zu slots x %.1f MiB\n",
               src->name().c_str(), static_cast<unsigned long long>(src->size()), a.batch, l.workers(), l.prefetch(),
               l.device().to_string().c_str(), l.slots(), l.slot_bytes() / 1048576.0);
  if (p.remote) print_remote_mode(a, loaders::remote_stats(*p.remote));
  // The consumer: the pipeline's colour/scale tail on the GPU, or with --normalize a uint8 HWC ->
  // float CHW conversion; then the stand-in step on the batch's device.
  batch_consumer::options co;
  co.tail = piped->tail_params();
  const field_spec& image = l.fields()[0];
  if (a.normalize && (image.type != dtype::u8 || image.shape.size() != 3 || image.shape[2] != 3))
    throw pinfeed::invalid_argument("--normalize needs uint8 [H, W, 3] images; this pipeline yields " +
                                std::string(dtype_name(image.type)) + " (its own tail already converts)");
  if (a.normalize && !co.tail) co.tail = ops::normalize_params{};
  co.step_ms = a.step_ms;
  if (l.device().is_cuda()) PINFEED_CUDA_TRY(cudaSetDevice(l.device().index));
  batch_consumer consume(co, image, a.batch, l.device().is_cuda());
  const std::vector<epoch_figures> epochs = consume_epochs(a, l, resume_path.empty() ? 0 : l.epoch(), consume);
  const auto st = l.stats();
  std::fprintf(stderr, "%s", st.to_string().c_str());
  std::fprintf(stderr, "settings: %s\n", l.tuning().to_string().c_str());
  std::printf("throughput: %.1f samples/s, %.1f MB/s, consumer wait %.1f%% (%llu batches)\n", st.samples_per_s(),
              st.megabytes_per_s(), 100 * st.consumer_wait_fraction(), static_cast<unsigned long long>(st.batches));
  const auto fetched = p.remote ? std::optional(loaders::remote_stats(*p.remote)) : std::nullopt;
  if (fetched) print_fetch(*fetched);
  print_bad_samples(*counted);
  print_decoded(*counted);
  print_augmented(*counted);
  if (!save_path.empty()) {
    pinfeed::detail::write_whole_file(save_path, l.state() + "\n", "cannot write loader state '" + save_path + "'");
  }
  if (!a.trace.empty()) {
    l.write_trace(a.trace);
    std::fprintf(stderr, "trace: %zu spans written to %s\n", l.trace()->size(), a.trace.c_str());
  }
  if (!a.json.empty()) write_json(a, l, st, *counted, fetched, epochs);
  return 0;
}

}  // namespace

void add_run(CLI::App& app, command_list& out) {
  static run_args ra;  // CLI11 binds the options to it: it outlives the parse
  auto* run = app.add_subcommand("run", "run a loader and print throughput and stage statistics");
  add_pipeline_options(run, ra);
  run->add_option("--cache", ra.cache,
                  "serve a pool of samples cached at a stage: none, raw (stored bytes), decoded, steps:K (after K host "
                  "steps), processed");
  run->add_option("--cache-pool", ra.cache_pool, "distinct samples in the cache pool")->check(CLI::PositiveNumber);
  run->add_option("--step-ms", ra.step_ms, "a stand-in training step per batch: busy ms on the batch's device")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--limit", ra.limit, "stop after this many batches (0: whole epochs)");
  run->add_option("--epochs", ra.epochs, "epochs")->check(CLI::PositiveNumber);
  run->add_option("--trace", ra.trace, "write a Chrome trace (Perfetto, chrome://tracing) to this file");
  run->add_option("--json", ra.json, "write the statistics as JSON to this file");
  run->add_flag("--checksums", ra.checksums, "print one digest line per batch (to compare runs exactly)");
  run->add_option("--save-batches", ra.save_batches,
                  "write each delivered batch's fields as DIR/<batch number, 6 digits>.<field>.npy (--limit: the first N; {rank} becomes the rank)");
  run->add_flag("--print-indices", ra.print_indices, "print the dataset indices of every batch");
  run->add_option("--resume", ra.resume,
                  "continue from a state file written by --save-state (any rank's, at any world size; {rank}: this rank)");
  run->add_option("--save-state", ra.save_state, "write the loader's state (JSON) here after the run ({rank}: this rank)");
  run->add_flag("--normalize", ra.normalize, "consume each batch: uint8 HWC -> float32 CHW on its device");
  out.push_back({run, [] { return cmd_run(ra); }, [] { return workers_asked(ra); }});
}

}  // namespace pinfeed::tool
