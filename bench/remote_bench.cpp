#include "remote_bench.hpp"

#include "bench_rows.hpp"
#include "loopback_servers.hpp"
#include "pipeline_bench.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
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

/// One row of the bench: a reader with its loader, timed epoch by epoch.
struct contender {
  std::string mode;  ///< local, loopback or latency
  bool whole = false;
  std::shared_ptr<loaders::image_reader> reader;
  std::unique_ptr<loader> l;
  std::uint64_t index_bytes = 0;
  std::vector<double> times;       ///< seconds of each timed epoch, in round order
  std::vector<double> base_times;  ///< a remote row's: its local row's epoch run next to each of its own
  int base = -1;                   ///< a remote row's: the index of the local row it is compared with
  /// Requests the reader made while other rows ran (between its timed epochs): work that would
  /// slow the epoch paired with its own. Zero when the pairing is clean.
  std::uint64_t requests_between = 0;
  std::optional<std::uint64_t> requests_at_end;
  loaders::remote_counters before{}, after{};

  contender(std::string m, bool w, std::shared_ptr<loaders::image_reader> r, const remote_bench_options& o,
            std::size_t workers)
      : mode(std::move(m)), whole(w), reader(std::move(r)), index_bytes(loaders::remote_stats(*reader).bytes) {
    loader_options lo;
    lo.batch_size = o.batch;
    lo.workers = workers;
    lo.prefetch = 4;
    lo.device = "cpu";
    lo.order.shuffle = true;
    l = std::make_unique<loader>(std::make_shared<loaders::pipeline_source>(reader, loaders::parse_pipeline("rrc(224),hflip")),
                                 lo);
  }
  /// Runs epoch `e` to its end; returns its seconds.
  double epoch(std::uint32_t e) {
    if (requests_at_end) requests_between += loaders::remote_stats(*reader).requests - *requests_at_end;
    l->start_epoch(e);
    const auto t0 = std::chrono::steady_clock::now();
    while (auto b = l->next()) {
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    requests_at_end = loaders::remote_stats(*reader).requests;
    return s;
  }
  /// What the timed epochs fetched, all of them together.
  [[nodiscard]] loaders::remote_counters during() const {
    loaders::remote_counters d = after;
    d.requests -= before.requests;
    d.retries -= before.retries;
    d.bytes -= before.bytes;
    d.wait_ms -= before.wait_ms;
    d.read_ahead -= before.read_ahead;
    d.shards -= before.shards;
    d.streamed -= before.streamed;
    return d;
  }
};

/// Every contender's epochs, interleaved: one warm-up epoch each, then `repeats` rounds. In a
/// round each remote row runs one epoch right next to an epoch of its local row (the same epoch
/// number: the same order), so that a ratio pairs two epochs a second apart, whatever the host
/// did over the whole run: a guest's cores drift in speed by 10-20% over tens of seconds. Which
/// of the pair runs first alternates from pair to pair, so that a drift within one pair does not
/// favour either side. With no remote row, each local row runs one epoch a round.
void run_rounds(std::vector<contender>& all, int repeats) {
  for (auto& c : all) (void)c.epoch(0);
  for (auto& c : all) c.before = loaders::remote_stats(*c.reader);
  const bool paired = std::any_of(all.begin(), all.end(), [](const contender& c) { return c.base >= 0; });
  for (int r = 1; r <= repeats; ++r) {
    const auto e = static_cast<std::uint32_t>(r);
    int pair = r;
    for (auto& c : all) {
      if (!paired) {
        c.times.push_back(c.epoch(e));
        continue;
      }
      if (c.base < 0) continue;
      contender& b = all[static_cast<std::size_t>(c.base)];
      double tb = 0, tc = 0;
      if (pair++ % 2 == 1) {
        tb = b.epoch(e);
        tc = c.epoch(e);
      } else {
        tc = c.epoch(e);
        tb = b.epoch(e);
      }
      b.times.push_back(tb);
      c.times.push_back(tc);
      c.base_times.push_back(tb);
    }
  }
  for (auto& c : all) c.after = loaders::remote_stats(*c.reader);
}

/// The shards of the bench, packed once under the data directory, with their index sidecars.
struct bench_shards {
  fs::path dir;
  std::vector<std::string> paths;
  std::uint64_t total_bytes = 0, largest = 0;
};

bench_shards prepare_shards(const remote_bench_options& o) {
  ensure_jpeg_dataset(o.data_dir, o.images);
  const auto shard_bytes = static_cast<std::uint64_t>(o.shard_mb * 1048576.0);
  bench_shards s;
  s.dir = fs::path(o.data_dir) / ("remote-shards-" + std::to_string(shard_bytes));
  if (!fs::exists(s.dir / "ready")) {
    fs::remove_all(s.dir);
    fs::create_directories(s.dir);
    (void)loaders::write_shards(loaders::list_image_folder((fs::path(o.data_dir) / "jpeg").string()).files,
                                (s.dir / "train").string(), shard_bytes);
    std::ofstream(s.dir / "ready") << "\n";
  }
  s.paths = loaders::expand_shard_pattern((s.dir / "train-*.tar").string());
  for (const auto& p : s.paths) {
    s.total_bytes += fs::file_size(p);
    s.largest = std::max<std::uint64_t>(s.largest, fs::file_size(p));
    if (!fs::exists(loaders::shard_index_path(p))) loaders::write_shard_index(p);  // shards packed before sidecars
  }
  return s;
}

/// How the remote rows read: ranged (`ro`, no window) or whole shards (`wo`, the remote readers'
/// default read, window included).
struct read_plan {
  loaders::remote_options ro, wo;
  loaders::shard_options ranged, whole;
};

read_plan plan_reads(const remote_bench_options& o, std::uint64_t largest) {
  read_plan p;
  if (o.requests_in_flight != 0) p.ro.requests_in_flight = o.requests_in_flight;
  if (o.read_ahead != 0) p.ro.read_ahead = o.read_ahead;
  p.ro.batch_scheduling = o.batch_fetch;
  p.ranged.window_shards = 0;
  if (o.window_shards != 0) p.whole.window_shards = o.window_shards;
  p.wo = p.ro;
  p.wo.cache_bytes = o.cache_mb > 0 ? static_cast<std::uint64_t>(o.cache_mb * 1048576.0)
                                    : 3ull * (o.window_shards != 0 ? o.window_shards : loaders::kMaxDefaultWindow) * largest;
  return p;
}

/// What every row of a run shares.
struct row_context {
  const remote_bench_options& o;
  const bench_shards& shards;
  const read_plan& reads;
  std::size_t images = 0, workers = 0;
  std::uint32_t window = 0;  ///< the window every whole-shard row took
};

void print_row(std::ostream& out, const contender& c, const row_context& x) {
  const auto images = static_cast<double>(x.images);
  // The ratio of each round's pair of epochs, then their median.
  std::vector<double> ratios;
  for (std::size_t r = 0; r < c.times.size(); ++r) ratios.push_back(c.base < 0 ? 1.0 : c.base_times[r] / c.times[r]);
  const auto d = c.during();
  const double per_epoch = static_cast<double>(c.times.size()) * images;
  const bool remote = c.mode != "local";
  const double median_s = median_of(c.times);
  const double shard_bytes_per_image = static_cast<double>(x.shards.total_bytes) / images;
  out << with_host({{"bench", "remote"},
                    {"mode", c.mode},
                    {"read", c.whole ? "whole" : "range"},
                    {"images", x.images},
                    {"shards", x.shards.paths.size()},
                    {"workers", x.workers},
                    {"epochs", c.times.size()},
                    {"median_s", median_s},
                    {"images_per_s", images / median_s},
                    {"ratio_to_local", median_of(ratios)},
                    {"ratios_to_local", ratios},
                    {"bytes_per_image", static_cast<double>(d.bytes) / per_epoch},
                    {"shard_bytes_per_image", shard_bytes_per_image},
                    {"bytes_ratio", static_cast<double>(d.bytes) / per_epoch / shard_bytes_per_image},
                    {"index_bytes", c.index_bytes},
                    {"requests_per_image", static_cast<double>(d.requests) / per_epoch},
                    {"requests_between_epochs", c.requests_between},
                    {"retries", d.retries},
                    {"fetch_wait_ms_per_image", d.wait_ms / per_epoch},
                    {"requests_in_flight", remote ? c.after.requests_in_flight : 0},
                    {"read_ahead", remote && !c.whole ? c.after.read_ahead_depth : 0},
                    {"adaptive_in_flight", remote && !c.whole && !x.reads.ro.requests_in_flight},
                    {"default_read", c.whole},
                    {"window_shards", c.whole ? x.window : 0},
                    {"cache_bytes", remote && c.whole ? x.reads.wo.cache_bytes : 0},
                    {"streamed", d.streamed},
                    {"latency_ms", c.mode == "latency" ? x.o.latency_ms : 0},
                    {"batch_fetch", remote && x.o.batch_fetch},
                    {"batch_servers", remote && x.o.batch_servers}})
             .dump()
      << std::endl;
}

}  // namespace

