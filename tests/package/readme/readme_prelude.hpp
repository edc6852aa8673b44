// What README.md's C++ fragments leave to the reader, so that each compiles as a main() body.
#pragma once
#include <cstdint>
#include <optional>

#include <pinfeed/pinfeed.hpp>

[[maybe_unused]] inline std::uint64_t n = 1024;  // samples
[[maybe_unused]] inline std::uint32_t epochs = 2;
/// The training step: whatever the model does with the batch's fields on its stream.
template <class... Args>
void train_step(Args&&...) {}
/// A framework that takes a DLPack view (and calls its deleter when it frees its tensor).
inline void framework_take(DLManagedTensor* view) { view->deleter(view); }
/// A framework's stream, and a batch to hand over (these blocks are compiled, not run).
[[maybe_unused]] inline cudaStream_t torch_stream = nullptr;
[[maybe_unused]] inline std::optional<pinfeed::batch> batch;
