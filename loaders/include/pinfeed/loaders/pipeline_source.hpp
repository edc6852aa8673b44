#pragma once
/// @file pipeline_source.hpp
/// A source that reads an image per sample (generated, or a file decoded), runs a transform
/// pipeline on the worker and writes the result straight into the slot. Trailing colour/scale/
/// normalize steps are either fused on the host (one rounding, CHW float output, the same bits as
/// the GPU op) or left to the GPU (uint8 HWC in the slot: 4x fewer bytes to copy; the consumer runs
/// pinfeed::ops::normalize_hwc_to_chw_device with tail_params()). Bad samples either fail the batch
/// (the default) or are replaced by a stand-in drawn from the epoch (see stand_in_position),
/// counted and listed. It produces samples and nothing else: the doctor's caches and emulated
/// storage wrap its reader (pinfeed/doctor/stages.hpp).

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/remote_counters.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/source.hpp"

namespace pinfeed::loaders {

/// What the pipeline's first step lets a reader do for one sample, given the full image size.
struct decode_plan {
  std::int64_t min_short_side = 0;    ///< shortest side the decoded image needs (0: full resolution)
  std::optional<window_plan> window;  ///< decode only this window, to be resized to its output size
};
using decode_planner = std::function<decode_plan(std::int64_t height, std::int64_t width)>;

/// What image_reader::read() produced.
struct read_result {
  image_spec spec;               ///< the image written
  std::size_t stored_bytes = 0;  ///< bytes it took in storage (the encoded file; the pixels when generated)
  bool window_only = false;      ///< the image is the planned window (possibly scaled), not the whole
  /// Where the image is when the reader lends memory of its own instead of writing into `image`
  /// (a cache, say): valid until the reader is destroyed, never written through. Null: in `image`.
  const std::byte* data = nullptr;
};

/// For readers of encoded images: decodes sample s's `bytes` into `image` the way `plan` allows (a
/// window, or a DCT scale) when the header tells the size, timed as the decode stage. Throws
/// sample_error (stage decode, naming `origin`) when the bytes do not decode.
read_result decode_sample(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                          const decode_options& options, const decode_planner& plan, const std::string& origin);

/// Where a reader's samples are stored: for tools that advise by it (the doctor).
enum class storage_kind {
  other,              ///< a reader of the application's own
  generated,          ///< made in memory (make_reader_from_source)
  image_files,        ///< one file per sample (make_image_files_reader)
  tar_shards,         ///< local tar shards (make_shard_reader)
  remote_tar_shards,  ///< tar shards over HTTP(S) or S3 (make_remote_shard_reader)
};

/// Settings of a remote shard reader that can be changed by making it anew (the doctor tries
/// them); unset: as they are.
struct remote_change {
  std::optional<std::size_t> requests_in_flight{};
  std::optional<std::size_t> read_ahead{};
  std::optional<std::uint64_t> cache_bytes{};
};

/// Produces the image of sample i (any size) and its other fields.
class image_reader {
 public:
  virtual ~image_reader() = default;
  [[nodiscard]] virtual std::uint64_t size() const = 0;
  /// The image shape; negative extents when it varies per sample.
  [[nodiscard]] virtual image_spec image_shape() const = 0;
  /// Fields besides the image (e.g. "label"), written by read() into the sample's buffers 1...
  [[nodiscard]] virtual std::vector<field_spec> extra_fields() const = 0;
  /// Writes sample s.index()'s image into `image` (resized as needed) and its extra fields into
  /// s's fields 1.. (field 0 is the pipeline's output); returns the image's shape and stored size.
  /// A decoder may follow plan(height, width) of the full size: shrink the image while its shorter
  /// side stays >= min_short_side, or decode only the planned window (and say so). Thread-safe.
  /// Throws sample_error naming the stage (read, decode) and the path.
  virtual read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) = 0;
  [[nodiscard]] virtual std::string name() const = 0;
  /// What identifies the data (see source::identity). Default: name().
  [[nodiscard]] virtual std::string identity() const { return name(); }
  /// How the samples sit in storage (see source::groups). Default: none.
  [[nodiscard]] virtual std::shared_ptr<const sample_groups> groups() const { return nullptr; }
  /// Where the samples are stored. Default: storage_kind::other.
  [[nodiscard]] virtual storage_kind storage() const { return storage_kind::other; }
  /// The memory it holds beyond one sample (a cache, a read-ahead), each part named (see
  /// source::memory()). Default: none.
  [[nodiscard]] virtual std::vector<memory_use> memory() const { return {}; }
  /// The most bytes it may hold (see source::limit_memory). Default: nothing adapts.
  virtual void limit_memory(std::uint64_t bytes) { (void)bytes; }
  /// What its remote reads have cost so far; nullopt for a reader that makes none.
  [[nodiscard]] virtual std::optional<remote_counters> fetch_counters() const { return std::nullopt; }
  /// A new reader of the same data with `change` applied to its remote settings (it indexes its
  /// shards again); null for a reader with no remote settings. Default: null.
  [[nodiscard]] virtual std::shared_ptr<image_reader> with_remote(const remote_change& change) const {
    (void)change;
    return nullptr;
  }

