#pragma once
// The doctor's modes: which ones a pipeline gets (each with the note that says why it does not run,
// where it does not), and a mode's numbers from its timed steps.

#include <cstddef>
#include <vector>

#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/doctor/stages.hpp"

namespace pinfeed {

/// A mode of the ladder and how it runs: the loader over a source cached at a stage, or cached
/// whole batches replayed from host or device memory.
struct plan_entry {
  doctor_mode mode;
  enum class kind { loader, host_batches, device_batches } how = kind::loader;
  sample_cache cache;
};

/// The ladder's modes for `p` (the report's facts filled: encoded, gpu, transform_names), a pool of
/// `pool` samples; `device_tail`: the pipeline leaves a pointwise tail to the device. Checks the
/// modes and the trace mode asked for (std::invalid_argument naming them).
[[nodiscard]] std::vector<plan_entry> plan_modes(const doctor_pipeline& p, const doctor_options& o,
                                                 const doctor_report& facts, std::size_t pool, bool device_tail);

/// Fills m's numbers from its timed steps: each step's wait (`waits`), end (`ends`, s from the
/// mode's start) and seconds per image (`per_image`), the images, the wall time and the process's
/// CPU seconds over `threads` threads.
void summarize(doctor_mode& m, std::vector<double> waits, const std::vector<double>& ends, const std::vector<double>& per_image,
               std::size_t images, double wall, double cpu, unsigned threads);

}  // namespace pinfeed
