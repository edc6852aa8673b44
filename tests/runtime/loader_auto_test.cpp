// Loaders with workers and prefetch set to auto_tune: what they choose, within which bounds, and
// that the batches never depend on it.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <oneapi/tbb/global_control.h>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/random.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {

std::vector<field_spec> fields_of(std::int64_t bytes) {
  return {{"data", dtype::u8, {bytes}}, {"id", dtype::i64, {}}};
}

/// Sample i: Philox bytes of (seed, epoch, i), after sleeping `sleep_us` (an I/O-bound sample:
/// the core idles, so more workers help).
std::shared_ptr<source> sleeping_source(std::uint64_t n, std::int64_t bytes, int sleep_us) {
  return make_source(n, fields_of(bytes), [sleep_us](sample& s) {
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    fill_random_bytes(s.rng(), s.bytes("data"));
    s.as<std::int64_t>("id")[0] = static_cast<std::int64_t>(s.index());
  });
}

loader_options shuffled(std::size_t batch, std::size_t workers, std::size_t prefetch) {
  loader_options o = test::cpu_loader(batch, workers, 77, prefetch);
  o.order.shuffle = true;
  return o;
}

/// The debug messages logged while it lives that start with `prefix` (the level and sink before
/// it restored after).
struct debug_messages {
  std::string prefix;
  std::mutex m;
  std::vector<std::string> got;
  log_level level_before = get_log_level();
  log_sink sink_before;
  explicit debug_messages(std::string p) : prefix(std::move(p)) {
    sink_before = set_log_sink([this](log_level level, std::string_view message) {
      if (level != log_level::debug || message.substr(0, prefix.size()) != prefix) return;
      const std::lock_guard lock(m);
      got.emplace_back(message);
    });
    set_log_level(log_level::debug);
  }
  ~debug_messages() {
    set_log_level(level_before);
    set_log_sink(sink_before);
  }
};

}  // namespace

TEST_CASE("loader.auto.batches_equal_a_fixed_setting_while_the_tuner_moves") {
  // Up to four workers allowed (the application's cap, held here, and this process's cores in the
  // node plan), samples that sleep: the tuner starts at that ceiling, tries more prefetch while the
  // consumer waits, and the batches are those of one fixed worker over the same bytes without the
  // sleep.
  //
  // The windows judged depend on time: each takes 0.25 s at least. The sleeps plant a lower bound
  // of 3 epochs x (750 x W) samples x 1 ms / W workers = 2.25 s, three times the 0.75 s that the
  // three windows checked below need (with 0.3 ms a sample the bound was 0.68 s: the check held
  // only through the sleeps' overshoot).
  const tbb::global_control cap(tbb::global_control::max_allowed_parallelism, 5);
  const std::size_t ceiling = std::min<std::size_t>(4, this_node_plan_without_gpu().rank_cores);
  const std::uint64_t samples = 750 * ceiling;
  const auto src = sleeping_source(samples, 64, 1000);
  loader fixed(sleeping_source(samples, 64, 0), shuffled(16, 1, 2));
  const auto expected = test::epoch_checksums(fixed, 0, 2);
  debug_messages decisions("loader: auto_tune: ");
  loader tuned(src, shuffled(16, auto_tune, auto_tune));
  CHECK(tuned.workers() == ceiling);  // the ceiling to start
  CHECK(tuned.prefetch() == 2);
  const auto got = test::epoch_checksums(tuned, 0, 2);
  REQUIRE(expected.size() == 3 * ((samples + 15) / 16));  // 3 epochs of batches of 16, the last partial
  REQUIRE(got.size() == expected.size());
  CHECK(got == expected);
  const auto t = tuned.tuning();
  MESSAGE("auto: ", t.to_string(), " after ", t.windows, " windows, ", t.changes, " changes");
  CHECK(t.workers_auto);
  CHECK(t.prefetch_auto);
  CHECK(t.workers_most == ceiling);
  CHECK(t.prefetch_most == 8);
  CHECK(t.windows >= 3);
  CHECK(t.changes >= 1);
  CHECK(t.workers == ceiling);  // sleeping samples: the consumer always waits, no worker goes
  CHECK(t.prefetch >= 2);
  CHECK(t.to_json().find("\"workers_auto\":true") != std::string::npos);
  // The path: every window judged, in order, each with what it measured and then ran with; the
  // changes are the windows marked changed, and the last window holds the settings now.
  REQUIRE(t.path.size() == t.windows);
  std::uint64_t changed = 0;
  for (std::size_t i = 0; i < t.path.size(); ++i) {
    const auto& w = t.path[i];
    CAPTURE(i);
    CHECK(w.index == i + 1);
    CHECK(w.seconds >= 0.25);
    CHECK(w.images_per_s > 0);
    CHECK(w.consumer_wait >= 0);
    CHECK(w.consumer_wait <= 1);
    CHECK(w.workers >= 1);
    CHECK(w.workers <= ceiling);
    CHECK(w.prefetch >= 1);
    CHECK(w.prefetch <= 8);
    CHECK(!w.reason.empty());
    if (i > 0 && (w.workers != t.path[i - 1].workers || w.prefetch != t.path[i - 1].prefetch)) CHECK(w.changed);
    changed += w.changed ? 1 : 0;
  }
  CHECK(changed == t.changes);
  // Each change is logged at debug level with its window's reason, in order.
  std::vector<std::string> changes;
  for (const auto& w : t.path)
    if (w.changed) changes.push_back("loader: auto_tune: " + w.reason);
  {
    const std::lock_guard lock(decisions.m);
    CHECK(decisions.got == changes);
  }
  CHECK(t.path.back().workers == t.workers);
  CHECK(t.path.back().prefetch == t.prefetch);
  CHECK(t.to_json().find("\"path\":[{") != std::string::npos);
}