  /// The decode options its decode_stored() uses (stores_encoded() readers). Default: the defaults.
  [[nodiscard]] virtual decode_options decoding() const { return {}; }
  /// True for readers of encoded files, whose read() is read_stored() then decode_stored(): a cache
  /// can then keep the stored bytes and still decode every time.
  [[nodiscard]] virtual bool stores_encoded() const { return false; }
  /// How many classes its labels (field "label") count, 0 where it does not say: the soft labels
  /// of a batch op (mixup, cutmix) have that many columns unless the op names num_classes.
  [[nodiscard]] virtual std::int64_t classes() const { return 0; }
  /// Sample s's bytes as stored (a view into `storage`, or into memory the reader owns) with its
  /// extra fields written into s. Only for stores_encoded() readers; throws sample_error (stage read).
  virtual std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage);
  /// Decodes bytes from read_stored() as read() would (stage decode, timed; sample_error naming the
  /// origin on failure).
  virtual read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                                    const decode_planner& plan);
};

/// A reader over a source with a fixed-size uint8 [H, W, C] field (the synthetic source, say).
[[nodiscard]] std::shared_ptr<image_reader> make_reader_from_source(std::shared_ptr<source> base,
                                                               const std::string& image_field = "image");

/// What to do with a sample that cannot be read, decoded or transformed.
enum class error_policy { fail, skip };

/// Where a pipeline's JPEGs are decoded (pipeline_source_options::decode; CLI --decode).
enum class decode_place {
  host,       ///< on the workers, whole (libjpeg-turbo with pinfeed's Huffman decoder)
  device,     ///< hybrid: entropy decoding on the workers, the rest on the loader's GPU (same pixels)
  /// device where a GPU is usable and the pipeline's steps and reader allow it, else host; chosen
  /// when the source is made, so a loader on the CPU then refuses a source that chose the device
  /// (make it with host for such a loader)
  automatic,
  /// nvJPEG on the loader's GPU, loaded at run time (libnvjpeg: the hardware backend where the GPU
  /// has JPEG engines, else its hybrid one): whole files decoded there, then each window resized
  /// and flipped by pinfeed's kernels. Its pixels are not the host path's (nvJPEG's own IDCT and
  /// upsampling, and no DCT scaling): decode_counts::inexact counts them. Where nvJPEG cannot be
  /// loaded or made on the loader's device, a warning says why and the exact device path takes
  /// over; files nvJPEG's backend does not take, or larger than device_bytes_per_sample, go there
  /// too (and to the host where that cannot take them). Same pipelines as device.
  device_inexact,
};
[[nodiscard]] const char* to_string(decode_place p) noexcept;
/// "host", "device", "auto" or "device-inexact"; throws std::invalid_argument naming the text otherwise.
[[nodiscard]] decode_place parse_decode_place(std::string_view text);

