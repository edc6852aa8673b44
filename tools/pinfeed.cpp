// The pinfeed command line: info, run, bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <iostream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>
#include <cstdlib>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>

#if PINFEED_TOOL_BENCH
#include "doctor_bench.hpp"
#include "h2d_bench.hpp"
#include "pipeline_bench.hpp"
#include "remote_bench.hpp"
#include "sampler_bench.hpp"
#endif
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/npy.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/version.hpp"

namespace {

std::string cuda_version(int v) {
  return v ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "none";
}

int cmd_info() {
  const auto& s = pinfeed::cuda_devices();
  std::printf("pinfeed %s (%s)\n", PINFEED_VERSION_STRING, PINFEED_WITH_CUDA ? "CUDA build" : "CPU-only build, PINFEED_WITH_CUDA=OFF");
  std::printf("CUDA runtime      %s (built with %d.%d)\n", cuda_version(s.runtime_version).c_str(),
              PINFEED_CUDART_VERSION / 1000, (PINFEED_CUDART_VERSION % 1000) / 10);
  std::printf("CUDA driver       %s\n", cuda_version(s.driver_version).c_str());
  if (s.usable) {
    std::printf("CUDA devices      %zu\n", s.devices.size());
    for (const auto& d : s.devices)
      std::printf("  [%d] %s, sm_%d%d, %.1f GiB, %d SMs, %d copy engine(s)\n", d.index, d.name.c_str(), d.cc_major,
                  d.cc_minor, d.total_memory / 1073741824.0, d.multiprocessors, d.async_engines);
  } else {
    std::printf("CUDA devices      none (%s): CPU-only mode, batches are delivered in host memory\n",
                s.reason.c_str());
  }
  bool pinned_ok = false;
  std::string pinned_why;
  if (s.usable) {
    try {
      pinfeed::host_buffer probe(1 << 20, true);
      pinned_ok = true;
    } catch (const std::exception& e) {
      pinned_why = e.what();
    }
  } else {
    pinned_why = "needs a CUDA device; page-aligned pageable memory is used instead";
  }
  std::printf("pinned memory     %s%s%s\n", pinned_ok ? "available" : "unavailable", pinned_ok ? "" : " - ",
              pinned_why.c_str());
  std::printf("TBB               %s, default concurrency %d threads\n", TBB_VERSION_STRING,
              tbb::info::default_concurrency());
  std::printf("hardware threads  %u\n", std::thread::hardware_concurrency());
  std::printf("CPU               %s\n", pinfeed::cpu_model().c_str());
  std::printf("JPEG Huffman      %s\n", pinfeed::loaders::jpeg_huffman_in_use().reason.c_str());
  std::printf("SIMD              %s in use (CPU supports %s%s)\n", pinfeed::to_string(pinfeed::simd_level_in_use()),
              pinfeed::to_string(pinfeed::cpu_simd_support()),
              std::getenv("PINFEED_SIMD") ? ", capped by PINFEED_SIMD" : "");
  std::printf("DLPack            %d\n", DLPACK_VERSION);
  std::printf("nlohmann_json     %d.%d.%d\n", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
              NLOHMANN_JSON_VERSION_PATCH);
  std::printf("CLI11             %s\n", CLI11_VERSION);
  return 0;
}

struct run_args {
  std::string source = "synthetic";
  std::uint64_t samples = 2048;
  std::int64_t height = 1024, width = 1024;
  std::size_t batch = 32, workers = 0, prefetch = 2, requests_in_flight = 0;  // 0: adapt
  std::string device = "auto";
  std::uint64_t limit = 0;
  std::uint32_t epochs = 1;
  std::uint64_t seed = 0;
  std::string trace, json, resume, save_state, transforms, pipeline_file, on_error = "fail", cache = "none";
  std::size_t cache_pool = 64;
  std::int64_t shard_window = -1;  ///< -1: the reader's default (local: 0; remote: whole shards)
  double remote_cache_mb = 1024;
  std::string remote_cache_dir, remote_index_cache;
  std::int64_t max_pixels = std::int64_t{1} << 28;
  double max_bad_fraction = 0.0;
  double latency_ms = 0, bandwidth_mb_s = 0, step_ms = 0, copy_bandwidth_mb_s = 0;
  bool checksums = false, normalize = false, shuffle = false, print_indices = false, drop_remainder = false;
  int rank = -1, world = 1;
};

/// The files of a "folder:PATH" (ImageFolder layout) or "list:FILE" ("path label" lines) source;
/// nullopt for another kind of source.
std::optional<std::vector<pinfeed::loaders::image_file>> image_files_of(const std::string& source) {
  if (source.rfind("folder:", 0) == 0) return pinfeed::loaders::list_image_folder(source.substr(7)).files;
  if (source.rfind("list:", 0) == 0) return pinfeed::loaders::read_file_list(source.substr(5));
  return std::nullopt;
}

/// What the options describe: a reader (behind emulated slow storage when asked), its transforms
/// and the source options. run and doctor share it.
struct pipeline_parts {
  std::shared_ptr<pinfeed::loaders::image_reader> reader;
  std::shared_ptr<pinfeed::loaders::image_reader> remote;  ///< the remote shard reader inside, if any
  pinfeed::loaders::pipeline steps;
  pinfeed::loaders::pipeline_source_options source;
};

pipeline_parts make_pipeline(const run_args& a, const pinfeed::device_choice& dev) {
  if (!a.transforms.empty() && !a.pipeline_file.empty())
    throw std::invalid_argument("give either --transforms or --pipeline, not both");
  pipeline_parts p;
  if (!a.transforms.empty()) p.steps = pinfeed::loaders::parse_pipeline(a.transforms);
  if (!a.pipeline_file.empty()) p.steps = pinfeed::loaders::load_pipeline_file(a.pipeline_file);
  // Sources: synthetic | folder:PATH (ImageFolder layout) | list:FILE ("path label" lines) | shards:PATTERN.
  if (a.source == "synthetic") {
    p.reader = pinfeed::loaders::make_reader_from_source(
        pinfeed::loaders::make_synthetic_source({a.samples, a.height, a.width, 1000}));
  } else if (a.source.rfind("shards:", 0) == 0) {
    pinfeed::loaders::shard_options so;
    so.decode.max_pixels = a.max_pixels;
    if (a.shard_window >= 0) so.window_shards = static_cast<std::uint32_t>(a.shard_window);
    const std::string pattern = a.source.substr(7);
    if (pinfeed::loaders::is_remote_location(pattern)) {
      if (a.shard_window == 0 && !a.remote_cache_dir.empty())
        throw std::invalid_argument("--remote-cache-dir holds shards read whole; --shard-window 0 reads samples one by one");
      pinfeed::loaders::remote_options ro;
      if (a.requests_in_flight > 0) ro.requests_in_flight = a.requests_in_flight;
      ro.cache_bytes = static_cast<std::uint64_t>(a.remote_cache_mb * 1048576.0);
      ro.cache_dir = a.remote_cache_dir;
      ro.index_cache_dir = a.remote_index_cache;
      p.reader = pinfeed::loaders::make_remote_shard_reader(pinfeed::loaders::expand_remote_pattern(pattern, ro), so, ro);
      p.remote = p.reader;
    } else {
      if (!a.remote_cache_dir.empty())
        throw std::invalid_argument("--remote-cache-dir caches shards of remote storage; '" + pattern + "' is local");
      if (!a.remote_index_cache.empty())
        throw std::invalid_argument("--remote-index-cache caches indexes of remote shards; '" + pattern +
                                    "' is local (pinfeed pack writes sidecar indexes)");
      p.reader = pinfeed::loaders::make_shard_reader(pinfeed::loaders::expand_shard_pattern(pattern), so);
    }
  } else if (a.shard_window > 0) {
    throw std::invalid_argument("--shard-window " + std::to_string(a.shard_window) + " orders tar shards; source '" +
                                a.source + "' has none");
  } else if (auto files = image_files_of(a.source)) {
    pinfeed::loaders::decode_options d;
    d.max_pixels = a.max_pixels;
    p.reader = pinfeed::loaders::make_image_files_reader(std::move(*files), d);
  } else {
    throw std::invalid_argument("unknown source '" + a.source +
                                "' (synthetic, folder:PATH, list:FILE or shards:PATTERN)");
  }
  auto& po = p.source;
  po.device_tail = dev.is_cuda();  // with a GPU the colour/scale tail runs there: the slot keeps uint8
  const pinfeed::storage_emulation storage{a.latency_ms, a.bandwidth_mb_s};
  if (storage.active()) p.reader = pinfeed::make_slow_storage(p.reader, storage);
  if (a.on_error == "skip") po.on_error = pinfeed::loaders::error_policy::skip;
  else if (a.on_error != "fail") throw std::invalid_argument("--on-error must be fail or skip, got '" + a.on_error + "'");
  if (a.max_bad_fraction > 0.0 && a.on_error != "skip")
    throw std::invalid_argument("--max-bad-fraction " + std::to_string(a.max_bad_fraction) +
                                " caps --on-error skip; with --on-error fail the first bad sample already fails");
  po.max_bad_fraction = a.max_bad_fraction;
  return p;
}

pinfeed::loader_options make_loader_options(const run_args& a, const pinfeed::device_choice& dev) {
  pinfeed::loader_options o;
  o.batch_size = a.batch;
  o.workers = a.workers;
  o.prefetch = a.prefetch;
  o.device = dev.to_string();
  o.seed = a.seed;
  o.trace = !a.trace.empty();
  o.order = {a.shuffle, a.rank, a.world, a.drop_remainder};
  if (a.copy_bandwidth_mb_s > 0) {
    if (!dev.is_cuda())
      throw std::invalid_argument("--copy-bandwidth-mb-s " + std::to_string(a.copy_bandwidth_mb_s) +
                                  " emulates a slow host-to-device link, but batches stay on the " + dev.to_string() +
                                  ": nothing is copied");
    o.after_copy = pinfeed::throttle_copy(a.copy_bandwidth_mb_s);
  }
  return o;
}

int cmd_run(const run_args& a) {
  const pinfeed::device_choice dev = pinfeed::resolve_device(a.device);
  const pipeline_parts p = make_pipeline(a, dev);
  pinfeed::sample_cache cache;
  cache.pool = a.cache_pool;
  if (a.cache == "raw") cache.stage = pinfeed::cache_stage::raw;
  else if (a.cache == "decoded") cache.stage = pinfeed::cache_stage::decoded;
  else if (a.cache == "processed") cache.stage = pinfeed::cache_stage::finished;
  else if (a.cache.rfind("steps:", 0) == 0) {
    cache.stage = pinfeed::cache_stage::steps;
    std::size_t used = 0;
    try {
      cache.after_steps = std::stoul(a.cache.substr(6), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != a.cache.size() - 6) throw std::invalid_argument("--cache steps:K needs a number, got '" + a.cache + "'");
  } else if (a.cache != "none") {
    throw std::invalid_argument("--cache must be none, raw, decoded, steps:K or processed, got '" + a.cache + "'");
  }
  // The full pipeline tells the consumer's tail; the loader runs it with the cache asked for.
  auto piped = std::make_shared<pinfeed::loaders::pipeline_source>(p.reader, p.steps, p.source);
  auto [src, counted] = pinfeed::make_cached_pipeline(piped, cache);  // counted: whose bad samples are reported
  if (a.source == "synthetic" && piped->host_steps().empty() && !piped->tail_params() && a.latency_ms <= 0 &&
      a.bandwidth_mb_s <= 0 && a.cache == "none")
    src = pinfeed::loaders::make_synthetic_source({a.samples, a.height, a.width, 1000});  // straight into the slot
  pinfeed::loader l(src, make_loader_options(a, dev));
  std::uint32_t first_epoch = 0;
  // "{rank}" in a state path stands for this process's rank, so that the ranks of one job can
  // each keep a state file.
  auto ranked = [&](std::string path) {
    for (auto at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}"))
      path.replace(at, 6, std::to_string(l.order().rank()));
    return path;
  };
  const std::string resume_path = ranked(a.resume), save_path = ranked(a.save_state);
  if (!resume_path.empty()) {
    std::ifstream in(resume_path);
    if (!in) throw std::runtime_error("cannot read loader state '" + resume_path + "'");
    const std::string state((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    l.resume(state);
    first_epoch = l.epoch();
  }
  std::fprintf(stderr, "run: %s, %llu samples, batch %zu, %zu workers, prefetch %zu, device %s, %zu slots x %.1f MiB\n",
               src->name().c_str(), static_cast<unsigned long long>(src->size()), a.batch, l.workers(), a.prefetch,
               l.device().to_string().c_str(), l.slots(), l.slot_bytes() / 1048576.0);
  if (p.remote) {
    const auto mode = pinfeed::loaders::remote_stats(*p.remote);
    if (mode.window_shards > 0)
      std::fprintf(stderr, "run: remote shards read whole, window %u, cache %.0f MiB (%s; --shard-window 0: a range "
                   "request per sample, the exact global shuffle)\n",
                   mode.window_shards, static_cast<double>(mode.cache_bytes) / 1048576.0,
                   a.shuffle ? "shard-aware shuffle" : "in order");
    else if (a.requests_in_flight > 0)
      std::fprintf(stderr, "run: remote shards read by a range request per sample, %zu in flight\n", a.requests_in_flight);
    else
      std::fprintf(stderr, "run: remote shards read by a range request per sample, %zu to %zu in flight as the latency needs\n",
                   pinfeed::loaders::kMinRequestsInFlight, pinfeed::loaders::kMaxRequestsInFlight);
  }

  // Consumer work on the batch's device: the pipeline's colour/scale tail (GPU), or with
  // --normalize a uint8 HWC -> float CHW conversion.
  const auto& image = l.fields()[0];
  std::optional<pinfeed::ops::normalize_params> consume;
  if (piped && piped->tail_params()) consume = piped->tail_params();
  if (a.normalize) {
    if (image.type != pinfeed::dtype::u8 || image.shape.size() != 3 || image.shape[2] != 3)
      throw std::invalid_argument("--normalize needs uint8 [H, W, 3] images; this pipeline yields " +
                                  std::string(pinfeed::dtype_name(image.type)) + " (its own tail already converts)");
    if (!consume) consume = pinfeed::ops::normalize_params{};
  }
  const pinfeed::ops::image_batch_shape full{
      a.batch, static_cast<std::size_t>(image.shape[0]), static_cast<std::size_t>(image.shape.size() > 1 ? image.shape[1] : 1)};
  std::vector<float> host_out;
  pinfeed::device_buffer device_out;
  if (consume) {
    if (l.device().is_cuda()) {
      PINFEED_CUDA_TRY(cudaSetDevice(l.device().index));
      device_out = pinfeed::device_buffer(full.pixels() * 3 * sizeof(float));
    } else {
      host_out.resize(full.pixels() * 3);
    }
  }

  std::uint64_t delivered = 0;
  for (std::uint32_t e = first_epoch; e < a.epochs && (a.limit == 0 || delivered < a.limit); ++e) {
    if (e != first_epoch || a.resume.empty()) l.start_epoch(e);
    while (a.limit == 0 || delivered < a.limit) {
      auto b = l.next();
      if (!b) break;
      ++delivered;
      if (consume) {
        const auto img = b->field("image");
        pinfeed::ops::image_batch_shape shape = full;
        shape.batch = b->size();
        if (img.location.is_cuda())
          pinfeed::ops::normalize_hwc_to_chw_device(static_cast<const std::uint8_t*>(img.data), device_out.data(), shape,
                                                    *consume, b->stream());
        else
          pinfeed::ops::normalize_hwc_to_chw(static_cast<const std::uint8_t*>(img.data), host_out.data(), shape, *consume);
      }
      if (a.step_ms > 0) {  // the stand-in training step, on the batch's device
        if (b->location().is_cuda()) pinfeed::busy_kernel_ms(a.step_ms, b->stream());
        else pinfeed::busy_wait_ms(a.step_ms);
      }
      if (a.checksums) std::printf("%s\n", pinfeed::checksum_line(*b).c_str());
      if (a.print_indices) {
        std::printf("indices %u:%llu", b->epoch(), static_cast<unsigned long long>(b->index()));
        for (auto i : b->indices()) std::printf(" %llu", static_cast<unsigned long long>(i));
        std::printf("\n");
      }
    }
  }
  if (l.device().is_cuda()) PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));
  const auto st = l.stats();
  std::fprintf(stderr, "%s", st.to_string().c_str());
  std::printf("throughput: %.1f samples/s, %.1f MB/s, consumer wait %.1f%% (%llu batches)\n", st.samples_per_s(),
              st.megabytes_per_s(), 100 * st.consumer_wait_fraction(), static_cast<unsigned long long>(st.batches));
  const auto fetched = p.remote ? pinfeed::loaders::remote_stats(*p.remote) : pinfeed::loaders::remote_counters{};
  if (p.remote) {
    const char* ahead = fetched.window_shards > 0 ? "shards" : "samples";
    std::fprintf(stderr, "fetch: %llu requests (%llu retries), %.1f MB (%.2fx the shards), %llu %s read ahead, workers waited %.1f ms\n",
                 static_cast<unsigned long long>(fetched.requests), static_cast<unsigned long long>(fetched.retries),
                 static_cast<double>(fetched.bytes) / 1e6,
                 fetched.shard_bytes > 0 ? static_cast<double>(fetched.bytes) / static_cast<double>(fetched.shard_bytes) : 0.0,
                 static_cast<unsigned long long>(fetched.read_ahead), ahead, fetched.wait_ms);
    if (fetched.window_shards == 0)
      std::fprintf(stderr, "fetch: range reads, %llu in flight and %llu samples read ahead at the end\n",
                   static_cast<unsigned long long>(fetched.requests_in_flight),
                   static_cast<unsigned long long>(fetched.read_ahead_depth));
    if (fetched.window_shards > 0)
      std::fprintf(stderr, "fetch: whole shards (window %u, cache %.0f MiB): %llu fetched, %llu samples range-read for want of room\n",
                   fetched.window_shards, static_cast<double>(fetched.cache_bytes) / 1048576.0,
                   static_cast<unsigned long long>(fetched.shards), static_cast<unsigned long long>(fetched.streamed));
  }
  if (counted->failures() > 0) {
    std::fprintf(stderr, "skipped %llu bad sample%s (%llu slot%s filled by a stand-in):\n",
                 static_cast<unsigned long long>(counted->failures()), counted->failures() == 1 ? "" : "s",
                 static_cast<unsigned long long>(counted->replaced()), counted->replaced() == 1 ? "" : "s");
    for (const auto& f : counted->failed()) std::fprintf(stderr, "  %s\n", f.c_str());
  }
  if (!save_path.empty()) {
    std::ofstream out(save_path);
    if (!(out << l.state() << "\n")) throw std::runtime_error("cannot write loader state '" + save_path + "'");
  }
  if (!a.trace.empty()) {
    l.write_trace(a.trace);
    std::fprintf(stderr, "trace: %zu spans written to %s\n", l.trace()->size(), a.trace.c_str());
  }
  if (!a.json.empty()) {
    nlohmann::json j{{"samples_per_s", st.samples_per_s()}, {"mb_per_s", st.megabytes_per_s()},
                     {"consumer_wait_fraction", st.consumer_wait_fraction()}, {"batches", st.batches},
                     {"samples", st.samples}, {"errors", st.errors}, {"bad_samples", counted->failures()},
                     {"replaced", counted->replaced()}, {"wall_s", st.wall_ns / 1e9},
                     {"host_bytes", st.host_bytes}, {"device_bytes", st.device_bytes},
                     {"device", l.device().to_string()}, {"workers", l.workers()}};
    for (std::size_t i = 0; i < pinfeed::kStageCount; ++i) {
      const auto& t = st.stages[i];
      j["stages"][std::string(pinfeed::to_string(static_cast<pinfeed::stage>(i)))] = {
          {"count", t.count}, {"total_ms", t.total_ms()}, {"mean_ms", t.mean_ms()}, {"max_ms", t.max_ns / 1e6}};
    }
    if (p.remote)
      j["fetch"] = nlohmann::json::parse(pinfeed::loaders::to_json(fetched));
    std::ofstream out(a.json);
    if (!out) throw std::runtime_error("cannot write '" + a.json + "'");
    out << j.dump(2) << "\n";
  }
  return 0;
}

struct doctor_args {
  double step_ms = 0, min_mode_seconds = 1, max_mode_seconds = 10;
  std::size_t steps = 20, warmup = 3, pool = 0;
  std::string modes, json, trace, trace_mode = "L0", step_on = "auto";
  bool no_per_transform = false;
};

int cmd_doctor(const run_args& a, const doctor_args& d) {
  const pinfeed::device_choice dev = pinfeed::resolve_device(a.device);
  pinfeed::doctor_options o;
  o.loader = make_loader_options(a, dev);
  o.loader.trace = false;
  o.steps = d.steps;
  o.warmup = d.warmup;
  o.min_steps = std::min<std::size_t>(3, d.steps);
  o.min_mode_seconds = d.min_mode_seconds;
  o.max_mode_seconds = d.max_mode_seconds;
  o.step_ms = d.step_ms;
  o.step_on = d.step_on;
  o.pool = d.pool;
  o.per_transform = !d.no_per_transform;
  for (std::size_t at = 0; at < d.modes.size();) {
    const std::size_t comma = std::min(d.modes.find(',', at), d.modes.size());
    if (comma > at) o.modes.push_back(d.modes.substr(at, comma - at));
    at = comma + 1;
  }
  if (!d.trace.empty()) {
    o.trace_mode = d.trace_mode;
    o.trace_path = d.trace;
  }
  o.on_mode = [](const pinfeed::doctor_mode& m) {
    if (m.ran)
      std::fprintf(stderr, "doctor: %-3s %-28s %9.1f images/s, consumer wait %5.1f%%\n", m.id.c_str(), m.name.c_str(),
                   m.images_per_s, 100 * m.consumer_wait);
    else
      std::fprintf(stderr, "doctor: %-3s %-28s %s\n", m.id.c_str(), m.name.c_str(), m.note.c_str());
  };
  pipeline_parts parts = make_pipeline(a, dev);
  const pinfeed::doctor_report r =
      pinfeed::doctor({std::move(parts.reader), std::move(parts.steps), std::move(parts.source), nullptr}, o);
  std::printf("%s", r.to_text().c_str());
  if (!d.json.empty()) {
    std::ofstream out(d.json);
    if (!(out << r.to_json() << "\n")) throw std::runtime_error("cannot write '" + d.json + "'");
  }
  if (!d.trace.empty()) std::fprintf(stderr, "doctor: Chrome trace of mode %s written to %s\n", d.trace_mode.c_str(), d.trace.c_str());
  return 0;
}

struct sample_args {
  std::string labels, out, valid, mode = "topup", device = "cpu";
  std::int64_t k = -1;
  double fraction = 0.5;
  std::uint64_t seed = 0;
  std::uint32_t offset = 0;
  std::int64_t negative_label = 0, ignore_label = -1;
};

int cmd_sample(const sample_args& s) {
  const pinfeed::npy_array labels = pinfeed::read_npy(s.labels);
  if (labels.type != pinfeed::dtype::i32 && labels.type != pinfeed::dtype::i64)
    throw std::invalid_argument("labels '" + s.labels + "' have dtype " + std::string(pinfeed::dtype_name(labels.type)) +
                                "; int32 or int64 expected");
  if (labels.shape.size() != 1 && labels.shape.size() != 2)
    throw std::invalid_argument("labels '" + s.labels + "' have " + std::to_string(labels.shape.size()) +
                                " dimensions; shape [N] or [B, N] expected");
  pinfeed::ops::sampler_params p;
  p.k = s.k;
  p.positive_fraction = s.fraction;
  p.seed = s.seed;
  p.offset = s.offset;
  p.negative_label = s.negative_label;
  p.ignore_label = s.ignore_label;
  if (s.mode == "topup") p.mode = pinfeed::ops::sampler_mode::topup;
  else if (s.mode == "detectron2") p.mode = pinfeed::ops::sampler_mode::detectron2;
  else throw std::invalid_argument("unknown mode '" + s.mode + "' (topup or detectron2)");
  pinfeed::ops::sampler_args a;
  a.rows = labels.shape.size() == 2 ? labels.shape[0] : 1;
  a.n = labels.shape.back();
  a.label_type = labels.type;
  pinfeed::npy_array out, valid;
  out.type = pinfeed::dtype::i64;
  out.shape = {a.rows, std::max<std::int64_t>(p.k, 0)};
  valid.type = pinfeed::dtype::i32;
  valid.shape = {a.rows};
  pinfeed::ops::detail::validate_shapes(a, p);
  out.data.resize(static_cast<std::size_t>(a.rows * p.k) * 8);
  valid.data.resize(static_cast<std::size_t>(a.rows) * 4);
  const pinfeed::device_choice dev = pinfeed::resolve_device(s.device);
  if (!dev.is_cuda()) {
    a.labels = labels.data.data();
    a.indices = out.data.data();
    a.valid = reinterpret_cast<std::int32_t*>(valid.data.data());
    pinfeed::ops::balanced_sample_cpu(a, p);
  } else {
    PINFEED_CUDA_TRY(cudaSetDevice(dev.index));
    pinfeed::device_buffer d_labels(std::max<std::size_t>(labels.data.size(), 1)),
        d_out(std::max<std::size_t>(out.data.size(), 1)), d_valid(std::max<std::size_t>(valid.data.size(), 1));
    PINFEED_CUDA_TRY(cudaMemcpy(d_labels.data(), labels.data.data(), labels.data.size(), cudaMemcpyHostToDevice));
    a.labels = d_labels.data();
    a.indices = d_out.data();
    a.valid = reinterpret_cast<std::int32_t*>(d_valid.data());
    std::size_t bytes = 0;
    pinfeed::ops::balanced_sample_gpu(nullptr, bytes, a, p, nullptr);
    pinfeed::device_buffer temp(bytes);
    pinfeed::ops::balanced_sample_gpu(temp.data(), bytes, a, p, nullptr);
    PINFEED_CUDA_TRY(cudaMemcpy(out.data.data(), d_out.data(), out.data.size(), cudaMemcpyDeviceToHost));
    PINFEED_CUDA_TRY(cudaMemcpy(valid.data.data(), d_valid.data(), valid.data.size(), cudaMemcpyDeviceToHost));
  }
  pinfeed::write_npy(s.out, out);
  if (!s.valid.empty()) pinfeed::write_npy(s.valid, valid);
  std::fprintf(stderr, "sample: %lld row(s) of %lld labels -> %s [%lld, %lld] int64 (%s)\n",
               static_cast<long long>(a.rows), static_cast<long long>(a.n), s.out.c_str(),
               static_cast<long long>(a.rows), static_cast<long long>(p.k), dev.to_string().c_str());
  return 0;
}

struct pack_args {
  std::string source, out;
  double shard_mb = 256;
  bool shuffle = false;
  std::uint64_t seed = 0;
};

int cmd_pack(const pack_args& a) {
  auto listed = image_files_of(a.source);
  if (!listed) throw std::invalid_argument("pack: --source must be folder:PATH or list:FILE, got '" + a.source + "'");
  std::vector<pinfeed::loaders::image_file> files = std::move(*listed);
  if (a.shuffle) {
    // The same keyed permutation the loader shuffles with: a pure function of the seed.
    const pinfeed::epoch_order order(files.size(), a.seed, {true, 0, 1, false});
    std::vector<pinfeed::loaders::image_file> shuffled(files.size());
    for (std::uint64_t i = 0; i < files.size(); ++i) shuffled[i] = files[order.index_at(0, i)];
    files = std::move(shuffled);
  }
  if (!(a.shard_mb > 0)) throw std::invalid_argument("pack: --shard-mb must be positive");
  const auto shards = pinfeed::loaders::write_shards(files, a.out, static_cast<std::uint64_t>(a.shard_mb * 1048576.0));
  std::printf("packed %zu samples into %zu shard(s) with their sidecar indexes: %s ... %s\n", files.size(),
              shards.size(), shards.front().c_str(), shards.back().c_str());
  return 0;
}

/// Writes the sidecar index of existing tar shards (made by other tools), so that remote readers
/// need not fetch them whole to index them.
int cmd_index(const std::string& pattern) {
  const auto shards = pinfeed::loaders::expand_shard_pattern(pattern);
  for (const auto& s : shards) {
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".idx") == 0) continue;  // a glob's own sidecars
    pinfeed::loaders::write_shard_index(s);
    std::printf("%s\n", pinfeed::loaders::shard_index_path(s).c_str());
  }
  return 0;
}

}  // namespace