TEST_CASE("loader.auto.follows_the_tbb_cap_the_application_holds") {
  const tbb::global_control cap(tbb::global_control::max_allowed_parallelism, 3);
  constexpr std::uint64_t samples = 2000;
  loader l(sleeping_source(samples, 64, 200), shuffled(16, auto_tune, 2));
  std::size_t most = 0;
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    most = std::max(most, l.workers());
    seen += b->size();
  }
  CHECK(seen == samples);
  CHECK(most >= 1);
  CHECK(most <= 2);
  const auto t = l.tuning();
  CHECK(t.workers_most == 2);
  CHECK_FALSE(t.prefetch_auto);
  CHECK(t.prefetch == 2);
  CHECK(t.prefetch_most == 2);
}

TEST_CASE("loader.auto.each_window_counts_only_its_own_cpu_time") {
  // Contract (tuning_report::window::cpu_utilization): the process's CPU time within the window,
  // over the window's time and the place's cores. The windows lie within the run, so together
  // they account for at most the CPU time the run spent; what the process spent before the loader
  // (here a second of spinning) belongs to no window.
  const double t0 = process_cpu_seconds();
  volatile std::uint64_t spin = 0;
  while (process_cpu_seconds() - t0 < 1.0)
    for (int i = 0; i < 100000; ++i) spin = spin + static_cast<std::uint64_t>(i);
  const double before = process_cpu_seconds();
  loader l(sleeping_source(100000, 64, 1000), shuffled(8, auto_tune, auto_tune));
  for (int b = 0; b < 4000 && l.tuning(false).windows < 4; ++b) REQUIRE(l.next());
  const double spent = process_cpu_seconds() - before;
  const auto t = l.tuning();
  REQUIRE(t.path.size() >= 3);
  const auto cores = static_cast<double>(this_node_plan().rank_cores);
  double counted = 0;
  for (const auto& w : t.path) {
    CHECK(w.cpu_utilization >= 0);
    CHECK(w.cpu_utilization <= 1);
    counted += w.cpu_utilization * cores * w.seconds;
  }
  MESSAGE("the windows' CPU time " << counted << " s of the run's " << spent << " s (" << t.path.size() << " windows, "
                                   << cores << " cores)");
  CHECK(counted <= spent * 1.05 + 0.02);
}

