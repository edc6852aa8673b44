#pragma once
// nvJPEG for decode_place::device_inexact, loaded at run time (dlopen: no link-time dependency, no
// header needed to build): the few calls pinfeed makes, and a decoder per device.
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::loaders::detail {

/// The parts of nvJPEG's C API (nvjpeg.h) pinfeed uses: its opaque handles, the values it passes
/// (enums are ints in its ABI) and its output descriptor.
namespace nvjpeg {
struct handle_type;
struct state_type;
constexpr int kSuccess = 0;
constexpr int kBackendDefault = 0;   ///< NVJPEG_BACKEND_DEFAULT: the hybrid (CPU Huffman) decoder
constexpr int kBackendHardware = 3;  ///< NVJPEG_BACKEND_HARDWARE: the JPEG engines of A100, H100 and later
constexpr int kOutputRgbInterleaved = 5;  ///< NVJPEG_OUTPUT_RGBI
/// nvjpegImage_t: NVJPEG_MAX_COMPONENT (4) planes; RGBI uses the first.
struct image {
  unsigned char* channel[4];
  std::size_t pitch[4];
};
/// "NVJPEG_STATUS_BAD_JPEG (3)" and the like.
[[nodiscard]] std::string status_name(int status);
}  // namespace nvjpeg

/// The library's entry points.
struct nvjpeg_library {
  nvjpeg_library() = default;
  nvjpeg_library(const nvjpeg_library&) = delete;
  nvjpeg_library& operator=(const nvjpeg_library&) = delete;
  ~nvjpeg_library();  ///< unloads it
  void* so = nullptr;
  std::string path;  ///< the file dlopen loaded
  int (*create_ex)(int backend, void* device_allocator, void* pinned_allocator, unsigned flags, nvjpeg::handle_type** handle);
  int (*destroy)(nvjpeg::handle_type* handle);
  int (*state_create)(nvjpeg::handle_type* handle, nvjpeg::state_type** state);
  int (*state_destroy)(nvjpeg::state_type* state);
  int (*batched_initialize)(nvjpeg::handle_type* handle, nvjpeg::state_type* state, int batch_size, int max_cpu_threads,
                            int output_format);
  int (*batched)(nvjpeg::handle_type* handle, nvjpeg::state_type* state, const unsigned char* const* data,
                 const std::size_t* lengths, nvjpeg::image* destinations, cudaStream_t stream);
};

/// The library, loaded once per process and kept: the file PINFEED_NVJPEG_LIBRARY names, else the
/// first of libnvjpeg.so.13, .12, .11 and libnvjpeg.so the dynamic loader finds. Null, with `why`
/// (each file tried and dlerror's words, or the entry point it lacks), where none loads.
[[nodiscard]] const nvjpeg_library* load_nvjpeg(std::string& why);
/// The first of `files` that dlopen loads, with its entry points; null with why where none loads or
/// that one lacks an entry point (load_nvjpeg's words).
[[nodiscard]] std::unique_ptr<nvjpeg_library> load_nvjpeg_from(const std::vector<std::string>& files, std::string& why);

/// nvJPEG on one CUDA device: its handle (the hardware backend where the GPU has JPEG engines,
/// else the default, hybrid one) and, made when a hardware batch is refused, a hybrid handle.
/// Thread-safe; each caller brings its own decode state (one per stream: a state serves one batch
/// at a time).
class nvjpeg_decoder {
 public:
  /// nvJPEG on `device` (made current here; -1: the current one) from `lib` (null: load_nvjpeg's,
  /// which must outlive the decoder), or throws pinfeed::runtime_error naming why: the library
  /// (load_nvjpeg) or nvjpegCreateEx's status for each backend tried.
  [[nodiscard]] static std::unique_ptr<nvjpeg_decoder> open(int device, const nvjpeg_library* lib = nullptr);
  ~nvjpeg_decoder();
  nvjpeg_decoder(const nvjpeg_decoder&) = delete;
  nvjpeg_decoder& operator=(const nvjpeg_decoder&) = delete;

  /// "hardware" or "hybrid": the backend of the first handle.
  [[nodiscard]] const char* backend() const noexcept { return hardware_ ? "hardware" : "hybrid"; }
  /// Whether the first handle is the hardware backend's, which takes baseline single-scan files
  /// with 4:4:4, 4:2:2, 4:2:0, 4:4:0 or grey sampling only.
  [[nodiscard]] bool hardware() const noexcept { return hardware_; }

  /// A decode state of this decoder's handles, for one stream's batches.
  class state {
   public:
    ~state();
    state(const state&) = delete;
    state& operator=(const state&) = delete;

   private:
    friend class nvjpeg_decoder;
    explicit state(const nvjpeg_decoder& d) : d_(d) {}
    const nvjpeg_decoder& d_;
    nvjpeg::state_type* first_ = nullptr;   ///< of the first handle
    nvjpeg::state_type* hybrid_ = nullptr;  ///< of the hybrid handle, once made
    int batch_first_ = 0, batch_hybrid_ = 0;  ///< the batch size each was initialized for
  };
  [[nodiscard]] std::unique_ptr<state> make_state() const;

  /// Decodes `count` JPEGs (host memory, valid until `stream` has run the work) into RGB,
  /// interleaved, at `out` (device memory; each image's pitch >= its width x 3), queued on
  /// `stream`. A batch the hardware backend refuses is decoded again by the hybrid one. Throws
  /// pinfeed::runtime_error naming the status where nvJPEG fails.
  void decode(state& s, const unsigned char* const* data, const std::size_t* lengths, nvjpeg::image* out, std::size_t count,
              cudaStream_t stream) const;

 private:
  nvjpeg_decoder() = default;
  nvjpeg::handle_type* hybrid_handle() const;
  const nvjpeg_library* lib_ = nullptr;
  int device_ = 0;
  nvjpeg::handle_type* first_ = nullptr;
  bool hardware_ = false;
  mutable std::mutex hybrid_mutex_;
  mutable nvjpeg::handle_type* hybrid_ = nullptr;  ///< the hardware handle's fallback
};

}  // namespace pinfeed::loaders::detail