/// The options that describe a pipeline and its loader (shared by run and doctor).
void add_pipeline_options(CLI::App* app, run_args& a) {
  app->add_option("--source", a.source,
                  "synthetic, folder:PATH (ImageFolder layout), list:FILE (path label lines) or shards:PATTERN "
                  "(tar shards: glob or train-{000..127}.tar, local or http://, https://, s3://)");
  app->add_option("--on-error", a.on_error,
                  "fail (default) or skip: a bad sample is read once per epoch and its slot gets a stand-in drawn from the epoch");
  app->add_option("--max-bad-fraction", a.max_bad_fraction,
                  "with --on-error skip: fail when more than this fraction of an epoch is bad (default 0: off)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--max-pixels", a.max_pixels, "reject images with more pixels (decompression bombs)");
  app->add_option("--shard-window", a.shard_window,
                  "tar shards: shuffle shard-aware, samples within windows of this many shards; remote shards are then "
                  "fetched whole into a cache. 0: the exact global shuffle (remote shards: a range request per sample). "
                  "Default: 0 for local shards; for remote ones whole shards, a window of a third of the cache (1 to 4)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{std::numeric_limits<std::uint32_t>::max()}));
  app->add_option("--remote-cache-mb", a.remote_cache_mb, "remote shards read whole (not --shard-window 0): cache size in MiB")
      ->check(CLI::PositiveNumber);
  app->add_option("--remote-cache-dir", a.remote_cache_dir,
                  "remote shards read whole (not --shard-window 0): keep the cache in this directory instead of memory");
  app->add_option("--remote-index-cache", a.remote_index_cache,
                  "remote shards without sidecar indexes: keep the index built for each shard in this directory, "
                  "so that the next run checks its size and ETag instead of scanning it");
  app->add_option("--requests-in-flight", a.requests_in_flight,
                  "remote shards: requests running at once (the next samples of the order are read ahead). Default: "
                  "64, and for range reads as many as the latency needs, up to 1024")
      ->check(CLI::Range(std::size_t{1}, pinfeed::loaders::kMaxRequestsInFlight));
  app->add_option("--latency-ms", a.latency_ms, "emulate slow storage: added latency per read")->check(CLI::NonNegativeNumber);
  app->add_option("--bandwidth-mb-s", a.bandwidth_mb_s, "emulate slow storage: shared read bandwidth cap (0: none)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--samples", a.samples, "samples in the dataset")->check(CLI::PositiveNumber);
  app->add_option("--height", a.height, "synthetic image height")->check(CLI::PositiveNumber);
  app->add_option("--width", a.width, "synthetic image width")->check(CLI::PositiveNumber);
  app->add_option("-b,--batch", a.batch, "batch size")->check(CLI::PositiveNumber);
  app->add_option("-w,--workers", a.workers, "worker threads (0: one per hardware thread)");
  app->add_option("--prefetch", a.prefetch, "batches produced ahead")->check(CLI::PositiveNumber);
  app->add_option("--device", a.device, "auto, cpu, cuda, cuda:N or local_rank");
  app->add_option("--seed", a.seed, "seed of every sample's random stream");
  app->add_option("--transforms", a.transforms, "per-sample pipeline, e.g. \"crop(256),mask(0.25),ycbcr,scale\"");
  app->add_option("--pipeline", a.pipeline_file, "pipeline JSON file: {\"transforms\": [\"crop(256)\", ...]}");
  app->add_flag("--shuffle", a.shuffle, "shuffle every epoch (a pure function of seed and epoch)");
  app->add_option("--rank", a.rank, "this process's shard (default: from torchrun/Open MPI/Slurm, else 0)");
  app->add_option("--world", a.world, "number of shards when --rank is given")->check(CLI::PositiveNumber);
  app->add_flag("--drop-remainder", a.drop_remainder, "drop samples that do not divide evenly over ranks (default: pad)");
  app->add_option("--copy-bandwidth-mb-s", a.copy_bandwidth_mb_s,
                  "emulate a slow host-to-device link: the copy stream stays busy bytes / rate (0: off)")
      ->check(CLI::NonNegativeNumber);
}

int main(int argc, char** argv) {
  CLI::App app{"pinfeed: keeps GPUs fed - a CUDA C++ data-loading runtime"};
  app.require_subcommand(1);

  auto* info = app.add_subcommand("info", "devices, CUDA status, pinned memory, TBB threads, library versions");

  run_args ra;
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
  run->add_flag("--print-indices", ra.print_indices, "print the dataset indices of every batch");
  run->add_option("--resume", ra.resume,
                  "continue from a state file written by --save-state (any rank's, at any world size; {rank}: this rank)");
  run->add_option("--save-state", ra.save_state, "write the loader's state (JSON) here after the run ({rank}: this rank)");
  run->add_flag("--normalize", ra.normalize, "consume each batch: uint8 HWC -> float32 CHW on its device");

  run_args da;
  doctor_args dd;
  auto* doc = app.add_subcommand("doctor", "find what starves the consumer: the pipeline run with caches at each stage");
  add_pipeline_options(doc, da);
  doc->add_option("--step-ms", dd.step_ms,
                  "the stand-in training step: busy ms per batch (a kernel on the GPU, the consumer thread without one)");
  doc->add_option("--step-on", dd.step_on, "where the step runs: auto, host (the consumer thread) or device (a kernel)");
  doc->add_option("--steps", dd.steps, "timed steps per mode")->check(CLI::PositiveNumber);
  doc->add_option("--warmup", dd.warmup, "untimed steps before each mode");
  doc->add_option("--min-mode-seconds", dd.min_mode_seconds, "time each mode at least this long (default 1)");
  doc->add_option("--max-mode-seconds", dd.max_mode_seconds, "stop a mode after this long (at least 3 steps; default 10)");
  doc->add_option("--pool", dd.pool, "distinct samples per cache (default: 64, or the dataset when smaller)");
  doc->add_option("--modes", dd.modes, "run only these modes, e.g. L0,L3 (default: the whole ladder)");
  doc->add_flag("--no-per-transform", dd.no_per_transform, "skip the per-transform ladder");
  doc->add_option("--json", dd.json, "write the report as JSON to this file");
  doc->add_option("--trace", dd.trace, "write a Chrome trace of one mode to this file");
  doc->add_option("--trace-mode", dd.trace_mode, "the mode traced (default L0)");

  sample_args sa;
  auto* sample = app.add_subcommand("sample", "balanced sampler on labels from an .npy file");
  sample->add_option("--labels", sa.labels, "labels .npy, int32 or int64, shape [N] or [B, N]")->required();
  sample->add_option("--k", sa.k, "items to pick per row")->required();
  sample->add_option("--positive-fraction", sa.fraction, "fraction of positives aimed at, in [0, 1]");
  sample->add_option("--seed", sa.seed, "seed of the selection and order keys");
  sample->add_option("--offset", sa.offset, "draw number under the seed");
  sample->add_option("--mode", sa.mode, "topup (fill from the other class) or detectron2");
  sample->add_option("--negative-label", sa.negative_label, "label of negatives (default 0)");
  sample->add_option("--ignore-label", sa.ignore_label, "label never picked (default -1)");
  sample->add_option("--device", sa.device, "cpu, cuda, cuda:N or auto");
  sample->add_option("--out", sa.out, "output .npy of int64 indices [B, K], -1 padded")->required();
  sample->add_option("--valid", sa.valid, "optional output .npy of int32 valid counts [B]");

  pack_args pa;
  auto* pack = app.add_subcommand("pack", "write tar shards (WebDataset layout) from an image folder or file list");
  pack->add_option("--source", pa.source, "folder:PATH or list:FILE")->required();
  pack->add_option("--out", pa.out, "shard path prefix: PREFIX-000000.tar, ...")->required();
  pack->add_option("--shard-mb", pa.shard_mb, "target shard size in MiB");
  pack->add_flag("--shuffle", pa.shuffle, "write the samples in a shuffled order");
  pack->add_option("--seed", pa.seed, "seed of the shuffle");

  std::string index_pattern;
  auto* index = app.add_subcommand("index", "write the sidecar index of existing tar shards (<shard>.idx), for remote reads");
  index->add_option("--shards", index_pattern, "local shards: glob or train-{000..127}.tar")->required();

#if PINFEED_TOOL_BENCH
  auto* bench = app.add_subcommand("bench", "benchmarks (JSON lines on stdout)");
  bench->require_subcommand(1);
  pinfeed::bench::h2d_options ho;
  auto* h2d = bench->add_subcommand("h2d", "pageable vs pinned vs ring copy bandwidth; ring overhead vs bare memcpy");
  h2d->add_option("--batch-bytes", ho.batch_bytes, "bytes per batch")->check(CLI::PositiveNumber);
  h2d->add_option("--sample-bytes", ho.sample_bytes, "bytes per sample")->check(CLI::PositiveNumber);
  h2d->add_option("--batches", ho.batches, "batches per measurement")->check(CLI::PositiveNumber);
  h2d->add_option("-w,--workers", ho.workers, "worker threads")->check(CLI::PositiveNumber);
  h2d->add_option("--prefetch", ho.prefetch, "batches produced ahead")->check(CLI::PositiveNumber);
  h2d->add_option("--repeats", ho.repeats, "measurements (median reported)")->check(CLI::PositiveNumber);

  pinfeed::bench::sampler_bench_options so;
  auto* bsampler = bench->add_subcommand("sampler", "balanced sampler: naive loop, single, batched, graph, label-read floor");
  bsampler->add_option("--sizes", so.sizes, "N values (K = N/10)");
  bsampler->add_option("--max-cpu-n", so.max_cpu_n, "largest N run on the CPU");
  bsampler->add_option("-B,--rows", so.rows, "rows of the batched runs")->check(CLI::PositiveNumber);
  bsampler->add_option("-D,--features", so.d, "feature floats gathered per pick");
  bsampler->add_option("--device", so.device, "cpu, cuda or all");
  bsampler->add_option("--repeats", so.repeats, "timed samples (median, p10, p90)")->check(CLI::PositiveNumber);
  bsampler->add_option("--min-sample-ms", so.min_sample_ms, "each timed sample lasts at least this long");
  bsampler->add_flag("--temp-only", so.temp_only, "only the GPU call's temp storage, B in --temp-rows by N in --sizes (queries, nothing runs)");
  bsampler->add_option("--temp-rows", so.temp_rows, "B values of --temp-only");
  bsampler->add_option("--simd", so.simd, "SIMD levels of the CPU rows, one after another: scalar, avx2, avx512 or all");

  pinfeed::bench::pipeline_bench_options po;
  auto* bpipe = bench->add_subcommand("pipeline", "images/s: the article's synthetic pipeline, JPEG folder and shards (rrc+flip)");
  // The options of the benchmarks that time epochs over the generated JPEG dataset.
  const auto add_dataset_options = [](CLI::App* cmd, auto& o) {
    cmd->add_option("--data", o.data_dir, "where the generated JPEG dataset is kept");
    cmd->add_option("--images", o.images, "JPEGs in the dataset")->check(CLI::PositiveNumber);
    cmd->add_option("-w,--workers", o.workers, "worker threads (0: one per hardware thread)");
    cmd->add_option("-b,--batch", o.batch, "batch size")->check(CLI::PositiveNumber);
    cmd->add_option("--repeats", o.repeats, "epochs timed (median)")->check(CLI::PositiveNumber);
  };
  add_dataset_options(bpipe, po);
  bpipe->add_option("--synthetic-samples", po.synthetic_samples, "synthetic images per epoch")->check(CLI::PositiveNumber);
  bpipe->add_option("--simd", po.simd, "SIMD levels to measure at, one after another: scalar, avx2, avx512 or all");

  pinfeed::bench::remote_bench_options rbo;
  auto* bremote = bench->add_subcommand("remote", "remote shards: local files vs loopback nginx vs a proxy adding latency");
  add_dataset_options(bremote, rbo);
  bremote->add_option("--shard-mb", rbo.shard_mb, "target shard size in MiB")->check(CLI::PositiveNumber);
  bremote->add_option("--latency-ms", rbo.latency_ms, "latency the proxy adds to every request")->check(CLI::NonNegativeNumber);
  bremote->add_option("--requests-in-flight", rbo.requests_in_flight, "remote reader: requests at once (0: its default)");
  bremote->add_option("--read-ahead", rbo.read_ahead, "remote reader: samples read ahead (0: its default)");
  bremote->add_option("--window-shards", rbo.window_shards, "whole-shard rows: shards shuffled together (0: the remote readers' default)")
      ->check(CLI::NonNegativeNumber);
  bremote->add_option("--cache-mb", rbo.cache_mb, "whole-shard rows: cache size (0: three windows of the window, or of 4 shards)")
      ->check(CLI::NonNegativeNumber);
  bremote->add_flag("!--preempting-servers", rbo.batch_servers,
                    "run nginx and the proxy with the default scheduling policy, not SCHED_BATCH");
  bremote->add_flag("!--preempting-fetch", rbo.batch_fetch,
                    "run the readers' transfer threads with the default scheduling policy (batch_scheduling off)");

  pinfeed::bench::doctor_bench_options dbo;
  auto* bdoctor = bench->add_subcommand("doctor", "the doctor's overhead: pinfeed run's loop vs the doctor's L0, and the ladder's time");
  bdoctor->add_option("--transforms", dbo.transforms, "pipeline on the 1024x1024 synthetic source");
  bdoctor->add_option("--samples", dbo.samples, "synthetic images per epoch")->check(CLI::PositiveNumber);
  bdoctor->add_option("-b,--batch", dbo.batch, "batch size")->check(CLI::PositiveNumber);
  bdoctor->add_option("-w,--workers", dbo.workers, "worker threads (0: one per hardware thread)");
  bdoctor->add_option("--seconds", dbo.seconds, "timed seconds per measurement")->check(CLI::PositiveNumber);
  bdoctor->add_option("--repeats", dbo.repeats, "measurements of each (medians compared)")->check(CLI::PositiveNumber);
  bdoctor->add_flag("!--no-ladder", dbo.ladder, "skip timing the whole ladder");

#endif
  CLI11_PARSE(app, argc, argv);
  // This program owns its process, so it (not the library) sets TBB's process-wide thread cap: as
  // many workers as asked for, and one per hardware thread for --workers 0, plus the calling thread.
  std::size_t asked = std::max({ra.workers, da.workers, std::size_t{std::max(1u, std::thread::hardware_concurrency())}});
#if PINFEED_TOOL_BENCH
  asked = std::max({asked, ho.workers, po.workers, dbo.workers, rbo.workers});
#endif
  const tbb::global_control thread_cap(tbb::global_control::max_allowed_parallelism, asked + 1);
  try {
    // A bad PINFEED_SIMD is an error here, before any work (the library only logs it).
    if (const char* simd = std::getenv("PINFEED_SIMD"); simd != nullptr && *simd != '\0') {
      try {
        (void)pinfeed::parse_simd_level(simd);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "pinfeed: error: PINFEED_SIMD: %s\n", e.what());
        return 2;
      }
    }
    if (info->parsed()) return cmd_info();
    if (run->parsed()) return cmd_run(ra);
    if (doc->parsed()) return cmd_doctor(da, dd);
    if (sample->parsed()) return cmd_sample(sa);
    if (pack->parsed()) return cmd_pack(pa);
    if (index->parsed()) return cmd_index(index_pattern);
#if PINFEED_TOOL_BENCH
    if (bpipe->parsed()) {
      pinfeed::bench::run_pipeline(po, std::cout);
      return 0;
    }
    if (bremote->parsed()) {
      pinfeed::bench::run_remote(rbo, std::cout);
      return 0;
    }
    if (bdoctor->parsed()) {
      pinfeed::bench::run_doctor_bench(dbo, std::cout);
      return 0;
    }
    if (bsampler->parsed()) {
      pinfeed::bench::run_sampler(so, std::cout);
      return 0;
    }
    if (h2d->parsed()) {
      pinfeed::bench::run_h2d(ho, std::cout);
      return 0;
    }
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pinfeed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