TEST_CASE("loader.auto.fixed_settings_report_themselves") {
  loader l(sleeping_source(64, 64, 0), shuffled(16, 1, 3));
  while (auto b = l.next()) {
  }
  const auto t = l.tuning();
  CHECK_FALSE(t.workers_auto);
  CHECK_FALSE(t.prefetch_auto);
  CHECK(t.workers == 1);
  CHECK(t.prefetch == 3);
  CHECK(t.windows == 0);
  CHECK(t.path.empty());
  CHECK(t.to_string() == "workers 1 (fixed), prefetch 3 (fixed): fixed by the options");
}

TEST_CASE("loader.auto.prefetch_allocates_as_it_grows_and_stays_inside_the_budget") {
  // 1 MiB samples, 4 a batch: a slot is 4 MiB. A 21 MiB budget holds 5 slots: prefetch 4 at most
  // (with the one the consumer holds); 2 to start, so 3 slots allocated.
  constexpr std::uint64_t samples = 64;
  const auto src = sleeping_source(samples, 1 << 20, 0);
  loader_options o = shuffled(4, 1, auto_tune);
  o.memory_budget = 21u << 20;
  loader l(src, o);
  CHECK(l.tuning().prefetch_most == 4);
  CHECK(l.slots() == 5);
  CHECK(l.prefetch() == 2);
  CHECK(l.host_bytes() == 3 * l.slot_bytes());
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    seen += b->size();
    CHECK(l.host_bytes() <= *o.memory_budget);
  }
  CHECK(seen == samples);
  // Less than the slots of prefetch 1 and the batch in use: refused, naming the parts.
  o.memory_budget = 7u << 20;
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("the memory budget of 7.0 MiB is too small for host slots 8.0 MiB"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("prefetch auto"), std::invalid_argument);
}

TEST_CASE("loader.auto.bad_values_name_the_option") {
  const auto src = sleeping_source(64, 64, 0);
  loader_options o = shuffled(16, 0, 2);
  o.workers = 1025;
  CHECK_THROWS_WITH_AS(loader(src, o), "loader option workers must be at most 1024 (or auto_tune), got 1025",
                       std::invalid_argument);
  o.workers = auto_tune;
  o.prefetch = 0;
  CHECK_THROWS_WITH_AS(loader(src, o), "loader option prefetch must be at least 1 (or auto_tune), got 0", std::invalid_argument);
  o.prefetch = auto_tune;
  o.max_batches_in_use = 5000;
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("got auto + 5000"), std::invalid_argument);
}

TEST_CASE("loader.auto.rss_stays_under_the_memory_budget_over_shuffled_epochs") {
  // 768 samples of 256 KiB: 192 MiB of data, almost five times the 40 MiB budget. The source keeps the
  // 64 samples it made (16 MiB, a sample cache) and says so; the loader's slots take the rest
  // of the budget. Over three shuffled epochs the process's peak resident memory grows by less
  // than the budget.
  constexpr std::int64_t kBytes = 256 << 10;
  struct caching_source final : source {
    caching_source() : pool(64 * kBytes) {}
    std::uint64_t size() const override { return 768; }
    std::vector<field_spec> fields() const override { return fields_of(kBytes); }
    void produce(sample& s) override {
      fill_random_bytes(s.rng(), s.bytes("data"));
      s.as<std::int64_t>("id")[0] = static_cast<std::int64_t>(s.index());
      // Kept in the pool entry of its index (a direct-mapped cache of 64 samples).
      std::lock_guard lock(m);
      std::memcpy(pool.data() + (s.index() % 64) * kBytes, s.bytes("data").data(), kBytes);
    }
    std::vector<memory_use> memory() const override { return {{"test sample cache", 64 * kBytes}}; }
    std::mutex m;
    std::vector<std::byte> pool;
  };
  const std::uint64_t budget = 40u << 20;
  const bool reset = test::reset_peak_rss();
  const std::size_t before = reset ? test::rss_bytes() : test::peak_rss_bytes();
  {
    const auto src = std::make_shared<caching_source>();
    loader_options o = shuffled(16, auto_tune, auto_tune);
    o.memory_budget = budget;
    loader l(src, o);
    CHECK(l.tuning().prefetch_most >= 2);
    std::uint64_t samples = 0;
    for (std::uint32_t e = 0; e < 3; ++e) {
      l.start_epoch(e);
      while (auto b = l.next()) samples += b->size();
    }
    CHECK(samples == 3 * 768);
    CHECK(l.host_bytes() + 64 * kBytes <= budget);
  }
  const std::size_t peak = test::peak_rss_bytes();
  MESSAGE("resident before ", before >> 20, " MiB, peak ", peak >> 20, " MiB, budget ", budget >> 20,
          " MiB (peak reset: ", reset, ")");
  REQUIRE(peak > 0);
#if PINFEED_TESTS_EMULATED || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Under qemu-user the peak holds the emulator's translation cache, which grows with the code
  // run, and under a sanitizer its shadow memory: the accounting above is checked, the resident
  // bytes are not.
  MESSAGE("under an emulator or a sanitizer: the peak resident size is not the loader's");
#else
  CHECK(peak - std::min(peak, before) <= budget);
#endif
}

