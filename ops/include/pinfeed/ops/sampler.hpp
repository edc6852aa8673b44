#pragma once
/// @file sampler.hpp
/// The balanced sampler: pick K of N items per row, a positive fraction of them positive, topped up
/// from the other class when one is short, in a uniformly random order. Static shapes, no host
/// synchronization on the GPU, batched over rows.
///
/// Semantics (CPU and GPU give the same bits):
///  - labels [rows, n], int32 or int64. negative_label marks negatives, ignore_label is never
///    picked, every other value is positive. P, Nn: counts of positives and negatives in a row.
///  - target = floor(k * positive_fraction). topup mode: num_pos = min(P, max(target, k - Nn));
///    detectron2 mode: num_pos = min(P, target). Both: num_neg = min(Nn, k - num_pos).
///  - Element i of row r has the selection key sel(i) = word i of Philox stream
///    (seed, offset, r, substream 0) and the order key ord(i) = word i of substream 1
///    (philox_stream::word_at). The num_pos positives with the smallest (sel(i), i) are taken,
///    likewise num_neg negatives; the taken items are output in increasing (ord(i), i).
///  - indices [rows, k]: the first valid = num_pos + num_neg entries are item indices, the rest -1.
///    Optional: valid [rows] (int32), gathered features [rows, k, feature_bytes] (padding: zero
///    bytes) and gathered labels [rows, k] (padding: ignore_label).

#include <cstddef>
#include <cstdint>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/exception.hpp"

#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed::ops {

enum class sampler_mode : std::uint8_t { topup, detectron2 };

struct sampler_params {
  std::int64_t k = 0;
  double positive_fraction = 0.5;
  std::int64_t negative_label = 0;
  std::int64_t ignore_label = -1;
  sampler_mode mode = sampler_mode::topup;
  std::uint64_t seed = 0;
  std::uint32_t offset = 0;  ///< draw number: each value gives an independent draw under one seed
};

/// Pointers (host or device, as the function requires) and shapes of one call.
struct sampler_args {
  std::int64_t rows = 1;
  std::int64_t n = 0;  ///< items per row, at most 2^32 - 1
  const void* labels = nullptr;
  dtype label_type = dtype::i64;  ///< i32 or i64
  void* indices = nullptr;        ///< [rows, k]
  dtype index_type = dtype::i64;  ///< i32 or i64
  std::int32_t* valid = nullptr;  ///< optional [rows]
  const void* features = nullptr;   ///< optional [rows, n, feature_bytes]
  std::size_t feature_bytes = 0;    ///< bytes per item row (D * element size)
  /// [rows, k, feature_bytes]; required when features is set. With n = 0, features may be null
  /// (an empty array) and the gathered rows are all padding.
  void* gathered_features = nullptr;
  void* gathered_labels = nullptr;    ///< optional [rows, k], label_type
  /// Optional, the GPU call's own status word: 8 bytes the device can write (device memory, or
  /// mapped pinned host memory). The call sets it to 0 on its stream before its kernels run, and
  /// they write a fault code into it if they find the call's state inconsistent (see
  /// balanced_sample_device). Read it where you synchronize anyway - copy it to the host with the
  /// results - and pass it to check_sampler_status(): the call stays free of host synchronization.
  /// A graph that captured the call resets and writes it on every replay. With a status the call
  /// neither reads nor writes the per-device fault word. The host implementation sets it to 0.
  std::uint64_t* status = nullptr;
};

/// What a GPU call found inconsistent (the labels changed while it ran, or two calls in flight
/// shared one temp buffer).
enum class sampler_fault_kind : std::uint32_t {
  none = 0,
  histogram_short = 1,  ///< a key histogram counted fewer items than the row needs
  candidate_overflow,   ///< more candidates than counted
  selection_overflow,   ///< more items selected than k
  ties_short,           ///< fewer items tie at the threshold than needed
  bad_index,            ///< an output slot was never filled
};

