// Every allocation failed in turn: each workload runs once per allocation point k, with the k-th
// allocation failing (mode once) and, in a second sweep, the k-th and every later one (mode from).
// Each run must end with the batches of the fault-free run or with an exception at the API
// (std::bad_alloc, or an error of pinfeed's that names what failed and says that memory ran out:
// the fault-free run succeeds, so memory is the only cause): never std::terminate, a hang (each
// run has a watchdog), a broken invariant (std::logic_error), an error that blames something else
// (a URL, a file's contents) or a batch that differs.
// PINFEED_FAULT_POINTS=N tries N points spread over the workload's allocations (CI: the default,
// 500); PINFEED_FAULT_POINTS=all (scripts/test.sh --faults) tries every point up to 2,000, then a
// stride that keeps the sweep near 4,000 points, and says so.
#include <doctest/doctest.h>
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <vector>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "alloc_fault.hpp"
#include "image_fixtures.hpp"
#include "loopback_servers.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/sources.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

#if PINFEED_TEST_HAVE_CURL
#include <curl/curl.h>
#endif

using namespace pinfeed;
namespace af = pinfeed::test::alloc_fault;

namespace {

#if PINFEED_TEST_HAVE_CURL
/// Where the sanitizers own malloc, libcurl's allocations reach the harness through libcurl's own
/// hooks, installed before anything initializes libcurl (this runs before main). Elsewhere the
/// replaced malloc counts them already.
const bool curl_allocations_counted = [] {
  if (af::covers_malloc()) return true;
  const auto code = curl_global_init_mem(
      CURL_GLOBAL_DEFAULT,
      [](std::size_t n) -> void* { return af::count_allocation() ? nullptr : std::malloc(n); },
      [](void* p) { std::free(p); },
      [](void* p, std::size_t n) -> void* { return af::count_allocation() ? nullptr : std::realloc(p, n); },
      [](const char* text) -> char* { return af::count_allocation() ? nullptr : ::strdup(text); },
      [](std::size_t n, std::size_t size) -> void* { return af::count_allocation() ? nullptr : std::calloc(n, size); });
  return code == CURLE_OK;
}();
#endif

using workload = std::function<std::vector<std::string>()>;

std::atomic<std::uint64_t> current_point{0};
std::atomic<int> current_mode{0};
const char* current_name = "";

/// Aborts, naming the point, when one run takes longer than its limit.
class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void begin() {
    std::lock_guard lock(mutex_);
    deadline_ = std::chrono::steady_clock::now() + limit_;
    running_ = true;
  }
  void end() {
    std::lock_guard lock(mutex_);
    running_ = false;
  }

 private:
  void watch() {
    af::exempt mine;
    std::unique_lock lock(mutex_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (running_ && std::chrono::steady_clock::now() > deadline_) {
        std::fprintf(stderr, "fault test %s: HANG at allocation point %llu (mode %s): no end after %lld s\n",
                     current_name, static_cast<unsigned long long>(current_point.load()),
                     current_mode.load() == 1 ? "once" : "from", static_cast<long long>(limit_.count()));
        std::fflush(stderr);
        if (const char* g = std::getenv("PINFEED_FAULT_GDB"); g != nullptr && g[0] == '1') {  // every thread's stack
          const std::string cmd = "gdb -q -batch -p " + std::to_string(::getpid()) + " -ex 'thread apply all bt 16' 1>&2";
          (void)!std::system(cmd.c_str());
        }
        std::abort();
      }
    }
  }
  std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false, running_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  std::thread thread_;
};

struct tally {
  std::uint64_t total = 0, points = 0, clean = 0, bad_alloc = 0, named = 0;
  std::string plan;
  std::vector<std::string> failures;
  std::vector<std::string> named_seen;  // the first few distinct messages of named errors
};

/// Whether an error's message says that memory ran out (std::bad_alloc's what(), or in words).
bool says_memory(std::string_view what) {
  for (const char* words : {"bad_alloc", "memory", "Memory"})
    if (what.find(words) != std::string_view::npos) return true;
  return false;
}

/// The points to try of `total` allocations.
std::vector<std::uint64_t> points_of(std::uint64_t total, std::string& plan) {
  const char* env = std::getenv("PINFEED_FAULT_POINTS");
  const std::string want = env ? env : "500";
  std::vector<std::uint64_t> out;
  if (want == "all") {
    const std::uint64_t dense = std::min<std::uint64_t>(total, 2000);
    for (std::uint64_t k = 1; k <= dense; ++k) out.push_back(k);
    const std::uint64_t stride = total > 2000 ? std::max<std::uint64_t>(1, (total - 2000) / 2000) : 1;
    for (std::uint64_t k = 2000 + stride; k <= total; k += stride) out.push_back(k);
    plan = total <= 2000 || stride == 1
               ? "every point of " + std::to_string(total)
               : "every point up to 2000, then every " + std::to_string(stride) + "th to " + std::to_string(total);
  } else {
    const std::uint64_t n = std::max<std::uint64_t>(1, std::strtoull(want.c_str(), nullptr, 10));
    for (std::uint64_t i = 0; i < n && i < total; ++i) out.push_back(1 + (total - 1) * i / std::max<std::uint64_t>(1, std::min(n, total) - 1));
    plan = std::to_string(out.size()) + " points spread over " + std::to_string(total);
  }
  return out;
}

