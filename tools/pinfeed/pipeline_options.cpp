// The options run and doctor share (pipeline_options.hpp).
#include "pipeline_options.hpp"

#include <limits>
#include <stdexcept>

#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::tool {

std::optional<std::vector<loaders::image_file>> image_files_of(const std::string& source) {
  if (source.rfind("folder:", 0) == 0) return loaders::list_image_folder(source.substr(7)).files;
  if (source.rfind("list:", 0) == 0) return loaders::read_file_list(source.substr(5));
  return std::nullopt;
}

loaders::decode_options decode_options_of(const run_args& a) {
  loaders::decode_options d;
  d.max_pixels = a.max_pixels;
  d.strict = a.strict_decode;
  d.apply_exif_orientation = a.exif_orientation;
  if (!a.max_decode_memory.empty()) {
    try {
      d.max_decode_bytes = parse_bytes(a.max_decode_memory);
    } catch (const std::invalid_argument& e) {
      throw pinfeed::invalid_argument(std::string("--max-decode-memory: ") + e.what());
    }
  }
  return d;
}

std::size_t count_or_auto(const char* option, const std::string& text, std::size_t most) {
  if (text == "auto") return auto_tune;
  const bool digits = !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
  const std::size_t n = digits ? std::stoul(text) : 0;
  if (n == 0 || n > most)
    throw pinfeed::invalid_argument(std::string(option) + " " + (text.empty() ? "''" : text) +
                                ": give a whole number from 1 to " + std::to_string(most) + ", or auto");
  return n;
}

std::size_t workers_asked(const run_args& a) noexcept {
  try {
    const std::optional<std::size_t> from_config = config_of(a) ? config_of(a)->workers : std::nullopt;
    const std::size_t n = a.workers.empty() && from_config ? *from_config : count_or_auto("--workers", a.workers, 1024);
    return n == auto_tune ? 0 : n;
  } catch (const std::exception&) {  // make_loader_options reports it
    return 0;
  }
}

const std::optional<loader_config>& config_of(const run_args& a) {
  static std::optional<loader_config> config;
  static std::string read_from;
  if (!a.config.empty() && read_from != a.config) {
    config = loader_config::read(a.config);
    read_from = a.config;
  }
  return config;
}

pipeline_parts make_pipeline(const run_args& a, const device_choice& dev) {
  if (!a.transforms.empty() && !a.pipeline_file.empty())
    throw pinfeed::invalid_argument("give either --transforms or --pipeline, not both");
  pipeline_parts p;
  if (!a.transforms.empty()) p.steps = loaders::parse_pipeline(a.transforms);
  if (!a.pipeline_file.empty()) p.steps = loaders::load_pipeline_file(a.pipeline_file);
  // Sources: synthetic | folder:PATH (ImageFolder layout) | list:FILE ("path label" lines) | shards:PATTERN.
  if (a.source == "synthetic") {
    p.reader = loaders::make_reader_from_source(
        loaders::make_synthetic_source({a.samples, a.height, a.width, 1000}));
  } else if (a.source.rfind("shards:", 0) == 0) {
    loaders::shard_options so;
    so.decode = decode_options_of(a);
    if (a.shard_window >= 0) so.window_shards = static_cast<std::uint32_t>(a.shard_window);
    const std::string pattern = a.source.substr(7);
    if (loaders::is_remote_location(pattern)) {
      if (a.shard_window == 0 && !a.remote_cache_dir.empty())
        throw pinfeed::invalid_argument("--remote-cache-dir holds shards read whole; --shard-window 0 reads samples one by one");
      loaders::remote_options ro;
      if (a.requests_in_flight > 0) ro.requests_in_flight = a.requests_in_flight;
      else if (const auto& c = config_of(a); c && c->requests_in_flight) ro.requests_in_flight = c->requests_in_flight;
      ro.cache_bytes = static_cast<std::uint64_t>(a.remote_cache_mb * 1048576.0);
      ro.cache_dir = a.remote_cache_dir;
      ro.index_cache_dir = a.remote_index_cache;
      p.reader = loaders::make_remote_shard_reader(loaders::expand_remote_pattern(pattern, ro), so, ro);
      p.remote = p.reader;
    } else {
      if (!a.remote_cache_dir.empty())
        throw pinfeed::invalid_argument("--remote-cache-dir caches shards of remote storage; '" + pattern + "' is local");
      if (!a.remote_index_cache.empty())
        throw pinfeed::invalid_argument("--remote-index-cache caches indexes of remote shards; '" + pattern +
                                    "' is local (pinfeed pack writes sidecar indexes)");
      p.reader = loaders::make_shard_reader(loaders::expand_shard_pattern(pattern), so);
    }
  } else if (a.shard_window > 0) {
    throw pinfeed::invalid_argument("--shard-window " + std::to_string(a.shard_window) + " orders tar shards; source '" +
                                a.source + "' has none");
  } else if (auto files = image_files_of(a.source)) {
    p.reader = loaders::make_image_files_reader(std::move(*files), decode_options_of(a));
  } else {
    throw pinfeed::invalid_argument("unknown source '" + a.source +
                                "' (synthetic, folder:PATH, list:FILE or shards:PATTERN)");
  }
  const storage_emulation storage{a.latency_ms, a.bandwidth_mb_s};
  if (storage.active()) p.reader = make_slow_storage(p.reader, storage);
  p.source = source_options(a, dev);
  return p;
}

