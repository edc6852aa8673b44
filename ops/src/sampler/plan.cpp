// The plan and parameters of a GPU sampler call (plan.hpp).
#include "plan.hpp"

#include <algorithm>

namespace pinfeed::ops::gpu_sampler {

namespace {
int bits_for(std::int64_t n) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) < n) ++bits;
  return bits;
}
}  // namespace

plan plan_with_blocks(std::int64_t n, int blocks_per_row) {
  plan pl{};
  pl.blocks_per_row = std::min(blocks_per_row, 65535);
  pl.chunk = ((n + pl.blocks_per_row - 1) / pl.blocks_per_row + 3) / 4 * 4;
  return pl;
}

plan make_plan(std::int64_t rows, std::int64_t n, int multiprocessors) {
  const std::int64_t target_blocks = 4 * static_cast<std::int64_t>(multiprocessors);
  const std::int64_t by_device = std::max<std::int64_t>(1, target_blocks / std::max<std::int64_t>(1, rows));
  const std::int64_t by_size = std::max<std::int64_t>(1, (n + 16383) / 16384);
  return plan_with_blocks(n, static_cast<int>(std::min<std::int64_t>({by_device, by_size, 65535})));
}

std::uint32_t default_candidate_cap(std::int64_t n) {
  return clamp_candidate_cap(n, std::clamp<std::int64_t>(n / 256, 256, kCandidateCap));
}

std::uint32_t clamp_candidate_cap(std::int64_t n, std::int64_t cap) {
  return static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::min<std::int64_t>(n, cap)));
}

params_dev make_params(const sampler_args& a, const sampler_params& p, const plan& pl) {
  params_dev d{};
  d.rows = a.rows;
  d.n = a.n;
  d.k = p.k;
  d.target = positive_target(p);
  d.negative_label = p.negative_label;
  d.ignore_label = p.ignore_label;
  d.seed = p.seed;
  d.offset = p.offset;
  d.mode = p.mode;
  d.cand_cap = default_candidate_cap(a.n);
  d.index_bits = bits_for(a.n);
  d.blocks_per_row = pl.blocks_per_row;
  d.chunk = pl.chunk;
  return d;
}

}  // namespace pinfeed::ops::gpu_sampler
