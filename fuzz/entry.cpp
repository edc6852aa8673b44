// The libFuzzer entry of one target, chosen at build time (PINFEED_FUZZ_TARGET, its name).
#include <cstdio>
#include <cstdlib>

#include "targets.hpp"

namespace {
const pinfeed::fuzz::target& chosen() {
  static const pinfeed::fuzz::target* t = [] {
    const auto* found = pinfeed::fuzz::find_target(PINFEED_FUZZ_TARGET);
    if (found == nullptr) {
      std::fprintf(stderr, "no fuzz target named '%s' in this build\n", PINFEED_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return *t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  (void)chosen().run({data, size});
  return 0;
}
