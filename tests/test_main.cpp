// doctest main shared by pinfeed's test executables.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/log.hpp"

namespace {
/// Exit status of a run of the GPU suite alone on a machine without a usable device: CTest reports
/// the test as skipped (SKIP_RETURN_CODE), not passed.
constexpr int kSkipped = 77;

bool gpu_suite_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--test-suite=gpu" || a == "-ts=gpu") return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  pinfeed::set_log_level(pinfeed::log_level::warn);
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (rc == 0 && !context.shouldExit() && gpu_suite_only(argc, argv) && !pinfeed::cuda_devices().usable) {
    std::printf("skipped: every GPU case of this suite, no usable CUDA device (%s)\n",
                pinfeed::cuda_devices().reason.c_str());
    return kSkipped;
  }
  return rc;
}
