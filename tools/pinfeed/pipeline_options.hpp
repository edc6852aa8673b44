#pragma once
// What `run` and `doctor` share: the options that describe a pipeline and its loader, and what
// they make (the reader behind emulated slow storage when asked, the transforms, the loader's
// options).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/loader.hpp"

namespace pinfeed::tool {

struct run_args {
  std::string source = "synthetic";
  std::uint64_t samples = 2048;
  std::int64_t height = 1024, width = 1024;
  std::size_t batch = 32, requests_in_flight = 0;  // 0: adapt
  std::string workers, prefetch;  ///< a positive number or auto; empty: from --config, else auto
  std::string config;             ///< a loader_config file (pinfeed doctor --write-config)
  std::string device = "auto";
  std::string bind = "plan";  ///< plan or none (loader_options::bind)
  std::uint64_t limit = 0;
  std::uint32_t epochs = 1;
  std::uint64_t seed = 0;
  std::string save_batches;  ///< --save-batches DIR (run)
  std::string trace, json, resume, save_state, transforms, pipeline_file, on_error = "fail", cache = "none";
  std::size_t cache_pool = 64;
  std::int64_t shard_window = -1;  ///< -1: the reader's default (local: 0; remote: whole shards)
  double remote_cache_mb = 1024;
  std::string remote_cache_dir, remote_index_cache;
  std::string memory_budget;  ///< a size (parse_bytes), empty: none
  std::string augment_on = "auto";  ///< host, device or auto (loaders::parse_augment_place)
  std::string decode;  ///< host, device or auto (loaders::parse_decode_place); empty: from --config, else host
  std::int64_t max_pixels = std::int64_t{1} << 28;
  std::string max_decode_memory;  ///< a size (parse_bytes), 0: none; empty: the node plan's (decode_options)
  double max_bad_fraction = 0.0;
  double latency_ms = 0, bandwidth_mb_s = 0, step_ms = 0, copy_bandwidth_mb_s = 0;
  bool strict_decode = false;  ///< --strict-decode: a JPEG libjpeg warns of is refused
  bool exif_orientation = false;  ///< --exif-orientation: images turned as their EXIF orientation says
  bool checksums = false, normalize = false, shuffle = false, print_indices = false, drop_remainder = false;
  int rank = -1, world = 1;
};

/// `text` as a count from 1 to `most`, or auto_tune for "auto". Throws std::invalid_argument
/// naming `option` and the value.
[[nodiscard]] std::size_t count_or_auto(const char* option, const std::string& text, std::size_t most);
/// The worker threads asked for (--workers, else the --config file's), for TBB's process-wide
/// cap: 0 for auto or a bad value (which make_loader_options reports).
[[nodiscard]] std::size_t workers_asked(const run_args& a) noexcept;
/// The config file of --config, if one was given (read once).
[[nodiscard]] const std::optional<loader_config>& config_of(const run_args& a);

/// What to do with bad samples and where to decode: --on-error, --max-bad-fraction, --max-pixels, --decode.
void add_sample_options(CLI::App* app, run_args& a);
/// The pipeline_source options of those, and the tail's place (on a GPU, there). Throws
/// std::invalid_argument naming the option that is wrong.
[[nodiscard]] loaders::pipeline_source_options source_options(const run_args& a, const device_choice& dev);

/// The options that describe a pipeline and its loader (shared by run and doctor).
void add_pipeline_options(CLI::App* app, run_args& a);

/// The files of a "folder:PATH" (ImageFolder layout) or "list:FILE" ("path label" lines) source;
/// nullopt for another kind of source.
[[nodiscard]] std::optional<std::vector<loaders::image_file>> image_files_of(const std::string& source);

/// The decode options of --max-pixels, --max-decode-memory, --strict-decode and --exif-orientation.
/// Throws std::invalid_argument naming the option whose value is no size.
[[nodiscard]] loaders::decode_options decode_options_of(const run_args& a);

/// What the options describe: a reader (behind emulated slow storage when asked), its transforms
/// and the source options.
struct pipeline_parts {
  std::shared_ptr<loaders::image_reader> reader;
  std::shared_ptr<loaders::image_reader> remote;  ///< the remote shard reader inside, if any
  loaders::pipeline steps;
  loaders::pipeline_source_options source;
};

/// Throws std::invalid_argument naming the option that is wrong.
[[nodiscard]] pipeline_parts make_pipeline(const run_args& a, const device_choice& dev);
[[nodiscard]] loader_options make_loader_options(const run_args& a, const device_choice& dev);

}  // namespace pinfeed::tool