/// A balanced_sample_device call's fault: from its status word (check_sampler_status) or from the
/// per-device word (the next call on the device, check_sampler_faults). Names the row, the class
/// (positives, negatives or neither) and what was inconsistent; that call's output was clamped to
/// its own rows and is not a valid sample.
class sampler_fault : public pinfeed::runtime_error {
 public:
  /// `status`: a nonzero status word as the kernels write it; `earlier`: read from the per-device
  /// word (some earlier call on the device, not a given one).
  explicit sampler_fault(std::uint64_t status, bool earlier = false);
  [[nodiscard]] std::uint64_t status() const noexcept { return status_; }
  [[nodiscard]] sampler_fault_kind kind() const noexcept;
  [[nodiscard]] std::int64_t row() const noexcept;
  /// 0: positives, 1: negatives, -1: not one class.
  [[nodiscard]] int label_class() const noexcept;
  /// The count or slot the message gives.
  [[nodiscard]] std::uint32_t value() const noexcept { return static_cast<std::uint32_t>(status_); }

 private:
  std::uint64_t status_;
};

/// Throws sampler_fault when `status` (a status word read after its call completed) is not 0.
void check_sampler_status(std::uint64_t status);

/// How many positives and negatives a row with `positives` and `negatives` eligible items gets.
struct class_counts {
  std::int64_t num_pos = 0, num_neg = 0;
};
PINFEED_HD class_counts balanced_counts(std::int64_t positives, std::int64_t negatives, std::int64_t k,
                                        std::int64_t target, sampler_mode mode) {
  auto lo = [](std::int64_t a, std::int64_t b) { return a < b ? a : b; };
  auto hi = [](std::int64_t a, std::int64_t b) { return a > b ? a : b; };
  const std::int64_t num_pos = mode == sampler_mode::topup ? lo(positives, hi(target, k - negatives))
                                                           : lo(positives, target);
  return {num_pos, lo(negatives, k - num_pos)};
}

/// floor(k * positive_fraction), the number of positives aimed at.
[[nodiscard]] std::int64_t positive_target(const sampler_params& p) noexcept;

/// Checks shapes, types, pointers and parameters; throws std::invalid_argument naming the bad value.
void validate(const sampler_args& a, const sampler_params& p);

/// Host implementation (the reference): rows in parallel with TBB. Host pointers. Throws
/// std::invalid_argument before touching any output on bad input.
void balanced_sample_host(const sampler_args& a, const sampler_params& p);

/// Device implementation, CUB-style two-phase: with d_temp == nullptr only sets temp_bytes (the
/// pointers may still be null then); then call again with a buffer of that size. Limits: rows up to
/// 65535 and rows * k below 2^31 per call. No host synchronization, capturable in a CUDA graph
/// (while `stream` is capturing, the pointer checks, which query the driver, are skipped);
/// asynchronous on `stream`. Device pointers. One row is ordered by a device-wide sort, several
/// rows by a segmented one.
///
/// The temp storage grows with what the call needs: about 100 bytes a row, 16 bytes per selected
/// slot (rows x k) and CUB's sort storage; when there are few rows (at most twice the device's
/// multiprocessors) and they are long enough for several blocks to share each, also up to 160 KiB
/// a row for the histograms and candidates. It depends on the current device's multiprocessor
/// count: query it on the device the call runs on (a smaller buffer is refused).
///
/// The temp buffer belongs to one call in flight at a time, and the labels must not change while
/// the call runs. If they do, the kernels clamp every write to the call's own rows and record a
/// fault: in the call's own status word when sampler_args::status is set (the caller reads it;
/// check_sampler_status), else in a host-mapped word of the device (allocated once per process and
/// device, at the first call without a status); the next call on that device without a status that
/// runs (not a size query), or check_sampler_faults(), throws sampler_fault naming the row. That
/// word is per device and process: the exception says that some call on the device went wrong,
/// not which one. Throws std::invalid_argument before launching anything on bad input, cuda_error
/// on launch failure.
void balanced_sample_device(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                            cudaStream_t stream);

/// Throws sampler_fault if a balanced_sample_device call without a status on the current device,
/// completed since the last check, found its state inconsistent (see above). Reads host memory only: it does not
/// synchronize, so synchronize the stream first to include the calls still in flight.
void check_sampler_faults();

}  // namespace pinfeed::ops
