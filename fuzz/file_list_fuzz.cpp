// libFuzzer entry for pinfeed::fuzz::file_list (built by scripts/fuzz.sh).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  return pinfeed::fuzz::file_list(data, size);
}
