// doctest main shared by pinfeed's test executables.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <ostream>
#include <thread>

#include <oneapi/tbb/global_control.h>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/log.hpp"
#include "test_util.hpp"

namespace {
/// Exit status of a run whose cases were all skipped (the GPU suite alone on a machine without a
/// usable device, or cases that each called skip_case): CTest reports the test as skipped
/// (SKIP_RETURN_CODE), not passed.
constexpr int kSkipped = 77;

/// Counts the test cases that ran, so that a run asked for named cases fails when none matched
/// (a CTest test per case must not pass by running nothing).
std::size_t g_cases_run = 0;
std::string g_current_case;
std::string g_current_where;  // file:line of the running case
/// The cases that reported themselves skipped (pinfeed::test::skip_case), with their reasons.
std::map<std::string, std::string> g_skipped;
/// Set while main() lists the cases the run would run (doctest's --list-test-cases with the run's
/// own filters): case_counter counts those of the suite "gpu".
bool g_listing = false;
std::size_t g_gpu_cases_listed = 0;
/// The cases that passed without a single assertion and recorded no skip ("file:line name"): such a
/// case checks nothing, and the run fails naming it (every CTest run of a case is checked so).
std::vector<std::string> g_unasserted;
struct case_counter : doctest::IReporter {
  explicit case_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData& q) override {
    if (!g_listing) return;
    for (unsigned i = 0; i < q.num_data; ++i)
      if (std::string_view(q.data[i]->m_test_suite) == "gpu") ++g_gpu_cases_listed;
  }
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    ++g_cases_run;
    g_current_case = data.m_name;
    g_current_where = std::string(data.m_file.c_str()) + ":" + std::to_string(data.m_line);
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    if (st.testCaseSuccess && st.numAssertsCurrentTest == 0 && !g_skipped.contains(g_current_case))
      g_unasserted.push_back(g_current_where + " " + g_current_case);
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("case_counter", 1, case_counter);

bool names_cases(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]).starts_with("--test-case=") || std::string_view(argv[i]).starts_with("-tc=")) return true;
  return false;
}

/// Whether the command line asks doctest for a query (a listing, a count, help, the version) or no
/// run: no case runs, and a listing must name every case (tests/cmake/register_cases.cmake lists
/// the GPU cases on machines without a GPU). As doctest reads them: any number of leading dashes,
/// an optional "dt-" prefix; the queries are bare flags, no-run also takes "=<bool>".
bool query_only(int argc, char** argv) {
  constexpr std::string_view queries[] = {"list-test-cases", "ltc", "list-test-suites", "lts", "count", "c",
                                          "list-reporters", "lr", "help", "h", "?", "version", "v", "no-run", "nr"};
  constexpr std::string_view falses[] = {"0", "false", "no", "off"};
  for (int i = 1; i < argc; ++i) {
    std::string_view a(argv[i]);
    if (!a.starts_with('-')) continue;
    while (a.starts_with('-')) a.remove_prefix(1);
    if (a.starts_with("dt-")) a.remove_prefix(3);
    if (a == "no-run=" || a == "nr=") continue;
    if (a.starts_with("no-run=") || a.starts_with("nr=")) {
      if (std::find(std::begin(falses), std::end(falses), a.substr(a.find('=') + 1)) == std::end(falses)) return true;
    } else if (std::find(std::begin(queries), std::end(queries), a) != std::end(queries)) {
      return true;
    }
  }
  return false;
}

/// How many cases of the suite "gpu" a run with this command line would run: doctest lists them
/// with the run's own filters, into nothing (an --out file is left alone).
std::size_t gpu_cases_selected(int argc, char** argv) {
  std::ostream nowhere(nullptr);
  doctest::Context probe(argc, argv);
  const char* const list[] = {"", "--list-test-cases"};  // a bare flag: doctest takes no "=true" here
  probe.applyCommandLine(2, list);
  probe.setCout(&nowhere);
  g_listing = true;
  g_gpu_cases_listed = 0;
  probe.run();
  g_listing = false;
  return g_gpu_cases_listed;
}
}  // namespace

namespace pinfeed::test {
void skip_case(const std::string& reason) {
  g_skipped.emplace(g_current_case, reason);
  const std::string note = "skipped: " + reason;
  MESSAGE(note);
}
}  // namespace pinfeed::test

int main(int argc, char** argv) {
  pinfeed::set_log_level(pinfeed::log_level::warn);
  // The tests run loaders of up to 8 workers on any machine, as an application may: they hold
  // TBB's process-wide cap high enough (the loader itself never changes it).
  const tbb::global_control thread_cap(tbb::global_control::max_allowed_parallelism,
                                       std::max<std::size_t>(9, std::thread::hardware_concurrency() + 1));
  // Loaders shard by a launcher's environment (torchrun, Open MPI, Slurm), which a GPU runner or a
  // shell under mpirun may have set: every case starts without one (a case that wants one sets it).
  for (const char* name : pinfeed::test::kLauncherVariables) ::unsetenv(name);
  doctest::Context context(argc, argv);
  // Without a usable device the cases of the suite "gpu" the run would run are left out by
  // doctest's own filter, so that doctest counts them skipped (a whole-executable run reports
  // them so, never as passed); the GPU simulator is a usable device, and its runs keep them.
  std::size_t gpu_left_out = 0;
  if (!query_only(argc, argv) && !pinfeed::cuda_devices().usable) {  // (a GPU machine lists nothing)
    const std::size_t gpu_cases = gpu_cases_selected(argc, argv);
    if (gpu_cases > 0) {
      context.addFilter("test-suite-exclude", "gpu");
      gpu_left_out = gpu_cases;
    }
  }
  const int rc = context.run();
  if (rc != 0 || context.shouldExit()) return rc;
  if (!g_unasserted.empty()) {
    std::printf("%zu case(s) passed without a single assertion (make each check something real, or skip it "
                "with pinfeed::test::skip_case):\n", g_unasserted.size());
    for (const auto& c : g_unasserted) std::printf("  %s\n", c.c_str());
    return 1;
  }
  if (gpu_left_out > 0)
    std::printf("skipped: %zu case(s) of the GPU suite, no usable CUDA device (%s)\n", gpu_left_out,
                pinfeed::cuda_devices().reason.c_str());
  if (g_cases_run == 0 && gpu_left_out > 0) return kSkipped;  // every case asked for needs a GPU
  if (names_cases(argc, argv) && g_cases_run == 0) {
    std::printf("no test case matches the name given\n");
    return 1;
  }
  if (g_cases_run > 0 && g_skipped.size() == g_cases_run) {
    for (const auto& [name, why] : g_skipped) std::printf("skipped: %s: %s\n", name.c_str(), why.c_str());
    return kSkipped;
  }
  return rc;
}