/// Where a pipeline's per-sample steps after the decode run (pipeline_source_options::augment_on;
/// CLI --augment-on).
enum class augment_place {
  host,    ///< on the workers
  /// on the loader's GPU, after the copy: every step after the first one (the decode's window or
  /// crop) and the flips after it, each with a device form (transform::device_rounds: the policies,
  /// the colour, histogram and geometry steps, color_jitter, random_grayscale, random_rotation,
  /// random_affine, random_erasing on uint8), bit for bit the host's pixels; the colour/scale tail
  /// then runs on the consumer (device_tail), or where the source owes float images or a batch op
  /// follows, on the device after the steps (finishes_on_device)
  device,
  /// device where the JPEGs are decoded on the device and every such step has a device form, else host
  automatic,
};
[[nodiscard]] const char* to_string(augment_place p) noexcept;
/// "host", "device" or "auto"; throws std::invalid_argument naming the text otherwise.
[[nodiscard]] augment_place parse_augment_place(std::string_view text);

/// How many samples took each decode path, and why those that could not take the device's did not.
struct decode_counts {
  std::uint64_t device = 0;  ///< decoded on the GPU (packed on the host, or whole files by nvJPEG)
  std::uint64_t host = 0;    ///< decoded whole on the host (every sample, with decode host)
  /// With the device path: the host's samples by reason ("progressive" is not one: those are
  /// read whole and then packed), in a fixed order, those with a count only.
  std::vector<std::pair<std::string, std::uint64_t>> host_by_reason;
  std::uint64_t inexact = 0;  ///< of `device`, decoded by nvJPEG (device_inexact): not the host path's pixels
  /// With device_inexact: nvJPEG's backend on the loader's device ("hardware", "hybrid"), or why
  /// nvJPEG is not used ("not used: ..."); empty before a loader starts, and for the other places.
  std::string nvjpeg;
  /// Whether nvJPEG decodes (device_inexact with a backend opened), from `nvjpeg`.
  [[nodiscard]] bool nvjpeg_used() const noexcept { return !nvjpeg.empty() && nvjpeg.rfind("not used", 0) != 0; }
  /// "device 120, host 8 (corrupt 3, too_large 5)"; with nvJPEG "device 120 (nvJPEG hardware: 100
  /// inexact), host 8 (...)".
  [[nodiscard]] std::string to_string() const;
};

/// What the device path of decoding would save on some of a dataset's files (probe_decode_paths).
struct decode_probe {
  std::uint64_t samples = 0;  ///< files probed
  std::uint64_t device = 0;   ///< of those, the ones the device path takes
  /// CPU time per image, over the files the device path takes: the host path's decode (the window,
  /// as the loader decodes it) and the device path's host half (pack_jpeg). The steps after the
  /// decode move to the GPU as well, and are not counted here.
  double host_decode_ms = 0, host_half_ms = 0;
  std::vector<std::pair<std::string, std::uint64_t>> host_by_reason;  ///< the others, by reason
  /// host_half_ms / host_decode_ms (0 when no file was taken).
  [[nodiscard]] double ratio() const { return host_decode_ms > 0 ? host_half_ms / host_decode_ms : 0.0; }
  /// "host half 0.58x the decode's CPU time (0.212 vs 0.366 ms an image); the device takes 46 of 48 files (corrupt 2)".
  [[nodiscard]] std::string to_string() const;
};

