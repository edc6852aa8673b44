#pragma once
// The temp storage of one GPU sampler call, region by region (temp_layout.hpp).

#include <cstddef>
#include <cstdint>

#include "params.hpp"
#include "temp_layout.hpp"

namespace pinfeed::ops::gpu_sampler {

struct sampler_layout {
  temp_region state;       ///< row_state per row
  temp_region hist;        ///< several blocks per row: 2 x kMaxBins counters per row
  temp_region cleared;     ///< several blocks per row: state and hist as one contiguous group, zeroed
                           ///< by one memset before the passes (empty otherwise: the row kernel resets
                           ///< the states itself)
  temp_region cand;        ///< global candidate lists: rows x 2 x cand_cap keys (when shared memory's
                           ///< lists do not serve)
  temp_region tie_counts;  ///< several blocks per row: rows x 2 x blocks_per_row counts
  temp_region keys_in;     ///< order keys, rows x k: the sort's first input
  temp_region keys_out;    ///< the sort's other buffer
  temp_region selected;    ///< alias of keys_out: the rows' selections (rows x k indices), read only
                           ///< before the sort writes into keys_out
  temp_region begin_off, end_off;  ///< segment offsets of the sort, a row each
  temp_region sort_temp;   ///< CUB's sort storage
  std::size_t total = 0;
};

/// The layout of a call over `rows` rows of `k` slots with parameters `d` (its plan and candidate
/// capacity) and `sort_bytes` of CUB sort storage.
sampler_layout make_layout(std::int64_t rows, std::int64_t k, const params_dev& d, std::size_t sort_bytes);

}  // namespace pinfeed::ops::gpu_sampler
