#pragma once
// The CPU sampler's feature gather: whole feature rows copied to their output slots.

#include <cstddef>
#include <cstdint>

namespace pinfeed::ops::cpu_sampler {

/// out row at[q] = in row from[q] (rows of fb bytes) for q < rows, reading in q order (from[]
/// increases: forward sweeps over the input); non-temporal stores where the rows and out allow.
void gather_feature_rows(std::byte* out, const std::byte* in, const std::uint32_t* from, const std::uint32_t* at,
                         std::int64_t rows, std::size_t fb);

}  // namespace pinfeed::ops::cpu_sampler