struct pipeline_source_options {
  /// Leave the trailing pointwise steps to the consumer's device (the slot keeps uint8). Not with a
  /// batch op, which mixes the tail's floats: the tail then runs on the device after the device's
  /// decode or steps (finishes_on_device), or else on the host.
  bool device_tail = false;
  /// Where JPEGs are decoded. The device path needs a reader of encoded files, a first step that
  /// decodes a window (random_resized_crop, center_crop) followed only by flips (or steps with a
  /// device form, which augment_on moves there), and a loader on a CUDA device (a colour/scale
  /// tail then runs on the consumer with device_tail, else on the device after it); the batch then
  /// has four more fields (jpeg_plan, jpeg_bytes, jpeg_starts, jpeg_quant: the packed samples).
  /// Files it cannot take (not JPEG, progressive ones are taken, CMYK, 12-bit, arithmetic-coded,
  /// corrupt, past the slot's bytes) are decoded on the host, and counted. Windows the host path
  /// decodes at a DCT scale (1/2, 1/4, 1/8) take the device's reduced IDCTs.
  decode_place decode = decode_place::host;
  /// The device path's worst case per sample: the packed bytes a sample may put into the slot (its
  /// blocks; as many more for their starts); a sample past it is decoded on the host (too_large).
  std::uint64_t device_bytes_per_sample = 160 * 1024;
  /// Where the steps after the decode's window and flips run (augment_place): on the device, the
  /// batch has one more field, aug_jobs (each sample's ops and parameters, drawn on the workers),
  /// and the loader must be on a CUDA device.
  augment_place augment_on = augment_place::automatic;
  error_policy on_error = error_policy::fail;
  std::size_t max_failed_paths = 1000;  ///< failures listed by failed() (all are counted)
  /// Under skip: when more than this fraction of an epoch's samples is bad, producing fails (the
  /// batch at hand reports it), so a broken mount is not silently trained on. 0 (default): off.
  /// Must be in [0, 1] (the constructor throws std::invalid_argument otherwise).
  double max_bad_fraction = 0.0;
};

/// The trailing pointwise steps of `p` as one normalize_params (ycbcr? -> scale? -> normalize?),
/// or nullopt when the tail has another shape (it then runs step by step on the host).
[[nodiscard]] std::optional<ops::normalize_params> fused_tail(const pipeline& p);

namespace detail {
class bad_samples;
class hybrid_decoder;
class device_augmenter;
class float_tail;
}

/// Decodes the samples `indices` of `reader` both ways on this thread, timing each with its CPU
/// clock (the reads are not timed): the host path's decode of the first step's window, and the
/// device path's host half. Throws std::invalid_argument naming why when the device path cannot
/// take the pipeline (pipeline_source::device_refusal); files packing past `bytes_per_sample` count
/// as too_large, as in a loader; files that fail to read or decode are
/// left out of the figures (the loader reports those).
[[nodiscard]] decode_probe probe_decode_paths(const std::shared_ptr<image_reader>& reader, const pipeline& steps,
                                              std::span<const std::uint64_t> indices,
                                              std::uint64_t bytes_per_sample = 160 * 1024);

class pipeline_source final : public source {
 public:
  /// Throws std::invalid_argument when the pipeline cannot take the reader's images or has no fixed
  /// output shape (naming the step).
  pipeline_source(std::shared_ptr<image_reader> reader, pipeline steps, pipeline_source_options options = {});
  /// Convenience: over a fixed-size source (see reader_from_source).
  pipeline_source(std::shared_ptr<source> base, pipeline steps, pipeline_source_options options = {},
                  const std::string& image_field = "image");

  std::uint64_t size() const override { return reader_->size(); }
  std::vector<field_spec> fields() const override { return fields_; }
  void produce(sample& s) override;
  std::string name() const override;
  std::string identity() const override { return reader_->identity(); }
  std::shared_ptr<const sample_groups> groups() const override { return reader_->groups(); }
  std::vector<memory_use> memory() const override { return reader_->memory(); }
  void limit_memory(std::uint64_t bytes) override { reader_->limit_memory(bytes); }

  /// The pointwise tail the consumer must run (device_tail mode; nullopt otherwise).
  [[nodiscard]] const std::optional<ops::normalize_params>& tail_params() const noexcept { return consumer_tail_; }
  [[nodiscard]] const pipeline& host_steps() const noexcept { return host_; }
  /// What it was built from: the reader, every step (host and tail) and the options.
  [[nodiscard]] const std::shared_ptr<image_reader>& reader() const noexcept { return reader_; }
  [[nodiscard]] const pipeline& steps() const noexcept { return steps_; }
  [[nodiscard]] const pipeline_source_options& options() const noexcept { return options_; }

