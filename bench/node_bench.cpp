#include "node_bench.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench_rows.hpp"
#include "loopback_servers.hpp"  // spawn_server (extern environ)

namespace pinfeed::bench {
namespace {

/// One setting: the extra arguments of every rank, and whether the node plan is off.
struct setting {
  std::string name;
  std::vector<std::string> args;
  bool plan_off = false;
  std::size_t workers = 0;  ///< fixed workers (0: auto)
};

struct round_result {
  double images_per_s = 0;
  std::vector<std::size_t> rank_workers;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The workers a rank's `pinfeed run` reported ("run: ..., N workers, ...").
std::size_t workers_of(const std::string& output) {
  const auto at = output.find(" workers, prefetch");
  if (at == std::string::npos) return 0;
  const auto start = output.rfind(", ", at);
  return start == std::string::npos ? 0 : std::strtoull(output.c_str() + start + 2, nullptr, 10);
}

/// Waits for `pid`; "" when it exited 0, else how it ended.
std::string ended(pid_t pid) {
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (got < 0) return std::string("waitpid: ") + std::strerror(errno);
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "exit " + std::to_string(WEXITSTATUS(status));
  return "signal " + std::to_string(WTERMSIG(status));
}

/// Starts `tool run ARGS` with `env` (this process's when empty), its output into `log` (anew).
pid_t start_run(const std::string& tool, std::vector<std::string> args, const std::vector<std::string>& env,
                const std::string& log) {
  args.insert(args.begin(), {tool, "run"});
  std::remove(log.c_str());
  return loopback::spawn_server(args, env, log);
}

/// Starts every rank with `s`, waits for all, and returns the node's images/s.
round_result run_ranks(const node_bench_options& o, const setting& s, const std::string& tool, const std::string& dir) {
  // This process's environment without a launcher's variables: each rank gets its own below.
  auto launcher_variable = [](const std::string& v) {
    for (const char* name : {"LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "RANK=", "WORLD_SIZE=", "PINFEED_NODE_PLAN=",
                             "PINFEED_LOG_LEVEL=", "OMPI_COMM_WORLD_", "SLURM_", "MPI_LOCAL"})
      if (v.rfind(name, 0) == 0) return true;
    return false;
  };
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e)
    if (!launcher_variable(*e)) inherited.emplace_back(*e);
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (std::size_t r = 0; r < o.ranks; ++r) {
      std::vector<std::string> args = {"--device", "cpu", "--samples", std::to_string(o.samples), "--height",
                                       std::to_string(o.height), "--width", std::to_string(o.width), "--batch",
                                       std::to_string(o.batch), "--shuffle", "--seed", "7"};
      if (!o.transforms.empty()) args.insert(args.end(), {"--transforms", o.transforms});
      args.insert(args.end(), s.args.begin(), s.args.end());
      std::vector<std::string> env = inherited;
      for (const char* var : {"LOCAL_RANK=", "RANK="}) env.push_back(var + std::to_string(r));
      for (const char* var : {"LOCAL_WORLD_SIZE=", "WORLD_SIZE="}) env.push_back(var + std::to_string(o.ranks));
      env.push_back("PINFEED_LOG_LEVEL=warn");
      if (s.plan_off) env.push_back("PINFEED_NODE_PLAN=off");
      logs.push_back(dir + "/rank-" + std::to_string(r) + ".txt");
      pids.push_back(start_run(tool, args, env, logs.back()));
    }
  } catch (...) {  // a rank that could not start: the ones started go too
    for (const pid_t p : pids) {
      (void)kill(p, SIGTERM);
      (void)ended(p);
    }
    throw;
  }
  std::string failed;
  for (std::size_t r = 0; r < pids.size(); ++r)
    if (const std::string how = ended(pids[r]); !how.empty())
      failed += "rank " + std::to_string(r) + " (" + s.name + ", " + how + "): " + read_all(logs[r]) + "\n";
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!failed.empty()) throw std::runtime_error("bench node: " + failed);
  round_result out;
  out.images_per_s = static_cast<double>(o.samples) / wall;
  for (const auto& log : logs) out.rank_workers.push_back(workers_of(read_all(log)));
  return out;
}

/// Runs `tool run ARGS` to its end, its output into `log`; throws naming `what` on failure.
std::string run_one(const std::string& tool, const std::vector<std::string>& args, const std::string& log,
                    const std::string& what) {
  const std::string how = ended(start_run(tool, args, {}, log));
  const std::string output = read_all(log);
  std::remove(log.c_str());
  if (!how.empty()) throw std::runtime_error("bench node: " + what + " failed (" + how + "): " + output);
  return output;
}

