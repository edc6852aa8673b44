// Device side of sampler.hpp: the sync-free batched balanced sampler (a radix select of the
// num_pos-th and num_neg-th selection key of every row, built from CUB block primitives), and the
// one translation unit that instantiates its kernels.
//
// Layers, as in CUB: block-level steps (block_*.cuh), kernels (pass_kernels.cuh when several blocks
// share a row, row_kernel.cuh when a block has a row to itself, output_kernels.cuh), and here the
// dispatch: plan (plan.cpp), temp layout (layout.cpp), argument checks, launches. All on one stream,
// no host synchronization (capturable in a CUDA graph). After the selection, for every row:
//   order_keys      (ord(i), i) of every taken item
//   DeviceSegmentedRadixSort of those keys per row (one row: DeviceRadixSort of its k slots)
//   write           indices, -1 padding, valid counts, gathered labels and features
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "device_host.hpp"
#include "layout.hpp"
#include "output_kernels.cuh"
#include "pass_kernels.cuh"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "plan.hpp"
#include "row_kernel.cuh"
#include "test_seam.hpp"

namespace pinfeed::ops {
namespace gpu_sampler {
namespace {

/// CUB's sort storage for rows x k order keys of 32 + index_bits bits (one row: all k slots, the
/// unused ones padded, sorted device-wide; several: a segment a row).
std::size_t sort_temp_bytes(std::int64_t rows, std::int64_t k, int index_bits) {
  std::size_t bytes = 0;
  cub::DoubleBuffer<std::uint64_t> keys(nullptr, nullptr);
  if (rows == 1 && k > 0) {
    PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, static_cast<int>(k), 0,
                                                    padded_sort_bits(index_bits)));
  } else if (rows * k > 0) {
    PINFEED_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(
        nullptr, bytes, keys, static_cast<int>(rows * k), static_cast<int>(rows), static_cast<const int*>(nullptr),
        static_cast<const int*>(nullptr), 0, 32 + index_bits));
  }
  return bytes;
}

/// The selection of every row into l.selected; seam.after_first_kernel(stream) once the first
/// kernel is queued.
template <class L, class Seam>
void launch_selection(void* temp, const sampler_layout& l, const L* labels, const params_dev& p, cudaStream_t stream,
                      const Seam& seam) {
  auto* states = l.state.in<row_state>(temp);
  auto* hist = l.hist.in<std::uint32_t>(temp);
  auto* cand = l.cand.in<std::uint64_t>(temp);
  auto* tie_counts = l.tie_counts.in<std::uint32_t>(temp);
  auto* selected = l.selected.in<std::uint32_t>(temp);
  const auto rows = static_cast<unsigned>(p.rows);
  if (p.blocks_per_row == 1) {
    // Every pass in one kernel, which also resets the row states (even when n is 0).
    row_kernel<L><<<dim3(1, rows), kThreads, 0, stream>>>(labels, p, states,
                                                           p.cand_cap > kRowCandidates ? cand : nullptr, selected);
    PINFEED_CHECK_LAUNCH();
    seam.after_first_kernel(stream);
    return;
  }
  PINFEED_CUDA_TRY(cudaMemsetAsync(l.cleared.in<std::byte>(temp), 0, l.cleared.bytes, stream));
  const dim3 grid(static_cast<unsigned>(p.blocks_per_row), rows);
  count_hist_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist);
  PINFEED_CHECK_LAUNCH();
  seam.after_first_kernel(stream);
  choose_kernel<0><<<rows, kThreads, 0, stream>>>(p, states, hist);
  PINFEED_CHECK_LAUNCH();
  filter_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist, cand, selected);
  PINFEED_CHECK_LAUNCH();
  choose_kernel<1><<<rows, kThreads, 0, stream>>>(p, states, hist);
  PINFEED_CHECK_LAUNCH();
  refine_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist, cand);
  PINFEED_CHECK_LAUNCH();
  choose_kernel<2><<<rows, kThreads, 0, stream>>>(p, states, hist);
  PINFEED_CHECK_LAUNCH();
  finish_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, cand, selected);
  PINFEED_CHECK_LAUNCH();
  tie_count_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, tie_counts);
  PINFEED_CHECK_LAUNCH();
  tie_take_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, tie_counts, selected);
  PINFEED_CHECK_LAUNCH();
}

