// The temp storage of a GPU sampler call (layout.hpp).
#include "layout.hpp"

namespace pinfeed::ops::gpu_sampler {

/// The row states, and the rows' selections with their sort keys and CUB's sort storage (both grow
/// with rows x k, like the output). Only when several blocks share a row (at most 2 x
/// multiprocessors rows then) also the global histograms (16 KiB a row), candidate lists and tie
/// counts.
sampler_layout make_layout(std::int64_t rows_in, std::int64_t k_in, const params_dev& d, std::size_t sort_bytes) {
  const auto rows = static_cast<std::size_t>(rows_in), k = static_cast<std::size_t>(k_in);
  const std::size_t cand_bytes = rows * 2 * d.cand_cap * sizeof(std::uint64_t);
  temp_layout t;
  sampler_layout l;
  l.state = {"row states", rows * sizeof(row_state)};
  if (d.blocks_per_row > 1) {
    l.hist = {"histograms", rows * 2 * kMaxBins * sizeof(std::uint32_t)};
    l.cleared = t.contiguous("row states and histograms", {&l.state, &l.hist});
    l.cand = t.add({"candidate lists", cand_bytes});
    l.tie_counts =
        t.add({"tie counts", rows * 2 * static_cast<std::size_t>(d.blocks_per_row) * sizeof(std::uint32_t)});
  } else {
    l.state = t.add(l.state);
    // Rows of a block each, longer than shared memory's lists serve (n > 128K): global lists of
    // at most n / 256 keys a class (1/16 byte an item).
    if (d.cand_cap > kRowCandidates) l.cand = t.add({"candidate lists", cand_bytes});
  }
  // The sort runs on a double buffer (no copy of the keys inside CUB's storage), and the selection,
  // read only before the sort, lives in the buffer the keys are not ordered into first.
  l.keys_in = t.add({"order keys", rows * k * sizeof(std::uint64_t)});
  l.keys_out = t.add({"sorted order keys", rows * k * sizeof(std::uint64_t)});
  l.selected = temp_layout::alias({"selection", rows * k * sizeof(std::uint32_t)}, l.keys_out);
  l.begin_off = t.add({"segment begins", rows * sizeof(int)});
  l.end_off = t.add({"segment ends", rows * sizeof(int)});
  l.sort_temp = t.add({"sort storage", sort_bytes});
  l.total = t.total();
  return l;
}

}  // namespace pinfeed::ops::gpu_sampler