/// The lines of `output` that start with `prefix`.
std::vector<std::string> lines_with(const std::string& output, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

/// Many workers on a latency-bound source: 64 fixed workers, each sample waiting 20 ms with no
/// CPU, against the 64 / 20 ms = 3,200 samples/s the latency allows; and the batches of 64 workers
/// against those of 8 (they must be identical).
void many_workers(const std::string& tool, const std::string& dir, std::ostream& out) {
  const std::vector<std::string> common = {"--device", "cpu", "--height", "8", "--width", "8", "--batch", "64",
                                           "--latency-ms", "20", "--prefetch", "4", "--seed", "3"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::vector<double> rounds;
  for (int round = 0; round < 3; ++round) {
    const std::string o = run_one(tool, with({"--samples", "6400", "--workers", "64"}), dir + "/many.txt", "64 workers");
    const auto t = lines_with(o, "throughput: ");
    if (t.empty()) throw std::runtime_error("bench node: no throughput line from 64 workers: " + o);
    rounds.push_back(std::strtod(t.front().c_str() + 12, nullptr));
  }
  const auto a = lines_with(run_one(tool, with({"--samples", "640", "--workers", "64", "--checksums"}), dir + "/a.txt", "64 workers"), "batch ");
  const auto b = lines_with(run_one(tool, with({"--samples", "640", "--workers", "8", "--checksums"}), dir + "/b.txt", "8 workers"), "batch ");
  const double got = median_of(rounds);
  out << with_host({{"bench", "node"}, {"setting", "many_workers"}, {"workers", 64}, {"latency_ms", 20},
                    {"samples_per_s", got}, {"rounds_samples_per_s", rounds}, {"latency_bound_samples_per_s", 3200.0},
                    {"over_latency_bound", got / 3200.0}, {"batches_compared", a.size()},
                    {"batches_equal_to_8_workers", !a.empty() && a == b}})
             .dump()
      << "\n";
}

}  // namespace

void run_node_bench(const node_bench_options& o, std::ostream& out) {
  if (o.ranks == 0 || o.ranks > 256) throw std::invalid_argument("bench node: --ranks must be 1 to 256, got " + std::to_string(o.ranks));
  if (o.rounds < 1) throw std::invalid_argument("bench node: --rounds must be at least 1");
  const std::string tool = o.tool.empty() ? std::string("/proc/self/exe") : o.tool;
  std::string tmpl = (std::filesystem::temp_directory_path() / "pinfeed-bench-node-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("bench node: cannot make a directory like " + tmpl + ": " + std::strerror(errno));
  const std::string dir = tmpl;
  struct remove_dir {  // the rank logs and the directory go on every path, a throwing one too
    std::string path;
    ~remove_dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{dir};
  // /proc/self/exe names the child itself once spawned: resolve it (and a relative path) here.
  std::error_code ec;
  const std::string exe = std::filesystem::canonical(tool, ec).string();
  if (ec) throw std::runtime_error("bench node: cannot find the pinfeed executable " + tool + ": " + ec.message());
  many_workers(exe, dir, out);
  std::vector<setting> settings = {{"plan", {}, false, 0}, {"tbb_cap", {}, true, 0}};
  std::vector<std::size_t> fixed = o.fixed;
  if (fixed.empty()) {
    const std::size_t most = std::max<std::size_t>(1, std::thread::hardware_concurrency() / o.ranks);
    for (std::size_t w = 1; w <= most; ++w) fixed.push_back(w);
  }
  for (const std::size_t w : fixed)
    settings.push_back({"fixed", {"--workers", std::to_string(w), "--prefetch", "2"}, false, w});
  std::map<std::size_t, std::vector<double>> figures;
  std::map<std::size_t, std::vector<std::size_t>> workers;
  for (int round = 0; round < o.rounds; ++round)
    for (std::size_t i = 0; i < settings.size(); ++i) {
      const auto r = run_ranks(o, settings[i], exe, dir);
      figures[i].push_back(r.images_per_s);
      workers[i] = r.rank_workers;
    }
  double best = 0;
  std::size_t best_w = 0;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    nlohmann::json row = {{"bench", "node"}, {"ranks", o.ranks}, {"setting", settings[i].name},
                          {"samples", o.samples}, {"image", std::to_string(o.height) + "x" + std::to_string(o.width)},
                          {"transforms", o.transforms},
                          {"node_images_per_s", median_of(figures[i])}, {"rounds_images_per_s", figures[i]}};
    if (settings[i].workers) row["workers"] = settings[i].workers;
    else row["rank_workers"] = workers[i];
    out << with_host(row).dump() << "\n";
    if (settings[i].workers && median_of(figures[i]) > best) {
      best = median_of(figures[i]);
      best_w = settings[i].workers;
    }
  }
  const double plan = median_of(figures[0]), cap = median_of(figures[1]);
  out << with_host({{"bench", "node"}, {"ranks", o.ranks}, {"summary", true}, {"plan_images_per_s", plan},
                    {"tbb_cap_images_per_s", cap}, {"best_fixed_images_per_s", best}, {"best_fixed_workers", best_w},
                    {"plan_over_tbb_cap", plan / cap}, {"plan_over_best_fixed", plan / best}})
             .dump()
      << "\n";
}

}  // namespace pinfeed::bench
