// The sampler's fault word read back on the host (sampler.hpp): sampler_fault and its message.
#include <cstdint>
#include <string>

#include "fault_word.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

namespace {
std::string describe_fault(std::uint64_t word, bool earlier) {
  using namespace gpu_sampler;
  const sampler_fault_kind kind = fault_kind_of(word);
  const int c = fault_class(word);
  const std::int64_t row = fault_row(word);
  const std::uint32_t value = fault_value(word);
  std::string what;
  switch (kind) {
    case sampler_fault_kind::histogram_short:
      what = "its key histogram holds only " + std::to_string(value) + " items, fewer than needed";
      break;
    case sampler_fault_kind::candidate_overflow: what = "more candidates than counted (slot " + std::to_string(value) + ")"; break;
    case sampler_fault_kind::selection_overflow: what = "more items selected than k (slot " + std::to_string(value) + ")"; break;
    case sampler_fault_kind::ties_short:
      what = "only " + std::to_string(value) + " items tie at the threshold, fewer than needed";
      break;
    case sampler_fault_kind::bad_index: what = "output slot " + std::to_string(value) + " was never filled"; break;
    default: what = "an unknown fault (status word " + std::to_string(word) + ")"; break;
  }
  return std::string("balanced sampler (GPU): ") + (earlier ? "an earlier call" : "the call") + " found row " +
         std::to_string(row) + (c == 0 ? " (positives)" : c == 1 ? " (negatives)" : "") + " inconsistent: " + what +
         ". The labels changed while the call ran, or two calls in flight shared one temp buffer; that "
         "call's output was clamped to its rows and is not a valid sample";
}
}  // namespace

sampler_fault::sampler_fault(std::uint64_t status, bool earlier)
    : pinfeed::runtime_error(describe_fault(status, earlier)), status_(status) {}

sampler_fault_kind sampler_fault::kind() const noexcept { return gpu_sampler::fault_kind_of(status_); }
std::int64_t sampler_fault::row() const noexcept { return gpu_sampler::fault_row(status_); }
int sampler_fault::label_class() const noexcept { return gpu_sampler::fault_class(status_); }

void check_sampler_status(std::uint64_t status) {
  if (status != 0) throw sampler_fault(status);
}

}  // namespace pinfeed::ops
