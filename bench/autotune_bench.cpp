#include "autotune_bench.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench_rows.hpp"
#include "loopback_servers.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pipeline_bench.hpp"

namespace fs = std::filesystem;

namespace pinfeed::bench {
namespace {

/// One run of the grid, or auto.
struct setting {
  std::size_t workers = auto_tune, prefetch = auto_tune, in_flight = 0;  // in_flight 0: the reader's default
  std::vector<double> rates;  // images/s, one per round
  loader::tuning_report chose;
  [[nodiscard]] bool is_auto() const { return workers == auto_tune; }
};

/// A workload: makes its source for a number of requests in flight (remote; else ignored).
struct workload {
  std::string name;
  std::function<std::shared_ptr<source>(std::size_t in_flight)> make;
  bool remote = false;
};

/// Images/s over `epochs` timed epochs after one untimed, the loader under `s`.
double run_once(const workload& w, setting& s, const autotune_bench_options& o) {
  loader_options lo;
  lo.batch_size = o.batch;
  lo.workers = s.workers;
  lo.prefetch = s.prefetch;
  lo.device = "cpu";
  lo.order.shuffle = true;
  loader l(w.make(s.in_flight), lo);
  std::uint64_t images = 0;
  double seconds = 0;
  for (int e = 0; e <= o.epochs; ++e) {
    l.start_epoch(static_cast<std::uint32_t>(e));
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t n = 0;
    while (auto b = l.next()) n += b->size();
    if (e == 0) continue;
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    images += n;
  }
  if (s.is_auto()) s.chose = l.tuning();
  return static_cast<double>(images) / seconds;
}

void run_workload(const workload& w, const autotune_bench_options& o, std::ostream& out) {
  std::vector<std::size_t> workers = o.workers;
  if (workers.empty())
    for (std::size_t k = 1; k <= std::max(1u, std::thread::hardware_concurrency()); ++k) workers.push_back(k);
  std::vector<setting> all;
  const std::vector<std::size_t> in_flight = w.remote ? o.in_flight : std::vector<std::size_t>{0};
  for (const std::size_t f : in_flight)
    for (const std::size_t k : workers)
      for (const std::size_t p : o.prefetch) all.push_back({k, p, f, {}, {}});
  all.push_back({});  // auto: workers, prefetch and (remote) the requests in flight
  for (int r = 0; r < o.rounds; ++r)
    for (auto& s : all) s.rates.push_back(run_once(w, s, o));
  const setting* best = nullptr;
  for (const auto& s : all) {
    nlohmann::json row{{"bench", "autotune"},           {"workload", w.name},
                       {"setting", s.is_auto() ? "auto" : "grid"}, {"images_per_s", median_of(s.rates)},
                       {"rounds_images_per_s", s.rates}, {"epochs", o.epochs},
                       {"batch", o.batch}};
    if (s.is_auto()) {
      row["chose_workers"] = s.chose.workers;
      row["chose_prefetch"] = s.chose.prefetch;
      row["workers_most"] = s.chose.workers_most;
      row["reason"] = s.chose.reason;
    } else {
      row["workers"] = s.workers;
      row["prefetch"] = s.prefetch;
      if (!best || median_of(s.rates) > median_of(best->rates)) best = &s;
    }
    if (w.remote) {
      row["requests_in_flight"] = s.in_flight == 0 ? nlohmann::json("default") : nlohmann::json(s.in_flight);
      row["latency_ms"] = o.latency_ms;
    }
    out << with_host(row).dump() << std::endl;
  }
  const double automatic = median_of(all.back().rates), top = median_of(best->rates);
  std::string best_setting = "workers " + std::to_string(best->workers) + ", prefetch " + std::to_string(best->prefetch);
  if (w.remote) best_setting += ", requests in flight " + std::to_string(best->in_flight);
  out << with_host({{"bench", "autotune"},
                    {"workload", w.name},
                    {"summary", true},
                    {"auto_images_per_s", automatic},
                    {"best_images_per_s", top},
                    {"best_setting", best_setting},
                    {"grid_settings", all.size() - 1},
                    {"auto_over_best", automatic / top}})
             .dump()
      << std::endl;
}

}  // namespace

void run_autotune(const autotune_bench_options& o, std::ostream& out) {
  for (const auto& name : o.workloads)  // before the dataset is made
    if (name != "synthetic" && name != "jpeg_folder" && name != "remote")
      throw std::invalid_argument("bench autotune: unknown workload '" + name + "' (synthetic, jpeg_folder, remote)");
  ensure_jpeg_dataset(o.data_dir, o.images);
  const auto files = loaders::list_image_folder((fs::path(o.data_dir) / "jpeg").string()).files;
  const auto steps = loaders::parse_pipeline("rrc(224),hflip");
  for (const auto& name : o.workloads) {
    if (name == "synthetic") {
      run_workload({"synthetic_article",
                    [&](std::size_t) {
                      return std::make_shared<loaders::pipeline_source>(
                          loaders::make_synthetic_source({static_cast<std::uint64_t>(o.synthetic_samples), 1024, 1024, 1000}),
                          loaders::parse_pipeline("crop(256),mask(0.25),ycbcr,scale"));
                    }},
                   o, out);
    } else if (name == "jpeg_folder") {
      run_workload({"jpeg_folder_rrc_flip",
                    [&](std::size_t) {
                      return std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files), steps);
                    }},
                   o, out);
    } else {  // remote
      if (!loopback::have_nginx()) {
        out << with_host({{"bench", "autotune"}, {"workload", "remote_shards"}, {"skipped", "nginx is not installed (Debian: nginx-light)"}})
                   .dump()
            << std::endl;
        continue;
      }
      const fs::path work = fs::path(o.data_dir) / "nginx-work";
      fs::create_directories(work);
      loopback::nginx_server server(fs::path(o.data_dir) / "shards", work, {.batch = true, .cache_open_files = true});
      loopback::fault_proxy slow(server.port(), {.latency_ms = o.latency_ms, .batch_threads = true});
      std::vector<std::string> urls;
      for (const auto& p : loaders::expand_shard_pattern((fs::path(o.data_dir) / "shards" / "train-*.tar").string()))
        urls.push_back(slow.url() + "/" + fs::path(p).filename().string());
      run_workload({"remote_shards_" + std::to_string(o.latency_ms) + "ms_rrc_flip",
                    [&](std::size_t in_flight) {
                      loaders::remote_options ro;
                      if (in_flight > 0) ro.requests_in_flight = in_flight;
                      return std::make_shared<loaders::pipeline_source>(
                          loaders::make_remote_shard_reader(urls, {}, ro), steps);
                    },
                    true},
                   o, out);
    }
  }
}

}  // namespace pinfeed::bench
