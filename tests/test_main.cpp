// doctest main shared by pinfeed's test executables.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <oneapi/tbb/global_control.h>
#include <map>
#include <string>
#include <string_view>

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/log.hpp"
#include "test_util.hpp"

namespace {
/// Exit status of a run of the GPU suite alone on a machine without a usable device: CTest reports
/// the test as skipped (SKIP_RETURN_CODE), not passed.
constexpr int kSkipped = 77;

/// Counts the test cases that ran, so that a run asked for named cases fails when none matched
/// (a CTest test per case must not pass by running nothing).
std::size_t g_cases_run = 0;
std::string g_current_case;
/// The cases that reported themselves skipped (pinfeed::test::skip_case), with their reasons.
std::map<std::string, std::string> g_skipped;
struct case_counter : doctest::IReporter {
  explicit case_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    ++g_cases_run;
    g_current_case = data.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
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

bool gpu_suite_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--test-suite=gpu" || a == "-ts=gpu") return true;
  }
  return false;
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
  const int rc = context.run();
  if (rc == 0 && !context.shouldExit() && names_cases(argc, argv) && g_cases_run == 0) {
    std::printf("no test case matches the name given\n");
    return 1;
  }
  if (rc == 0 && !context.shouldExit() && g_cases_run > 0 && g_skipped.size() == g_cases_run) {
    for (const auto& [name, why] : g_skipped) std::printf("skipped: %s: %s\n", name.c_str(), why.c_str());
    return kSkipped;
  }
  if (rc == 0 && !context.shouldExit() && gpu_suite_only(argc, argv) && !pinfeed::cuda_devices().usable) {
    std::printf("skipped: every GPU case of this suite, no usable CUDA device (%s)\n",
                pinfeed::cuda_devices().reason.c_str());
    return kSkipped;
  }
  return rc;
}