/// The rows' selections ordered and written out (p.k > 0).
template <class L, class I>
void launch_output(void* temp, const sampler_layout& l, const sampler_args& a, const params_dev& p,
                   cudaStream_t stream) {
  const auto* states = l.state.in<row_state>(temp);
  auto* keys_in = l.keys_in.in<std::uint64_t>(temp);
  auto* keys_out = l.keys_out.in<std::uint64_t>(temp);
  auto* begin_off = l.begin_off.in<int>(temp);
  auto* end_off = l.end_off.in<int>(temp);
  const auto rows = static_cast<unsigned>(p.rows);
  const dim3 kgrid(static_cast<unsigned>((p.k + kThreads - 1) / kThreads), rows);
  const bool one_row = rows == 1;
  order_keys_kernel<<<kgrid, kThreads, 0, stream>>>(p, states, l.selected.in<std::uint32_t>(temp), keys_in,
                                                    one_row ? nullptr : begin_off, end_off);
  PINFEED_CHECK_LAUNCH();
  std::size_t sort_bytes = l.sort_temp.bytes;
  // Which buffer ends up holding the order is known on the host when the sort is queued.
  cub::DoubleBuffer<std::uint64_t> keys(keys_in, keys_out);
  if (one_row)
    PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortKeys(l.sort_temp.in<void>(temp), sort_bytes, keys, static_cast<int>(p.k),
                                                    0, padded_sort_bits(p.index_bits), stream));
  else
    PINFEED_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(l.sort_temp.in<void>(temp), sort_bytes, keys,
                                                             static_cast<int>(p.rows * p.k), static_cast<int>(rows),
                                                             begin_off, end_off, 0, 32 + p.index_bits, stream));
  const auto* labels = static_cast<const L*>(a.labels);
  write_kernel<L, I><<<kgrid, kThreads, 0, stream>>>(
      p, states, keys.Current(), labels, static_cast<I*>(a.indices), a.valid, static_cast<L*>(a.gathered_labels),
      static_cast<const std::byte*>(a.features), static_cast<std::byte*>(a.gathered_features), a.feature_bytes);
  PINFEED_CHECK_LAUNCH();
}

template <class L, class I, class Seam>
void run_pipeline(void* temp, const sampler_layout& l, const sampler_args& a, const params_dev& p, cudaStream_t stream,
                  const Seam& seam) {
  launch_selection(temp, l, static_cast<const L*>(a.labels), p, stream, seam);
  if (p.k == 0) {
    if (a.valid != nullptr)
      PINFEED_CUDA_TRY(cudaMemsetAsync(a.valid, 0, static_cast<std::size_t>(p.rows) * sizeof(std::int32_t), stream));
    return;
  }
  launch_output<L, I>(temp, l, a, p, stream);
}

/// The call: checks, plan, layout, the temp-size query or the fault word, the launches. `seam`
/// adjusts the parameters (seam.adjust(params)) and follows the launches (see test_seam.hpp).
template <class Seam>
void dispatch(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
              cudaStream_t stream, const Seam& seam) {
  constexpr const char* kWho = "balanced sampler (GPU)";
  detail::validate_gpu_shapes(a, p, d_temp != nullptr);
  // The plan, and with it the temp size, depends on the device's multiprocessor count: query on
  // the device the call runs on.
  const int device = current_device();
  params_dev d = make_params(a, p, make_plan(a.rows, a.n, multiprocessor_count(device)));
  seam.adjust(d);
  const sampler_layout l = make_layout(a.rows, p.k, d, sort_temp_bytes(a.rows, p.k, d.index_bits));
  if (detail::answer_temp_query(d_temp, temp_bytes, l.total, kWho)) return;
  // A running call: not a size query, which no earlier fault could affect.
  if (!detail::stream_capturing(stream)) detail::check_device_pointers(a, kWho);
  if (a.status != nullptr) {
    // The call's own word: reset on the stream first (a captured graph does so on every replay);
    // the per-device word is left to calls without one.
    PINFEED_CUDA_TRY(cudaMemsetAsync(a.status, 0, sizeof(std::uint64_t), stream));
    d.fault = reinterpret_cast<unsigned long long*>(a.status);
  } else {
    d.fault = fault_word(device);
    rethrow_fault(d.fault);
  }
  if (a.rows == 0) return;
  const bool l64 = a.label_type == dtype::i64, i64 = a.index_type == dtype::i64;
  if (l64 && i64) run_pipeline<std::int64_t, std::int64_t>(d_temp, l, a, d, stream, seam);
  else if (l64) run_pipeline<std::int64_t, std::int32_t>(d_temp, l, a, d, stream, seam);
  else if (i64) run_pipeline<std::int32_t, std::int64_t>(d_temp, l, a, d, stream, seam);
  else run_pipeline<std::int32_t, std::int32_t>(d_temp, l, a, d, stream, seam);
}

/// The shipped call: the plan from the shapes, nothing between the kernels.
struct shipped_seam {
  static void adjust(params_dev&) {}
  static void after_first_kernel(cudaStream_t) {}
};

/// A test's call (test_seam.hpp): the knobs override the plan and the candidate capacity, and the
/// hook runs after the first kernel.
struct knob_seam {
  const detail::sampler_knobs& knobs;
  void adjust(params_dev& d) const {
    if (knobs.candidate_cap != 0) d.cand_cap = clamp_candidate_cap(d.n, knobs.candidate_cap);
    if (knobs.blocks_per_row > 0) {
      const plan pl = plan_with_blocks(d.n, knobs.blocks_per_row);
      d.blocks_per_row = pl.blocks_per_row;
      d.chunk = pl.chunk;
    }
  }
  void after_first_kernel(cudaStream_t stream) const {
    if (knobs.hook != nullptr) knobs.hook(knobs.hook_ctx, stream);
  }
};

}  // namespace
}  // namespace gpu_sampler

void balanced_sample_device(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                            cudaStream_t stream) {
  gpu_sampler::dispatch(d_temp, temp_bytes, a, p, stream, gpu_sampler::shipped_seam{});
}

void detail::balanced_sample_device_with(void* d_temp, std::size_t& temp_bytes, const sampler_args& a,
                                         const sampler_params& p, cudaStream_t stream, const sampler_knobs& knobs) {
  gpu_sampler::dispatch(d_temp, temp_bytes, a, p, stream, gpu_sampler::knob_seam{knobs});
}

}  // namespace pinfeed::ops
