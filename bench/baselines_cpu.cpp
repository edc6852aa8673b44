// The host half of the sampler baselines (baselines.hpp).
#include "baselines.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/runtime/philox.hpp"

namespace pinfeed::bench {
namespace {

using ops::sampler_args;
using ops::sampler_params;

/// Writes one row's picks (item indices in output order), -1 padding and the gathers.
template <class L>
void write_picks(const sampler_args& a, const sampler_params& p, std::int64_t row, const std::vector<std::int64_t>& picks,
                 const L* labels) {
  const std::int64_t k = p.k, valid = static_cast<std::int64_t>(picks.size());
  for (std::int64_t j = 0; j < k; ++j) {
    const std::int64_t idx = j < valid ? picks[j] : -1;
    if (a.index_type == dtype::i64) static_cast<std::int64_t*>(a.indices)[row * k + j] = idx;
    else static_cast<std::int32_t*>(a.indices)[row * k + j] = static_cast<std::int32_t>(idx);
    if (a.gathered_labels != nullptr)
      static_cast<L*>(a.gathered_labels)[row * k + j] = idx >= 0 ? labels[idx] : static_cast<L>(p.ignore_label);
    if (a.features != nullptr) {
      auto* dst = static_cast<std::byte*>(a.gathered_features) + (row * k + j) * a.feature_bytes;
      if (idx >= 0)
        std::memcpy(dst, static_cast<const std::byte*>(a.features) + (row * a.n + idx) * a.feature_bytes, a.feature_bytes);
      else
        std::memset(dst, 0, a.feature_bytes);
    }
  }
  if (a.valid != nullptr) a.valid[row] = static_cast<std::int32_t>(valid);
}

template <class L>
void naive_all(const sampler_args& a, const sampler_params& p) {
  const std::int64_t target = ops::positive_target(p);
  std::vector<std::int64_t> pos, negs, sampled;
  for (std::int64_t row = 0; row < a.rows; ++row) {
    const L* labels = static_cast<const L*>(a.labels) + row * a.n;
    pos.clear();
    negs.clear();
    for (std::int64_t i = 0; i < a.n; ++i) {  // nonzero(labels == positive), nonzero(labels == negative)
      if (labels[i] == static_cast<L>(p.negative_label)) negs.push_back(i);
      else if (labels[i] != static_cast<L>(p.ignore_label)) pos.push_back(i);
    }
    const ops::class_counts cc = ops::balanced_counts(static_cast<std::int64_t>(pos.size()),
                                                      static_cast<std::int64_t>(negs.size()), p.k, target, p.mode);
    philox_stream rng(p.seed, p.offset, static_cast<std::uint64_t>(row), 2);
    auto randperm = [&](std::vector<std::int64_t>& v) {  // Fisher-Yates, as torch.randperm
      for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(static_cast<std::uint32_t>(i))]);
    };
    randperm(pos);
    randperm(negs);
    sampled.assign(pos.begin(), pos.begin() + cc.num_pos);  // cat
    sampled.insert(sampled.end(), negs.begin(), negs.begin() + cc.num_neg);
    randperm(sampled);
    write_picks(a, p, row, sampled, labels);
  }
}

}  // namespace

void naive_sample_cpu(const sampler_args& a, const sampler_params& p) {
  ops::validate(a, p);
  if (a.label_type == dtype::i64) naive_all<std::int64_t>(a, p);
  else naive_all<std::int32_t>(a, p);
}

void validate_naive_gpu_shapes(const sampler_args& a, const sampler_params& p, bool running) {
  ops::detail::validate_gpu_shapes(a, p, running);
  // DeviceSelect and DeviceRadixSort count items in int there.
  if (a.n > 0x7FFFFFFFll)
    throw std::invalid_argument("naive sampler (GPU): n = " + std::to_string(a.n) +
                                " exceeds 2^31 - 1, the item count CUB's sort takes");
}

}  // namespace pinfeed::bench