/// Starts every worker thread TBB may run (global_control's cap, which test_main sets), so that no
/// thread is started while allocations fail: where a failing point meets a thread TBB starts
/// lazily depends on timing, and after a failed start TBB runs no more tasks of ours (the loader
/// then runs its chunks on the feeder and the consumer, after 2 s of waiting each run), so such
/// points would turn up at random and each run would take seconds. (A full sweep without this
/// warm-up met that path: its runs still ended with the fault-free batches, each 2 s late.)
void start_every_tbb_worker() {
  static const bool started = [] {
    const auto n = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
    tbb::task_arena arena(n);
    std::atomic<int> arrived{0};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    arena.execute([&] {
      tbb::parallel_for(0, n, 1, [&](int) {
        arrived.fetch_add(1);
        while (arrived.load() < n && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      });
    });
    return true;
  }();
  (void)started;
}

tally sweep(const char* name, const workload& w, af::mode m) {
  current_name = name;
  start_every_tbb_worker();
  tally t;
  // The fault-free run, counted; a second to check that the workload is deterministic.
  af::arm(af::mode::count_only);
  const auto expected = w();
  t.total = af::disarm();
  REQUIRE(!expected.empty());
  REQUIRE(w() == expected);
  watchdog dog(std::chrono::seconds(60));
  for (const std::uint64_t k : points_of(t.total, t.plan)) {
    current_point = k;
    current_mode = m == af::mode::once ? 1 : 2;
    ++t.points;
    std::string failure;
    dog.begin();
    af::arm(m, k);
    try {
      const auto got = w();
      af::disarm();
      if (got == expected) ++t.clean;
      else failure = "delivered batches that differ from the fault-free run's";
    } catch (const std::bad_alloc&) {
      af::disarm();
      ++t.bad_alloc;
    } catch (const std::exception& e) {
      af::disarm();
      const bool invariant = typeid(e) == typeid(std::logic_error);
      if (invariant || std::string(e.what()).empty())
        failure = std::string(invariant ? "a broken invariant: " : "an unnamed error: ") + e.what();
      else if (!says_memory(e.what()))  // the fault-free run succeeds: memory is the only cause
        failure = std::string("an error that blames something else than memory: ") + e.what();
      else
        ++t.named;
      if (!invariant && t.named_seen.size() < 3 && std::find(t.named_seen.begin(), t.named_seen.end(), e.what()) == t.named_seen.end())
        t.named_seen.emplace_back(e.what());
    } catch (...) {
      af::disarm();
      failure = "an exception that is no std::exception";
    }
    dog.end();
    if (!failure.empty())
      t.failures.push_back("point " + std::to_string(k) + " (" + (m == af::mode::once ? "once" : "from") + "): " + failure);
  }
  std::printf("alloc-fault %-16s %-4s %6llu allocations, %s: %llu clean, %llu std::bad_alloc, %llu named errors, %zu failures\n",
              name, m == af::mode::once ? "once" : "from", static_cast<unsigned long long>(t.total), t.plan.c_str(),
              static_cast<unsigned long long>(t.clean), static_cast<unsigned long long>(t.bad_alloc),
              static_cast<unsigned long long>(t.named), t.failures.size());
  for (const auto& n : t.named_seen) std::printf("  named error: %s\n", n.c_str());
  std::fflush(stdout);
  return t;
}

void check_sweeps(const char* name, const workload& w) {
  static const bool handler = [] {
    void* warm[2];
    (void)backtrace(warm, 2);  // loads what backtrace() needs now, not when every allocation fails
    std::set_terminate([] {
      std::fprintf(stderr, "fault test %s: std::terminate at allocation point %llu (mode %s), from:\n", current_name,
                   static_cast<unsigned long long>(current_point.load()), current_mode.load() == 1 ? "once" : "from");
      std::fflush(stderr);
      void* frames[64];
      backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);  // (allocates nothing)
      std::abort();
    });
    return true;
  }();
  (void)handler;
  for (const auto m : {af::mode::once, af::mode::from}) {
    const tally t = sweep(name, w, m);
    CAPTURE(t.plan);
    for (const auto& f : t.failures) FAIL_CHECK(f);
    CHECK(t.points > 0);
    CHECK(t.clean + t.bad_alloc + t.named == t.points);
    // Failing the first allocation can never leave the run clean.
    if (m == af::mode::from) CHECK(t.clean < t.points);
  }
}

/// Shuffled batches of 8 on the host, seed 11.
loader_options options(std::size_t workers) {
  auto o = test::cpu_loader(8, workers, 11);
  o.order.shuffle = true;
  return o;
}

}  // namespace

