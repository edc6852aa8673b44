// libFuzzer entry for pinfeed::fuzz::tar_index (built by scripts/fuzz.sh).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  return pinfeed::fuzz::tar_index(data, size);
}
