#pragma once
/// @file source.hpp
/// What a loader loads from: a Source produces sample i into buffers the loader hands it (the
/// sample's place in a pinned batch slot, so collation costs no copy).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/stats.hpp"
#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed {

struct device_choice;

namespace detail {
/// The loader's access to a sample's place in its epoch (runtime/src/loader.cpp).
struct sample_access;
/// A variable-size field's arena in one slot (field_spec::variable), as the loader lends it to
/// the samples of a batch.
struct field_arena {
  std::byte* data = nullptr;                   ///< the arena (null: a fixed-size field)
  std::uint64_t capacity = 0;                  ///< its elements
  std::atomic<std::uint64_t>* used = nullptr;  ///< elements claimed so far
  std::uint64_t* extents = nullptr;            ///< per sample of the batch: first element, elements
};
}  // namespace detail

/// The Philox substream of the stand-in draws (see stand_in_position).
inline constexpr std::uint32_t kStandInSubstream = 0xFFFF;
/// Random draws before stand_in_position() falls back to scanning the epoch from the last one.
inline constexpr std::uint64_t kStandInDraws = 16;

/// The epoch position whose sample stands in, at attempt k >= 1, for sample `index` that cannot be
/// produced (error_policy::skip), in an epoch of `size` positions. Attempts 1..kStandInDraws are
/// uniform draws from Philox(seed, epoch, index, kStandInSubstream), so the replacements of a run of
/// bad samples spread over the epoch instead of piling onto the sample after them; later attempts
/// walk on from the last draw, so every position is reached within kStandInDraws + size attempts.
/// A pure function of its arguments: the same for any worker count and after a resume.
[[nodiscard]] inline std::uint64_t stand_in_position(std::uint64_t seed, std::uint32_t epoch, std::uint64_t index,
                                                     std::uint64_t k, std::uint64_t size) noexcept {
  if (size == 0) return 0;
  const philox_stream s(seed, epoch, index, kStandInSubstream);
  const auto draw = [&](std::uint64_t j) {
    const philox_block b = s.block_at(static_cast<std::uint32_t>(j));
    return ((static_cast<std::uint64_t>(b.v[0]) << 32) | b.v[1]) % size;
  };
  if (k <= kStandInDraws) return draw(k);
  return (draw(kStandInDraws) + (k - kStandInDraws)) % size;
}

/// Where a sample stands in its loader's epoch order (this rank's share), and the order around it:
/// what a source that fetches ahead of use walks (sample::order()).
class order_cursor {
 public:
  order_cursor(const epoch_order& order, std::uint32_t epoch, std::uint64_t position, std::uint64_t pass) noexcept
      : order_(&order), epoch_(epoch), position_(position), pass_(pass) {}
  [[nodiscard]] std::uint32_t epoch() const noexcept { return epoch_; }
  /// The sample's position in the epoch.
  [[nodiscard]] std::uint64_t position() const noexcept { return position_; }
  /// Which pass over the epoch this is: each start of an epoch by a loader (start_epoch(), or the
  /// first next()) takes a number no other start in the process has. Sources that read ahead along
  /// the order tell by it that the same epoch is read again (another loader, an evaluation run
  /// again with its epoch number).
  [[nodiscard]] std::uint64_t pass() const noexcept { return pass_; }
  /// Samples in the epoch.
  [[nodiscard]] std::uint64_t epoch_size() const { return order_->size(epoch_); }
  /// The dataset index at `position` of this epoch, or nullopt past its end.
  [[nodiscard]] std::optional<std::uint64_t> index_at(std::uint64_t position) const { return index_at(epoch_, position); }
  /// The dataset index at `position` of `epoch` (the next one, say, to fetch ahead across its
  /// start), or nullopt past its end.
  [[nodiscard]] std::optional<std::uint64_t> index_at(std::uint32_t epoch, std::uint64_t position) const {
    if (position >= order_->size(epoch)) return std::nullopt;
    return order_->index_at(epoch, position);
  }

 private:
  const epoch_order* order_;
  std::uint32_t epoch_;
  std::uint64_t position_, pass_;
};

