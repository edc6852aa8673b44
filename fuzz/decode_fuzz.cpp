// libFuzzer entry for pinfeed::fuzz::decode (built by scripts/fuzz.sh).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  return pinfeed::fuzz::decode(data, size);
}