loaders::pipeline_source_options source_options(const run_args& a, const device_choice& dev) {
  loaders::pipeline_source_options po;
  po.device_tail = dev.is_cuda();  // with a GPU the colour/scale tail runs there: the slot keeps uint8
  if (a.on_error == "skip") po.on_error = loaders::error_policy::skip;
  else if (a.on_error != "fail") throw pinfeed::invalid_argument("--on-error must be fail or skip, got '" + a.on_error + "'");
  if (a.max_bad_fraction > 0.0 && a.on_error != "skip")
    throw pinfeed::invalid_argument("--max-bad-fraction " + std::to_string(a.max_bad_fraction) +
                                " caps --on-error skip; with --on-error fail the first bad sample already fails");
  po.max_bad_fraction = a.max_bad_fraction;
  po.augment_on = loaders::parse_augment_place(a.augment_on);
  if (po.augment_on == loaders::augment_place::device && !dev.is_cuda())
    throw pinfeed::invalid_argument("--augment-on device runs the steps on the GPU, but the batches stay on the " + dev.to_string() +
                                    " (--device): use --augment-on host or auto");
  const auto& config = config_of(a);
  po.decode = loaders::parse_decode_place(!a.decode.empty() ? a.decode : config && config->decode ? *config->decode : "host");
  if (po.decode == loaders::decode_place::automatic && !dev.is_cuda()) po.decode = loaders::decode_place::host;  // batches stay here
  if ((po.decode == loaders::decode_place::device || po.decode == loaders::decode_place::device_inexact) && !dev.is_cuda())
    throw pinfeed::invalid_argument("decode " + std::string(loaders::to_string(po.decode)) +
                                    " (--decode, or the --config file) decodes on the GPU, but the batches stay on the " + dev.to_string() +
                                    " (--device): use --decode host or auto");
  return po;
}

loader_options make_loader_options(const run_args& a, const device_choice& dev) {
  loader_options o;
  o.batch_size = a.batch;
  o.workers = o.prefetch = auto_tune;
  if (const auto& c = config_of(a)) c->apply_to(o);  // the command line's own options win
  if (!a.workers.empty()) o.workers = count_or_auto("--workers", a.workers, 1024);
  if (!a.prefetch.empty()) o.prefetch = count_or_auto("--prefetch", a.prefetch, 4095);
  o.device = dev.to_string();
  if (a.bind == "none") o.bind = cpu_binding::none;
  else if (a.bind != "plan") throw pinfeed::invalid_argument("--bind must be plan or none, got '" + a.bind + "'");
  o.seed = a.seed;
  o.trace = !a.trace.empty();
  if (!a.memory_budget.empty()) {
    try {
      o.memory_budget = parse_bytes(a.memory_budget);
    } catch (const std::invalid_argument& e) {
      throw pinfeed::invalid_argument(std::string("--memory-budget ") + e.what());
    }
  }
  o.order = {a.shuffle, a.rank, a.world, a.drop_remainder};
  if (a.copy_bandwidth_mb_s > 0) {
    if (!dev.is_cuda())
      throw pinfeed::invalid_argument("--copy-bandwidth-mb-s " + std::to_string(a.copy_bandwidth_mb_s) +
                                  " emulates a slow host-to-device link, but batches stay on the " + dev.to_string() +
                                  ": nothing is copied");
    o.after_copy = throttle_copy(a.copy_bandwidth_mb_s);
  }
  return o;
}