/// One sample being produced: its identity, its random stream and its output buffers.
/// Handed to Source::produce on a worker thread; valid only during that call.
class sample {
 public:
  sample(std::uint64_t index, std::uint32_t epoch, std::uint64_t seed, std::span<const field_spec> specs,
         std::span<std::byte* const> buffers, stage_stats* stats = nullptr, trace_recorder* trace = nullptr)
      : index_(index), epoch_(epoch), seed_(seed), specs_(specs), buffers_(buffers), stats_(stats),
        trace_(trace) {}

  /// The dataset index of this sample.
  [[nodiscard]] std::uint64_t index() const noexcept { return index_; }
  [[nodiscard]] std::uint32_t epoch() const noexcept { return epoch_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  /// The sample's random stream: a pure function of (seed, epoch, index, substream).
  [[nodiscard]] philox_stream rng(std::uint32_t substream = 0) const noexcept {
    return philox_stream(seed_, epoch_, index_, substream);
  }

  [[nodiscard]] std::size_t field_count() const noexcept { return specs_.size(); }
  [[nodiscard]] const field_spec& spec(std::size_t i) const { return specs_[checked(i)]; }
  /// The output bytes of field i (exactly spec(i).bytes() long; empty for a device_only field).
  /// Throws std::invalid_argument for a variable-size field (claim() its bytes).
  [[nodiscard]] std::span<std::byte> bytes(std::size_t i) const {
    if (specs_[checked(i)].variable) variable_field(i);
    if (specs_[i].device_only) return {};  // made on the device after the copy: nothing here
    return {buffers_[i], specs_[i].bytes()};
  }
  /// Claims `n` elements of variable-size field i (field_spec::variable) for this sample: its
  /// bytes in the slot's arena, n x the element size long, for the source to write. Empty when n
  /// is more than the field's most per sample (shape[0]) or the arena is full (only a sample that
  /// claims again can fill it): the sample then holds none, and the source takes another way (a
  /// fallback of its own, say); a claim that does not fit takes nothing, so the arena's claims lie
  /// one after another without gaps. A second claim replaces the first (its elements stay in the
  /// arena, no sample's). Throws std::invalid_argument
  /// for a fixed-size field, std::logic_error for a sample made outside a loader.
  [[nodiscard]] std::span<std::byte> claim(std::size_t i, std::size_t n);
  template <class T>
  [[nodiscard]] std::span<T> claim(std::string_view name, std::size_t n) {
    const std::size_t i = find(name);
    if (sizeof(T) != dtype_size(specs_[i].type))
      throw pinfeed::invalid_argument("field '" + specs_[i].name + "' has element type " +
                                      std::string(dtype_name(specs_[i].type)) + ", not one of " +
                                      std::to_string(sizeof(T)) + " bytes");
    const auto b = claim(i, n);
    return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
  }
  /// The elements a claim of variable-size field i could take now: what the arena has left, at
  /// most the field's most per sample (other samples may claim meanwhile). Throws like claim().
  [[nodiscard]] std::uint64_t room(std::size_t i) const;
  /// Where the sample's claim of variable-size field i sits in the slot's arena: its first element
  /// and its elements ({0, 0}: none). Throws like claim().
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> claimed(std::size_t i) const;
  /// The output bytes of the field called `name`; throws std::out_of_range naming it if absent.
  [[nodiscard]] std::span<std::byte> bytes(std::string_view name) const { return bytes(find(name)); }
  /// Field i as elements of T; throws std::invalid_argument if sizeof(T) differs from the element size.
  template <class T>
  [[nodiscard]] std::span<T> as(std::size_t i) const {
    const auto b = bytes(i);
    if (sizeof(T) != dtype_size(specs_[i].type))
      throw pinfeed::invalid_argument("field '" + specs_[i].name + "' has element type " +
                                  std::string(dtype_name(specs_[i].type)) + ", not one of " +
                                  std::to_string(sizeof(T)) + " bytes");
    return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
  }
  template <class T>
  [[nodiscard]] std::span<T> as(std::string_view name) const { return as<T>(find(name)); }
  [[nodiscard]] std::size_t find(std::string_view name) const {
    for (std::size_t i = 0; i < specs_.size(); ++i)
      if (specs_[i].name == name) return i;
    throw pinfeed::out_of_range("sample has no field '" + std::string(name) + "'");
  }

  /// The dataset index that stands in, at attempt k >= 1, for this sample when it cannot be
  /// produced: the sample at stand_in_position() of this rank's epoch order. Without an order (a
  /// sample made outside a loader) the position is a dataset index.
  [[nodiscard]] std::uint64_t stand_in(std::uint64_t k, std::uint64_t dataset_size) const {
    const std::uint64_t pos =
        stand_in_position(seed_, epoch_, index_, k, order_ != nullptr ? order_->size(epoch_) : dataset_size);
    return order_ != nullptr ? order_->index_at(epoch_, pos) : pos;
  }
  /// Puts this sample at `other`'s place in the epoch: for a sample a source makes to fill
  /// `other`'s slot (reading another index for it), so that its order() is `other`'s.
  /// Its variable-size fields' claims go to `other`'s place in the slot too.
  void share_place(const sample& other) noexcept {
    order_ = other.order_;
    position_ = other.position_;
    pass_ = other.pass_;
    arenas_ = other.arenas_;
    slot_position_ = other.slot_position_;
  }
  /// This sample's place in its loader's epoch order (this rank's share), for sources that fetch
  /// ahead of use; nullopt for a sample made outside a loader.
  [[nodiscard]] std::optional<order_cursor> order() const noexcept {
    if (order_ == nullptr) return std::nullopt;
    return order_cursor(*order_, epoch_, position_, pass_);
  }

  /// Where the sample came from (a file path), for error messages. Optional.
  void set_origin(std::string origin) { origin_ = std::move(origin); }
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }

