// doctest main shared by pinfeed's test executables.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/log.hpp"

int main(int argc, char** argv) {
  pinfeed::set_log_level(pinfeed::log_level::warn);
  doctest::Context context(argc, argv);
  return context.run();
}
