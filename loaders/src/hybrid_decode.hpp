#pragma once
// The device path of pipeline_source's decoding (decode_place::device). On the workers, a JPEG's
// window is entropy-decoded into the compact form (pack_jpeg) and claimed into the slot's arenas:
// its blocks (jpeg_bytes), each block's first byte (jpeg_starts, already batch-wide offsets) and
// its quantization tables (jpeg_quant), with a plan record (jpeg_plan: the geometry with its blocks
// and tables numbered batch-wide, and the resize and flip). Before the slot's copy the records of
// the samples that took this path are gathered at the start of the plan field; after it, on the
// copy stream, the blocks are unpacked, decoded and resized with the flip straight into the
// device slot's image field. Every other sample is decoded on the host as before, and counted.
// With nvJPEG (decode_place::device_inexact) a fifth field, jpeg_files, takes whole files that
// nvJPEG decodes on the copy stream; their windows are resized from its output (nvjpeg_library.hpp).
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "nvjpeg_library.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed::loaders::detail {

/// Why a sample was decoded on the host by a source on the device path: every jpeg_fallback but
/// none, then the device path's own reasons.
enum class host_reason : std::uint8_t {
  not_jpeg = 1, arithmetic, precision, colour, sampling, quantization, corrupt, too_large, range,
  no_window,  ///< the first step plans no window for this image (too small for a crop, say)
  count_,
};

class hybrid_decoder {
 public:
  /// `image_bytes`: one sample's pixels in field `pixel_field` (the image field, or the pixels the
  /// source's device tail reads); `first_field`: the index of jpeg_plan (the other three follow
  /// it, and jpeg_files after them where `files`: decode_place::device_inexact).
  hybrid_decoder(std::size_t first_field, std::size_t image_bytes, std::uint64_t bytes_per_sample, bool files = false,
                 std::size_t pixel_field = 0);
  ~hybrid_decoder();

  /// The fields it adds to the batch (with jpeg_files where `files`).
  [[nodiscard]] static std::vector<field_spec> fields(std::uint64_t bytes_per_sample, bool files = false);
  /// Why the device path cannot take `steps` over `reader` (empty: it can).
  [[nodiscard]] static std::string refusal(const pipeline& steps, const image_reader& reader);

  /// Sample s (its stored bytes `bytes`, from `origin`): packed into the slot for the device, or
  /// false (counted, and s's plan record says host) when the host must decode it. Throws
  /// sample_error (stage decode) past the reader's max_pixels.
  bool pack(sample& s, std::span<const std::byte> bytes, const pipeline& steps, const decode_options& decoding);
  /// With jpeg_files: opens nvJPEG on `device` for the samples packed from now on, or returns why
  /// it cannot (then they take the exact path).
  [[nodiscard]] std::string open_nvjpeg(int device);
  /// nvJPEG's backend in use ("hardware", "hybrid"), "not used: <why>", or empty before open_nvjpeg.
  [[nodiscard]] std::string nvjpeg_status() const;
  void before_copy(const slot_view& slot) const;
  void after_copy(const slot_view& slot);

  [[nodiscard]] std::uint64_t device_count() const noexcept { return device_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t inexact_count() const noexcept { return inexact_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> host_counts() const;

 private:
  void count(host_reason r) noexcept { host_[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed); }
  struct scratch;
  scratch& scratch_for(int device, cudaStream_t stream);
  /// Sample s's whole file into jpeg_files for nvJPEG, or false (it takes the exact path). Where the
  /// host path decodes the window at 1/denom DCT scale, nvJPEG's whole image is box-reduced by
  /// denom before the resize (resize_job::box), as that decode reduces it.
  bool pack_file(sample& s, std::span<const std::byte> bytes, image_size full, const image_region& window, unsigned denom,
                 bool flip, std::uint32_t out_h, std::uint32_t out_w, std::int64_t max_pixels);
  /// nvJPEG's decode of the batch's whole files into the scratch's full images (after_copy).
  void decode_files(const slot_view& slot, scratch& sc, std::uint64_t files, std::uint64_t full_bytes,
                    const std::byte* entries);

  std::size_t plan_, image_bytes_;
  std::uint64_t bytes_per_sample_;
  bool files_ = false;
  std::size_t pixel_field_ = 0;
  std::atomic<std::uint64_t> device_{0}, inexact_{0};
  std::atomic<std::uint64_t> host_fallbacks_{0};  ///< nvJPEG's files it refused alone, decoded on the host then
  std::atomic<std::uint64_t> not_walked_{0};  ///< files kept from nvJPEG: their entropy-coded data does not decode
  /// nvJPEG on the devices opened (guarded by scratch_mutex_), and whether packing uses it now.
  std::map<int, std::unique_ptr<nvjpeg_decoder>> nvjpeg_;
  std::atomic<nvjpeg_decoder*> nvjpeg_now_{nullptr};
  std::string nvjpeg_status_;
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(host_reason::count_)> host_{};
  std::mutex claim_mutex_;  // a sample's blocks and starts are claimed together
  mutable std::mutex scratch_mutex_;
  // A loader's copy stream each, on its device. Kept while the source lives (a loader that ends
  // leaves its scratch behind: the doctor's many loaders over one source add up).
  std::map<std::pair<int, cudaStream_t>, std::unique_ptr<scratch>> scratch_;
};

}  // namespace pinfeed::loaders::detail