  /// The loader's counters and trace, for sources that time their own sub-stages (may be null).
  [[nodiscard]] stage_stats* stats() const noexcept { return stats_; }
  [[nodiscard]] trace_recorder* trace() const noexcept { return trace_; }

 private:
  friend struct detail::sample_access;
  std::size_t checked(std::size_t i) const {
    if (i >= specs_.size())
      throw pinfeed::out_of_range("field " + std::to_string(i) + " out of range (sample has " +
                              std::to_string(specs_.size()) + ")");
    return i;
  }
  [[noreturn]] void variable_field(std::size_t i) const;
  const detail::field_arena& arena(std::size_t i) const;
  std::uint64_t index_;
  std::uint32_t epoch_;
  std::uint64_t seed_;
  std::span<const field_spec> specs_;
  std::span<std::byte* const> buffers_;
  stage_stats* stats_;
  trace_recorder* trace_;
  std::string origin_;
  const epoch_order* order_ = nullptr;
  std::uint64_t position_ = 0;
  std::uint64_t pass_ = 0;
  const detail::field_arena* arenas_ = nullptr;  // per field, lent by the loader (null: outside one)
  std::size_t slot_position_ = 0;                // the sample's place in its batch
};

/// Memory that a part of a pipeline holds while a loader runs: for the loader's memory budget
/// (loader_options::memory_budget), which also counts its own slots.
struct memory_use {
  std::string consumer;     ///< what holds it, as the budget's message names it
  std::uint64_t bytes = 0;  ///< the most it holds
};

/// One batch's slot as a source's batch hooks see it (source::finish_batch, source::before_copy,
/// source::after_copy).
struct slot_view {
  std::span<const field_spec> specs;
  /// Field i's first byte in the host slot (a variable-size field's arena).
  std::span<std::byte* const> host;
  /// The same in the device slot.
  std::span<std::byte* const> device;
  /// Per field: a variable-size field's extents in the host slot (2 words a sample: first element,
  /// elements); null for a fixed-size field.
  std::span<const std::uint64_t* const> extents;
  /// Per field: the elements claimed in a variable-size field's arena (0 for a fixed-size field).
  std::span<const std::uint64_t> used;
  std::size_t count = 0;     ///< samples in the batch
  std::uint64_t batch = 0;   ///< the batch's number in its epoch
  cudaStream_t stream = nullptr;  ///< the loader's copy stream
  int device_index = -1;     ///< the CUDA device
  std::uint64_t seed = 0;    ///< the loader's seed (loader_options::seed)
  std::uint32_t epoch = 0;   ///< the batch's epoch
};