TEST_CASE("loader.config.round_trips_and_names_what_is_wrong") {
  loader_config c;
  c.workers = 6;
  c.prefetch = auto_tune;
  c.memory_budget = std::uint64_t{8} << 30;
  c.requests_in_flight = 128;
  c.decode = "device";
  c.expected_speedup = 1.25;
  c.measured = "here";
  const loader_config back = loader_config::from_json(c.to_json(), "x.json");
  CHECK(back.workers == 6u);
  CHECK(back.prefetch == auto_tune);
  CHECK(back.memory_budget == (std::uint64_t{8} << 30));
  CHECK(back.requests_in_flight == 128u);
  CHECK(back.decode == "device");
  CHECK(back.expected_speedup == 1.25);
  CHECK(back.measured == "here");
  loader_options o;
  back.apply_to(o);
  CHECK(o.workers == 6);
  CHECK(o.prefetch == auto_tune);
  CHECK(o.memory_budget == (std::uint64_t{8} << 30));
  // Only what the file gives changes.
  loader_options untouched;
  loader_config::from_json(R"({"schema": "pinfeed.config/1"})", "empty.json").apply_to(untouched);
  CHECK(untouched.workers == loader_options{}.workers);
  CHECK(untouched.prefetch == loader_options{}.prefetch);
  CHECK_FALSE(untouched.memory_budget);
  const std::pair<const char*, const char*> bad[] = {
      {"not json", "config 'f.json' is not JSON"},
      {"[1]", "config 'f.json' is not a JSON object"},
      {R"({"workers": 2})", "\"schema\" is missing, expected \"pinfeed.config/1\""},
      {R"({"schema": "pinfeed.config/9"})", "\"schema\" is \"pinfeed.config/9\""},
      {R"({"schema": "pinfeed.config/1", "workers": 0})", "\"workers\" is 0, expected a whole number from 1 to 1024"},
      {R"({"schema": "pinfeed.config/1", "prefetch": -2})", "\"prefetch\" is -2, expected a whole number from 1 to 4095"},
      {R"({"schema": "pinfeed.config/1", "workers": "many"})", "\"workers\" is \"many\""},
      {R"({"schema": "pinfeed.config/1", "expected_speedup": 0})", "\"expected_speedup\" is 0, expected a positive number"},
      {R"({"schema": "pinfeed.config/1", "decode": "gpu"})", "\"decode\" is \"gpu\", expected \"host\", \"device\" or \"device-inexact\""},
      {R"({"schema": "pinfeed.config/1", "prefetch_factor": 2})", "unknown field \"prefetch_factor\""}};
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS((void)loader_config::from_json(text, "f.json"), doctest::Contains(message), std::invalid_argument);
  }
  CHECK_THROWS_WITH_AS((void)loader_config::read("/nonexistent/c.json"),
                       "cannot read config '/nonexistent/c.json': No such file or directory", std::runtime_error);
}