void run_remote(const remote_bench_options& o, std::ostream& out) {
  if (o.images < 1 || o.repeats < 1 || o.batch < 1 || !(o.shard_mb > 0) || o.latency_ms < 0)
    throw std::invalid_argument("bench remote: images, repeats and batch must be positive, shard_mb > 0, latency_ms >= 0");
  const std::size_t workers = o.workers ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  const bench_shards shards = prepare_shards(o);
  const read_plan reads = plan_reads(o, shards.largest);
  const auto local = loaders::make_shard_reader(shards.paths);
  row_context rows{o, shards, reads, local->size(), workers, o.window_shards};
  std::vector<contender> all;
  all.emplace_back("local", false, local, o, workers);
  // The local rows of the shard-aware order take the window the remote readers chose.
  const auto add_whole_local = [&](std::uint32_t window) {
    loaders::shard_options same;
    same.window_shards = window;
    all.emplace(all.begin() + 1, "local", true, loaders::make_shard_reader(shards.paths, same), o, workers);
  };
  if (!loopback::have_nginx()) {
    if (rows.window == 0) rows.window = loaders::kMaxDefaultWindow;  // what the remote readers would take
    add_whole_local(rows.window);
    run_rounds(all, o.repeats);
    for (const auto& c : all) print_row(out, c, rows);
    out << with_host({{"bench", "remote"}, {"skipped", "loopback, latency"}, {"reason", "nginx is not installed (Debian: nginx-light)"}})
               .dump()
        << std::endl;
    return;
  }
  const fs::path work = fs::path(o.data_dir) / "nginx-work";
  fs::create_directories(work);
  loopback::nginx_server server(shards.dir, work, {.batch = o.batch_servers, .cache_open_files = true});
  loopback::fault_proxy slow(server.port(), {.latency_ms = o.latency_ms, .batch_threads = o.batch_servers});
  for (const bool whole_shards : {false, true}) {
    for (const auto& [mode, base_url] : {std::pair<std::string, std::string>{"loopback", server.url()},
                                         std::pair<std::string, std::string>{"latency", slow.url()}}) {
      std::vector<std::string> urls;
      for (const auto& p : shards.paths) urls.push_back(base_url + "/" + fs::path(p).filename().string());
      all.emplace_back(mode, whole_shards,
                       whole_shards ? loaders::make_remote_shard_reader(urls, reads.whole, reads.wo)
                                    : loaders::make_remote_shard_reader(urls, reads.ranged, reads.ro),
                       o, workers);
      if (whole_shards) rows.window = loaders::remote_stats(*all.back().reader).window_shards;  // same options: one window
    }
  }
  add_whole_local(rows.window);
  for (auto& c : all)
    if (c.mode != "local") c.base = c.whole ? 1 : 0;
  run_rounds(all, o.repeats);
  for (const auto& c : all) print_row(out, c, rows);
  all.clear();  // the remote readers go before their servers
}

}  // namespace pinfeed::bench