/// A dataset of `size()` samples with the fields `fields()`.
class source {
 public:
  virtual ~source() = default;
  /// Number of samples. Must stay constant while a loader uses the source.
  [[nodiscard]] virtual std::uint64_t size() const = 0;
  /// The fields every sample has, declared up front.
  [[nodiscard]] virtual std::vector<field_spec> fields() const = 0;
  /// Writes sample `s.index()` into `s`'s buffers. Called concurrently from worker threads, each
  /// call for a different sample; must be thread-safe. Throwing marks the sample as failed: the
  /// consumer gets a sample_error naming the index at the batch that holds it.
  virtual void produce(sample& s) = 0;
  /// A short description for logs and reports.
  [[nodiscard]] virtual std::string name() const { return "source"; }
  /// What identifies the data (its files or shards, say): a loader's state() keeps a digest of it,
  /// so that a state is not resumed over other data. Default: name().
  [[nodiscard]] virtual std::string identity() const { return name(); }
  /// How the samples sit in storage, for a shard-aware shuffle (epoch_order_options::groups): a
  /// loader that shuffles and was given no groups takes these. Default: none (an exact global
  /// shuffle).
  [[nodiscard]] virtual std::shared_ptr<const sample_groups> groups() const { return nullptr; }
  /// The memory it holds beyond the loader's slots (caches, read-ahead), each part named. Default:
  /// none.
  [[nodiscard]] virtual std::vector<memory_use> memory() const { return {}; }
  /// What it keeps on a CUDA loader's device for batches of `batch_size` samples (the scratch its
  /// after_copy works in), each part named: a CUDA loader counts it in its memory budget with the
  /// device slots. Default: none.
  [[nodiscard]] virtual std::vector<memory_use> device_memory(std::size_t batch_size) const {
    (void)batch_size;
    return {};
  }
  /// The most bytes it may hold: a loader with a memory budget calls this once, at construction
  /// and before any produce(), with the budget less its first slots. Parts that adapt (a remote
  /// reader's range read-ahead) then keep within it where they can; memory() reports the result,
  /// and what cannot shrink stays as it was (the loader's budget check names it). Default: nothing
  /// adapts.
  virtual void limit_memory(std::uint64_t bytes) { (void)bytes; }
  /// Each loader that takes the source calls this at its construction, before fields(), with the
  /// device its batches go to: a source that needs a GPU (or the CPU) refuses the other by throwing
  /// std::invalid_argument, and the loader is not made. Default: any.
  virtual void on_loader(const device_choice& device) { (void)device; }
  /// For every loader (CPU or CUDA), once a batch's samples are all produced, before anything else
  /// sees the batch (before before_copy on a CUDA device): the source may work on the host slot as
  /// a whole (a batch op). Runs on the thread that finished the batch; slot.device and slot.stream
  /// are set on a CUDA device only. Throwing fails the batch. Default: nothing.
  virtual void finish_batch(const slot_view& slot) { (void)slot; }
  /// For a loader on a CUDA device, once a batch's samples are all produced and before its slot is
  /// copied: the source may rewrite the host slot (gather what its device work needs, say). Runs
  /// on the thread that finished the batch. Throwing fails the batch. Default: nothing.
  virtual void before_copy(const slot_view& slot) { (void)slot; }
  /// For a loader on a CUDA device, after the slot's copy is queued on slot.stream (with
  /// slot.device_index current): the source may queue device work there that reads and writes the
  /// device slot; it runs before the batch reaches the consumer, and the host slot is not refilled
  /// until it is queued. Must not synchronize the stream. Throwing fails the batch. Default: nothing.
  virtual void after_copy(const slot_view& slot) { (void)slot; }
};

/// Wraps any callable `void(sample&)` as a source of `size` samples with `fields`.
[[nodiscard]] std::shared_ptr<source> make_source(std::uint64_t size, std::vector<field_spec> fields,
                                                  std::function<void(sample&)> produce,
                                                  std::string name = "callable");


}  // namespace pinfeed
