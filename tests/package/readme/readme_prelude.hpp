// What README.md's C++ fragments leave to the reader, so that each compiles as a main() body.
#pragma once
#include <cstdint>

#include <pinfeed/pinfeed.hpp>

[[maybe_unused]] inline std::uint64_t n = 1024;  // samples
[[maybe_unused]] inline std::uint32_t epochs = 2;
/// The training step: whatever the model does with the batch's fields on its stream.
template <class... Args>
void train_step(Args&&...) {}
