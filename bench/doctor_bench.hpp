#pragma once
// The doctor's own cost (`pinfeed bench doctor`): `pinfeed run`'s consumer loop and the doctor's L0
// on the same pipeline, alternated and timed side by side, and the wall time of the whole ladder.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace pinfeed::bench {

struct doctor_bench_options {
  std::string transforms = "crop(256),mask(0.25),ycbcr,scale";  ///< on the 1024x1024 synthetic source
  std::uint64_t samples = 2048;
  std::size_t batch = 64, workers = 0, prefetch = 4;
  double seconds = 3.0;  ///< timed per measurement
  int repeats = 5;       ///< measurements of each (alternated; medians compared)
  bool ladder = true;    ///< also time the whole default ladder
};

/// JSON lines: {bench: doctor, impl: run|doctor_l0, repeat, images_per_s} per measurement, then
/// {bench: doctor, metric: overhead, run_images_per_s, doctor_l0_images_per_s, overhead_pct} (medians)
/// and {bench: doctor, metric: ladder_seconds, seconds, verdict}.
void run_doctor_bench(const doctor_bench_options& options, std::ostream& out);

}  // namespace pinfeed::bench
