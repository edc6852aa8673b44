#pragma once
/// @file batch.hpp
/// A batch handed to the consumer: owns its slot until released.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "pinfeed/runtime/cuda_api.hpp"
#include <dlpack/dlpack.h>

/// 1 where the DLPack header has DLPack 1.x's versioned struct (DLManagedTensorVersioned):
/// batch::to_dlpack_versioned exists then. 0 with older headers (Debian 12's DLPack 0.6).
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
#define PINFEED_HAS_DLPACK_VERSIONED 1
#else
#define PINFEED_HAS_DLPACK_VERSIONED 0
#endif

#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed {

namespace detail {
struct slot_lease;
}

/// One batch: every field as a [n, shape...] tensor in one slot, host memory (CPU-only runs) or
/// device memory. Move-only; destroying or release()-ing it returns the slot to the loader. A batch
/// may outlive its loader.
///
/// On a GPU the loader's consumer stream already waits on ready_event() when next() returns, so
/// work queued on stream() sees the data; work on another stream must wait on ready_event() first.
/// release() records an event on stream(): the slot is rewritten only after work queued there
/// before the release has finished. A consumer that reads the batch on a stream of its own releases
/// it with release_after(that stream) instead. Not thread-safe: one thread uses a batch at a time.
class batch {
 public:
  batch() = default;
  explicit batch(std::shared_ptr<detail::slot_lease> lease) noexcept;
  batch(batch&&) noexcept = default;
  batch& operator=(batch&&) noexcept = default;
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;
  ~batch() = default;

  [[nodiscard]] explicit operator bool() const noexcept { return lease_ != nullptr; }
  /// Index of this batch in its epoch.
  [[nodiscard]] std::uint64_t index() const;
  [[nodiscard]] std::uint32_t epoch() const;
  /// Number of samples (batch_size except for a last partial batch).
  [[nodiscard]] std::size_t size() const;
  /// The dataset indices of the samples, in batch order.
  [[nodiscard]] std::span<const std::uint64_t> indices() const;
  [[nodiscard]] std::size_t field_count() const;
  /// The declaration of field i (name, type, per-sample shape).
  [[nodiscard]] const field_spec& spec(std::size_t i) const;
  /// Field i as a [size(), shape...] tensor; a variable-size field (field_spec::variable) as its
  /// arena, a one-dimensional tensor of the elements its samples claimed (extents() says where
  /// each sample's are). Throws std::out_of_range for a bad index.
  [[nodiscard]] tensor_view field(std::size_t i) const;
  /// Where each sample's elements are in variable-size field i's arena (field(i)): 2 words a
  /// sample, its first element and its elements ({0, 0}: none). In host memory, valid while the
  /// batch is. Throws std::invalid_argument for a fixed-size field, std::out_of_range for a bad index.
  [[nodiscard]] std::span<const std::uint64_t> extents(std::size_t i) const;
  /// Field by name. Throws std::out_of_range naming the field if absent.
  [[nodiscard]] tensor_view field(std::string_view name) const;
  /// Field by name as elements of T, with its shape and per-sample slices:
  /// `batch.field<std::int64_t>("label").sample(i)[0]`. Throws std::out_of_range naming an absent
  /// field, std::invalid_argument naming the field when T is not its dtype.
  template <class T>
  [[nodiscard]] typed_view<T> field(std::string_view name) const {
    return field(name).typed<T>("batch field '" + std::string(name) + "'");
  }
  [[nodiscard]] memory_location location() const;
  /// The event recorded after the host-to-device copy (null on the CPU path).
  [[nodiscard]] cudaEvent_t ready_event() const;
  /// The loader's consumer stream (null on the CPU path).
  [[nodiscard]] cudaStream_t stream() const;
  /// A DLPack view of field `name` that keeps the slot alive until its deleter runs, even after
  /// this batch is released (and after the loader is gone). Device type: kDLCUDA, kDLCUDAHost
  /// (pinned) or kDLCPU. The view is ordered on the loader's consumer stream, stream(): work queued
  /// there sees the data, and the slot's next copy waits for work queued there before the slot's
  /// release (the last of the batch and its views to go). Work on another stream must wait on
  /// ready_event() first and be finished before the deleter runs; or use the overload below.
  /// Calling a view's deleter twice is refused (logged as an error, nothing freed twice).
  [[nodiscard]] DLManagedTensor* to_dlpack(std::string_view name) const;
  /// A DLPack view read on `reader_stream`, as a framework's tensor is (DLPack's
  /// `__dlpack__(stream=...)`): `reader_stream` waits on the batch's copy now (no host wait), and
  /// when the view's deleter runs - from any thread, at any time, even after the batch and the
  /// loader are gone - a fence is recorded on `reader_stream`: the slot's next copy waits for the
  /// work queued there up to the deleter. Several views of one batch on different streams each
  /// order their own. The framework may free its tensor at once, with kernels still queued: no
  /// synchronize anywhere. On the CPU path the stream is ignored. Throws cuda_error when
  /// `reader_stream` cannot wait (a stream of another device, say). If the fence cannot be
  /// recorded when the deleter runs, the deleter waits for `reader_stream` instead (and logs it).
  [[nodiscard]] DLManagedTensor* to_dlpack(std::string_view name, cudaStream_t reader_stream) const;
#if PINFEED_HAS_DLPACK_VERSIONED
  /// DLPack 1.x's versioned views (what `__dlpack__(max_version=(1, ...))` hands out): as the
  /// to_dlpack overloads, ordered the same way, with `version` the header's DLPack version and
  /// `flags` DLPACK_FLAG_BITMASK_READ_ONLY (a slot is the loader's to write, not the reader's).
  [[nodiscard]] DLManagedTensorVersioned* to_dlpack_versioned(std::string_view name) const;
  [[nodiscard]] DLManagedTensorVersioned* to_dlpack_versioned(std::string_view name, cudaStream_t reader_stream) const;
#endif
  /// Returns the slot (unless DLPack views still hold it). The batch is empty afterwards.
  void release() noexcept { lease_.reset(); }
  /// Like release(), for a consumer that read the batch on `stream` rather than stream(): records an
  /// event on `stream`, and the copy engine does not rewrite the slot's device memory before the work
  /// queued there so far has finished (nor before the work on stream()). Does not block. On the CPU
  /// path it is release(). Throws cuda_error if the event cannot be recorded (e.g. `stream` belongs
  /// to another device); the batch is then released all the same, after this call has waited for
  /// `stream`. Does nothing on an empty batch.
  void release_after(cudaStream_t stream);

 private:
  const detail::slot_lease& lease() const;
  std::shared_ptr<detail::slot_lease> lease_;
};

}  // namespace pinfeed
