#include "remote_bench.hpp"

#include "bench_rows.hpp"
#include "loopback_servers.hpp"
#include "pipeline_bench.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/loader.hpp"

namespace fs = std::filesystem;

namespace pinfeed::bench {
namespace {

struct timed {
  double median_s = 0;
  loaders::remote_counters during;  ///< what the timed epochs fetched, all of them together
  int epochs = 0;
};

/// Runs one warm-up and `repeats` timed shuffled epochs of the workload over `reader`.
timed run_epochs(const std::shared_ptr<loaders::image_reader>& reader, const remote_bench_options& o,
                 std::size_t workers) {
  loader_options lo;
  lo.batch_size = o.batch;
  lo.workers = workers;
  lo.prefetch = 4;
  lo.device = "cpu";
  lo.order.shuffle = true;
  loader l(std::make_shared<loaders::pipeline_source>(reader, loaders::parse_pipeline("rrc(224),hflip")), lo);
  std::vector<double> t;
  loaders::remote_counters before{};
  for (int r = 0; r <= o.repeats; ++r) {
    if (r == 1) before = loaders::remote_stats(*reader);
    l.start_epoch(static_cast<std::uint32_t>(r));
    const auto t0 = std::chrono::steady_clock::now();
    while (auto b = l.next()) {
    }
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto after = loaders::remote_stats(*reader);
  std::sort(t.begin(), t.end());
  timed out;
  out.median_s = t[t.size() / 2];
  out.epochs = o.repeats;
  out.during = after;
  out.during.requests -= before.requests;
  out.during.retries -= before.retries;
  out.during.bytes -= before.bytes;
  out.during.wait_ms -= before.wait_ms;
  out.during.read_ahead -= before.read_ahead;
  out.during.shards -= before.shards;
  out.during.streamed -= before.streamed;
  return out;
}

}  // namespace

void run_remote(const remote_bench_options& o, std::ostream& out) {
  if (o.images < 1 || o.repeats < 1 || o.batch < 1 || !(o.shard_mb > 0) || o.latency_ms < 0)
    throw std::invalid_argument("bench remote: images, repeats and batch must be positive, shard_mb > 0, latency_ms >= 0");
  const std::size_t workers = o.workers ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  ensure_jpeg_dataset(o.data_dir, o.images);
  const auto shard_bytes = static_cast<std::uint64_t>(o.shard_mb * 1048576.0);
  const fs::path shard_dir = fs::path(o.data_dir) / ("remote-shards-" + std::to_string(shard_bytes));
  if (!fs::exists(shard_dir / "ready")) {
    fs::remove_all(shard_dir);
    fs::create_directories(shard_dir);
    (void)loaders::write_shards(loaders::list_image_folder((fs::path(o.data_dir) / "jpeg").string()).files,
                                (shard_dir / "train").string(), shard_bytes);
    std::ofstream(shard_dir / "ready") << "\n";
  }
  const auto paths = loaders::expand_shard_pattern((shard_dir / "train-*.tar").string());
  std::uint64_t total_bytes = 0, largest = 0;
  for (const auto& p : paths) {
    total_bytes += fs::file_size(p);
    largest = std::max<std::uint64_t>(largest, fs::file_size(p));
    if (!fs::exists(loaders::shard_index_path(p))) loaders::write_shard_index(p);  // shards packed before sidecars
  }

  loaders::remote_options ro;
  if (o.requests_in_flight != 0) ro.requests_in_flight = o.requests_in_flight;
  if (o.read_ahead != 0) ro.read_ahead = o.read_ahead;
  loaders::shard_options whole;
  whole.window_shards = o.window_shards;
  loaders::remote_options wo = ro;
  wo.cache_bytes = o.cache_mb > 0 ? static_cast<std::uint64_t>(o.cache_mb * 1048576.0) : 3ull * o.window_shards * largest;
  const auto local = loaders::make_shard_reader(paths);
  const auto images = static_cast<double>(local->size());
  auto row = [&](const std::string& mode, bool whole_shards, const timed& t, double local_s, std::uint64_t index_bytes) {
    const double per_epoch = static_cast<double>(t.epochs) * images;
    const bool remote = mode != "local";
    out << with_host({{"bench", "remote"},
                      {"mode", mode},
                      {"read", whole_shards ? "whole" : "range"},
                      {"images", local->size()},
                      {"shards", paths.size()},
                      {"workers", workers},
                      {"median_s", t.median_s},
                      {"images_per_s", images / t.median_s},
                      {"ratio_to_local", local_s / t.median_s},
                      {"bytes_per_image", static_cast<double>(t.during.bytes) / per_epoch},
                      {"shard_bytes_per_image", static_cast<double>(total_bytes) / images},
                      {"bytes_ratio", static_cast<double>(t.during.bytes) / per_epoch / (static_cast<double>(total_bytes) / images)},
                      {"index_bytes", index_bytes},
                      {"requests_per_image", static_cast<double>(t.during.requests) / per_epoch},
                      {"retries", t.during.retries},
                      {"fetch_wait_ms_per_image", t.during.wait_ms / per_epoch},
                      {"requests_in_flight", remote ? ro.requests_in_flight : 0},
                      {"read_ahead", remote ? ro.read_ahead : 0},
                      {"window_shards", whole_shards ? o.window_shards : 0},
                      {"cache_bytes", remote && whole_shards ? wo.cache_bytes : 0},
                      {"streamed", t.during.streamed},
                      {"latency_ms", mode == "latency" ? o.latency_ms : 0}})
               .dump()
        << std::endl;
  };
  const timed base = run_epochs(local, o, workers);
  row("local", false, base, base.median_s, 0);
  const timed base_window = run_epochs(loaders::make_shard_reader(paths, whole), o, workers);
  row("local", true, base_window, base_window.median_s, 0);
  if (!loopback::have_nginx()) {
    out << with_host({{"bench", "remote"}, {"skipped", "loopback, latency"}, {"reason", "nginx is not installed (Debian: nginx-light)"}})
               .dump()
        << std::endl;
    return;
  }
  const fs::path work = fs::path(o.data_dir) / "nginx-work";
  fs::create_directories(work);
  loopback::nginx_server server(shard_dir, work);
  loopback::fault_proxy slow(server.port(), {.latency_ms = o.latency_ms});
  for (const bool whole_shards : {false, true}) {
    for (const auto& [mode, base_url] : {std::pair<std::string, std::string>{"loopback", server.url()},
                                         std::pair<std::string, std::string>{"latency", slow.url()}}) {
      std::vector<std::string> urls;
      for (const auto& p : paths) urls.push_back(base_url + "/" + fs::path(p).filename().string());
      const auto remote = whole_shards ? loaders::make_remote_shard_reader(urls, whole, wo)
                                       : loaders::make_remote_shard_reader(urls, {}, ro);
      const std::uint64_t index_bytes = loaders::remote_stats(*remote).bytes;
      row(mode, whole_shards, run_epochs(remote, o, workers), (whole_shards ? base_window : base).median_s, index_bytes);
    }
  }
}

}  // namespace pinfeed::bench