  /// Under error_policy::skip a bad sample is tried once per epoch: its index is remembered for
  /// that epoch (for any worker count) and later stand-in searches pass over it without reading
  /// it again. A slot whose sample is bad gets the sample at sample::stand_in() instead.
  ///
  /// Distinct samples found bad, over all epochs (each counted once), and the first
  /// max_failed_paths of their errors.
  [[nodiscard]] std::uint64_t failures() const;
  [[nodiscard]] std::vector<std::string> failed() const;
  /// Slots filled by a stand-in because their own sample was bad (every epoch counted).
  [[nodiscard]] std::uint64_t replaced() const noexcept;
  /// Where the samples were decoded so far (readers of encoded images; zeros for others).
  [[nodiscard]] decode_counts decoded() const;
  /// Where this source decodes: host, device or device_inexact (automatic resolved at construction).
  [[nodiscard]] decode_place decode_path() const noexcept { return place_; }
  /// Why the device path cannot take this pipeline (empty: it can).
  [[nodiscard]] const std::string& device_refusal() const noexcept { return device_refusal_; }
  /// Where its steps after the decode run: host or device (automatic resolved at construction).
  [[nodiscard]] augment_place augment_path() const noexcept;
  /// The steps the GPU runs (empty on the host path).
  [[nodiscard]] pipeline device_steps() const;
  /// Whether the colour/scale tail (and the batch op after it) run on the loader's GPU after the
  /// device's decode or steps: where the source owes float CHW images (no device_tail) or a batch
  /// op follows, and the device path is taken. Field 0, "image", is then made there (device_only:
  /// float32 CHW, the fused tail's arithmetic, bit for bit the host's), from the copied pixels in
  /// field "pixels" (uint8 HWC, scratch).
  [[nodiscard]] bool finishes_on_device() const noexcept { return device_finish_.has_value(); }
  /// The tail the source runs on the device (finishes_on_device; nullopt otherwise).
  [[nodiscard]] const std::optional<ops::normalize_params>& device_tail_params() const noexcept { return device_finish_; }
  /// The steps after the colour/scale tail, on its float CHW images (random_erasing after
  /// normalize: they run after the fused tail, on the host or the device; empty where there are none).
  [[nodiscard]] pipeline float_steps() const;
  /// Whether the workers run the colour/scale tail, fused (float CHW into the slot).
  [[nodiscard]] bool tail_on_host() const noexcept { return host_tail_.has_value(); }
  /// Why the steps after the decode cannot run on the device (empty: they can, or there are none).
  [[nodiscard]] const std::string& augment_refusal() const noexcept { return augment_refusal_; }
  /// The steps after the decode's window (or crop) and its flips, before the tail: those augment_on
  /// places, wherever they run.
  [[nodiscard]] const pipeline& steps_after_decode() const noexcept { return after_decode_; }
  /// What the device steps keep on a loader's GPU (their second image field and counts).
  [[nodiscard]] std::vector<memory_use> device_memory(std::size_t batch_size) const override;
  /// Refuses a loader on the CPU when JPEGs are decoded on the device; opens nvJPEG on the
  /// loader's device for device_inexact (or warns why not, and takes the exact path).
  void on_loader(const device_choice& device) override;
  /// With a batch op (mixup, cutmix, mixup_cutmix as the pipeline's last step): on a CPU loader,
  /// mixes the batch in the host slot; on a CUDA loader after_copy mixes it on the device, after
  /// the copy, on the copy stream.
  void finish_batch(const slot_view& slot) override;
  void before_copy(const slot_view& slot) override;
  void after_copy(const slot_view& slot) override;
  /// The batch op, its soft labels' field and classes (nullopt without one).
  struct batch_op_plan {
    batch_mix mix;
    std::size_t label_field = 0;  ///< in fields()
    std::int64_t classes = 0;
    ops::mix_layout layout = ops::mix_layout::hwc;
    dtype label_type = dtype::i64;  ///< what the reader writes (int64 or int32, one a sample)
  };
  [[nodiscard]] const std::optional<batch_op_plan>& batch_op() const noexcept { return batch_; }
  ~pipeline_source() override;