TEST_CASE("faults.synthetic_pipeline_two_shuffled_epochs") {
  test::no_launcher clean;
  check_sweeps("synthetic", [] {
    loader l(loaders::make_synthetic_source({64, 16, 16, 10}), options(2));  // samples, height, width, classes
    return test::epoch_checksums(l, 0, 1);
  });
}

TEST_CASE("faults.state_and_resume_on_another_worker_count") {
  test::no_launcher clean;
  auto source = [] {
    return make_source(80, {{"id", dtype::i64, {}}}, [](sample& s) { s.as<std::int64_t>(0)[0] = static_cast<std::int64_t>(s.index()); });
  };
  check_sweeps("resume", [&] {
    std::vector<std::string> lines;
    std::string saved;
    {
      loader first(source(), options(1));
      for (int i = 0; i < 3; ++i) lines.push_back(checksum_line(*first.next()));
      saved = first.state();
    }
    loader second(source(), options(2));
    second.resume(saved);
    while (auto b = second.next()) lines.push_back(checksum_line(*b));
    return lines;
  });
}

TEST_CASE("faults.config_file") {
  test::temp_dir dir;
  const auto path = (dir.path / "pinfeed.json").string();
  std::ofstream(path) << R"({"schema": "pinfeed.config/1", "workers": 3, "prefetch": "auto", "memory_budget": 1073741824,
                            "requests_in_flight": 64, "expected_speedup": 1.25, "measured": "by hand"})";
  check_sweeps("config", [&] { return std::vector<std::string>{loader_config::read(path).to_json()}; });
}

TEST_CASE("faults.jpeg_folder_rrc_hflip_skipping_bad_samples") {
  test::no_launcher clean;
  test::temp_dir dir;
  (void)test::jpeg_class_folder(dir.path, 12, 232, 2, 240);
  loaders::image_source_options io;
  io.source.on_error = loaders::error_policy::skip;
  check_sweeps("jpeg_folder", [&] {
    loader l(loaders::make_image_folder_source(dir.path.string(), "rrc(224),hflip", io), options(2));
    return test::epoch_checksums(l, 0, 1);
  });
}

TEST_CASE("faults.remote_shards_from_nginx") {
  // libcurl's allocations (malloc here) and the transfer thread's fail too: a request that fails
  // is retried, a reader that cannot go on names the shard, and the batches that arrive are the
  // fault-free run's.
#if !PINFEED_TEST_HAVE_CURL
  test::skip_case("built without libcurl");
  return;
#else
  REQUIRE(curl_allocations_counted);
  if (!loopback::have_nginx()) {
    test::skip_case("nginx is not installed (Debian: nginx-light)");
    return;
  }
  test::no_launcher clean;
  test::temp_dir dir;
  const auto files = test::jpeg_class_folder(dir.path / "images", 12, 40, 1, 48);
  std::filesystem::create_directories(dir.path / "www");
  const auto shards = loaders::write_shards(files, (dir.path / "www" / "train").string(), 4096);
  REQUIRE(shards.size() >= 2);
  loopback::nginx_server server(dir.path / "www", dir.path);
  char last[16];
  std::snprintf(last, sizeof last, "%06zu", shards.size() - 1);
  const std::string pattern = server.url() + "/train-{000000.." + last + "}.tar";
  loaders::image_source_options io;
  io.remote.backoff_initial_ms = 2;
  io.remote.backoff_max_ms = 10;
  io.remote.connect_timeout_s = 2;
  io.remote.stall_timeout_s = 2;
  io.remote.requests_in_flight = 2;
  io.shard.window_shards = 0;  // range reads: a request a sample
  check_sweeps("remote", [&] {
    loader l(loaders::make_shard_source(pattern, "center_crop(16),hflip", io), options(2));
    return test::epoch_checksums(l, 0, 0);
  });
#endif
}

TEST_CASE("faults.doctor_short_run") {
  // The doctor's ladder over a synthetic pipeline, cut short: every allocation of its loaders,
  // caches and report fails in turn. What a run returns: the batches its step saw and the modes
  // that ran (timings differ from run to run; the batches may not).
  test::no_launcher clean;
  check_sweeps("doctor", [] {
    const doctor_pipeline p{loaders::make_reader_from_source(loaders::make_synthetic_source({32, 24, 24, 4})),
                            loaders::parse_pipeline("crop(16),hflip"), {}};
    doctor_options o;
    o.loader = options(2);
    o.loader.order.shuffle = false;
    o.steps = 3;
    o.warmup = 1;
    o.min_steps = 3;
    o.min_mode_seconds = 0;
    o.max_mode_seconds = 30;
    o.per_transform = false;
    o.modes = {"L0", "L3"};
    std::vector<std::string> seen;
    o.step = [&](const step_batch& b) {
      const tensor_view& img = b.field("image");
      seen.push_back(std::to_string(b.size) + " " + std::to_string(hash_bytes(img.data, img.bytes())));
    };
    const doctor_report r = doctor(p, o);
    for (const auto& m : r.modes)
      if (m.ran) seen.push_back("ran " + m.id);
    return seen;
  });
}
