#pragma once
// The fuzzed entry points, shared by the libFuzzer binaries (scripts/fuzz.sh) and the regression
// replay in the test suite (tests/loaders/fuzz_regressions_test.cpp). Each returns normally for
// input it rejects with the documented exception, and aborts when an invariant breaks.

#include <cstddef>
#include <cstdint>

namespace pinfeed::fuzz {
int tar_index(const std::uint8_t* data, std::size_t size);
int file_list(const std::uint8_t* data, std::size_t size);
int decode(const std::uint8_t* data, std::size_t size);
}  // namespace pinfeed::fuzz