 private:
  void produce_one(sample& out, std::uint64_t index);
  /// Resolves options_.decode into place_ and, for the device path, adds its fields.
  void choose_decode_path();
  /// Resolves options_.augment_on: moves the steps after the decode's window and flips from host_
  /// to the device (augmenter_) where it can and should, or says why not (augment_refusal_).
  void choose_augment_path();
  /// The plan the first host step gives the decoder for sample s.
  [[nodiscard]] decode_planner planner(sample& s) const;
  /// Runs the host steps on `cur` (in a or b, or lent by the reader: then never written), then the
  /// fused tail, into field 0 of `s`.
  void run_steps(sample& s, image_view cur, bool window_only, std::vector<std::byte>& a, std::vector<std::byte>& b);
  /// With steps on the device: sample s's jobs for them (drawn from its streams), into aug_jobs.
  void write_device_jobs(sample& s) const;

  std::shared_ptr<image_reader> reader_;
  pipeline_source_options options_;
  pipeline steps_, host_;
  std::optional<ops::normalize_params> host_tail_, consumer_tail_;
  std::optional<ops::normalize_params> device_finish_;  ///< the tail the source runs on the device (finishes_on_device)
  std::size_t pixel_field_ = 0;  ///< where the host's steps, the device decode and the device steps put the pixels
  /// Whether the tail could run on the device after the device path (a fused tail), and whether it
  /// must to take that path (the source owes float CHW images, or a batch op follows the tail).
  [[nodiscard]] bool finishable() const noexcept { return host_tail_.has_value() || consumer_tail_.has_value(); }
  [[nodiscard]] bool needs_finish() const noexcept { return host_tail_.has_value() || batch_.has_value() || float_tail_ != nullptr; }
  /// The steps after the tail on its float images (random_erasing after normalize), or none.
  std::unique_ptr<detail::float_tail> float_tail_;
  /// Moves the tail to the device: field 0 made there (device_only), the pixels into a scratch field.
  void finish_on_device();
  /// Throws where the image before the tail is not uint8 RGB (what the fused tail takes).
  void require_tail_input() const;
  /// Takes the steps after a fused tail on its float images off the end of `steps` into float_tail_.
  void split_float_tail(pipeline& steps, const image_spec& in);
  std::vector<field_spec> fields_;
  /// What the reader writes: fields_, but the label as the reader gives it when a batch op turns
  /// fields_'s label into soft labels.
  std::vector<field_spec> reader_fields_;
  std::optional<batch_op_plan> batch_;
  /// Checks a batch op against the fields and makes batch_ (the label field turns into soft labels).
  void plan_batch_op(const batch_mix& mix);
  /// The batch op's mix of one batch (device pointers where `device`).
  void mix_batch(const slot_view& slot, bool device) const;
  /// The one-hot row of the class index the reader wrote at `label` for sample `index`, into
  /// `out`'s soft labels.
  void write_soft_label(sample& out, std::uint64_t index, const std::byte* label, const std::string& origin) const;
  /// Takes a batch op off the end of `steps` (refusing one elsewhere, naming it and its place).
  static std::optional<batch_mix> split_batch_op(pipeline& steps);
  std::unique_ptr<detail::bad_samples> bad_;  ///< which samples were found bad, per epoch (thread-safe)
  decode_place place_ = decode_place::host;
  std::string device_refusal_;
  std::unique_ptr<detail::hybrid_decoder> hybrid_;  ///< the device path's host half and launches
  std::unique_ptr<detail::device_augmenter> augmenter_;  ///< the steps the GPU runs, and their launches
  std::string augment_refusal_;
  pipeline after_decode_;
  std::unique_ptr<std::atomic<std::uint64_t>> host_decodes_ = std::make_unique<std::atomic<std::uint64_t>>(0);
  decode_options decoding_;  ///< the reader's, for the device path's checks
};

}  // namespace pinfeed::loaders