void add_sample_options(CLI::App* app, run_args& a) {
  app->add_option("--on-error", a.on_error,
                  "fail (default) or skip: a bad sample is read once per epoch and its slot gets a stand-in drawn from the epoch");
  app->add_option("--max-bad-fraction", a.max_bad_fraction,
                  "with --on-error skip: fail when more than this fraction of an epoch is bad (default 0: off)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--max-pixels", a.max_pixels, "reject images with more pixels (decompression bombs)");
  app->add_option("--max-decode-memory", a.max_decode_memory,
                  "refuse an image whose decode needs more memory than this (a size, e.g. 2GiB; 0: no limit), "
                  "estimated from its header (default: this process's share of the node's memory over the threads "
                  "that may decode at once)");
  app->add_flag("--strict-decode", a.strict_decode,
                "refuse a JPEG at libjpeg's first corrupt-data warning (default: decode it as libjpeg and Pillow do, "
                "counted as decode warnings in the stats; a file that ends early is refused either way)");
  app->add_flag("--exif-orientation", a.exif_orientation,
                "turn and mirror each image as its EXIF orientation says, as Pillow's ImageOps.exif_transpose does "
                "(default: the pixels as stored, as torchvision's loaders give them; the device decode paths do not take it)");
  app->add_option("--decode", a.decode,
                  "where JPEGs are decoded: host (default), device (entropy decoding on the workers, the rest on the GPU, "
                  "the same pixels; a first step that decodes a window, then only flips), auto (device where it can) or "
                  "device-inexact (nvJPEG, loaded at run time, on the GPU: other pixels than the host's; the exact device "
                  "path where nvJPEG is missing or fails to start); default: the --config file's, else host")
      ->check(CLI::IsMember({"host", "device", "auto", "device-inexact"}));
  app->add_option("--augment-on", a.augment_on,
                  "where the steps after the decode's window and flips run: host, device (on the GPU after the copy, "
                  "the host's pixels bit for bit; every such step needs a device form, the tail runs on the GPU after "
                  "them) or auto (default: device where --decode puts the JPEGs on the GPU and the steps allow it)")
      ->check(CLI::IsMember({"host", "device", "auto"}));
}

void add_pipeline_options(CLI::App* app, run_args& a) {
  app->add_option("--source", a.source,
                  "synthetic, folder:PATH (ImageFolder layout), list:FILE (path label lines) or shards:PATTERN "
                  "(tar shards: glob or train-{000..127}.tar, local or http://, https://, s3://)");
  add_sample_options(app, a);
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
      ->check(CLI::Range(std::size_t{1}, loaders::kMaxRequestsInFlight));
  app->add_option("--memory-budget", a.memory_budget,
                  "the most memory the loader and its source may hold (slots, caches, read-ahead), e.g. 8GiB; "
                  "more fails before the first batch, naming each part");
  app->add_option("--latency-ms", a.latency_ms, "emulate slow storage: added latency per read")->check(CLI::NonNegativeNumber);
  app->add_option("--bandwidth-mb-s", a.bandwidth_mb_s, "emulate slow storage: shared read bandwidth cap (0: none)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--samples", a.samples, "samples in the dataset")->check(CLI::PositiveNumber);
  app->add_option("--height", a.height, "synthetic image height")->check(CLI::PositiveNumber);
  app->add_option("--width", a.width, "synthetic image width")->check(CLI::PositiveNumber);
  app->add_option("-b,--batch", a.batch, "batch size")->check(CLI::PositiveNumber);
  app->add_option("-w,--workers", a.workers,
                  "worker threads, or auto (the default): chosen as it runs, between 1 and this rank's cores in the node "
                  "plan (pinfeed info), from how long the consumer waits and how busy the cores are");
  app->add_option("--prefetch", a.prefetch,
                  "batches produced ahead, or auto (the default): 2, more while the consumer still waits with no "
                  "worker to add, up to 8 and the memory budget");
  app->add_option("--config", a.config,
                  "settings written by pinfeed doctor --write-config (JSON, docs/config.md); options given here win");
  app->add_option("--device", a.device, "auto, cpu, cuda, cuda:N or local_rank");
  app->add_option("--bind", a.bind,
                  "plan (default): workers on this rank's CPUs near its GPU and pinned slots on its NUMA node, as "
                  "`pinfeed info` shows; none: as the OS places them");
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

}  // namespace pinfeed::tool
