#pragma once
// Internal: the layout of the device path's plan field (hybrid_decode.hpp), which the workers
// write a record a sample into and before_copy() rewrites for the launches, and the device scratch
// of a loader's copy stream. Shared by hybrid_decode.cpp and hybrid_files.cpp (nvJPEG's files).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "hybrid_decode.hpp"
#include "nvjpeg_library.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed::loaders::detail {

/// One sample's plan record in jpeg_plan, as the worker writes it.
struct plan_record {
  std::uint32_t device = 0;  // 1: packed for the device; 2: a whole file for nvJPEG; 0: decoded on the host
  std::uint32_t unused = 0;
  ops::jpeg_image image{};   // its blocks and tables numbered batch-wide; outputs set before the copy
                             // (nvJPEG's: its width, height and window only)
  ops::resize_job job{};     // its window to the output size, flipped or not; offsets set before the copy
  std::uint64_t file_first = 0, file_size = 0;  // nvJPEG's: the file's bytes in jpeg_files
  std::uint64_t index = 0;                      // nvJPEG's: the sample's index (for its errors)
};

/// What before_copy() leaves at the start of the plan field: this header, the packed images from
/// byte kHeaderBytes, the resize jobs (the packed images' then the files'), then the file entries.
struct plan_header {
  std::uint64_t images = 0, window_bytes = 0, plane_bytes = 0;
  std::uint64_t files = 0, full_bytes = 0;  // nvJPEG's files, and the bytes of their whole RGB images
};
/// A file nvJPEG decodes: its bytes in jpeg_files, its size, and where its RGB image goes.
struct file_entry {
  std::uint64_t first = 0, size = 0;
  std::uint32_t width = 0, height = 0;
  std::uint64_t full_offset = 0;
  std::uint64_t index = 0;  ///< the sample's
};
constexpr std::size_t kHeaderBytes = 64;
/// A record and room for the header: a batch of one sample on the device path fits its field.
constexpr std::size_t kPlanBytes = (sizeof(plan_record) + kHeaderBytes + 8 + 63) / 64 * 64;
constexpr std::uint64_t kTablesMost = 4 * 64;  // quantization tables a sample may carry (elements)

inline std::size_t jobs_at(std::uint64_t images) {
  return (kHeaderBytes + images * sizeof(ops::jpeg_image) + 7) / 8 * 8;
}
inline std::size_t files_at(std::uint64_t images, std::uint64_t files) {
  return jobs_at(images) + (images + files) * sizeof(ops::resize_job);
}
static_assert(sizeof(file_entry) <= sizeof(ops::jpeg_image), "a file's entry takes no more room than a packed image's");
/// The largest whole image nvJPEG decodes for a window (RGB bytes); larger files take the exact path.
constexpr std::uint64_t kMostFullBytes = std::uint64_t{48} << 20;

/// A loader's device scratch. Batches finish on several workers at once and queue their work on
/// the one copy stream: each batch's launches hold the mutex from the first to the last, so no
/// other batch's kernels come between them and overwrite the scratch they read.
struct hybrid_decoder::scratch {
  std::mutex queueing;
  device_buffer blocks, window, planes, malformed, full;
  std::unique_ptr<nvjpeg_decoder::state> nvjpeg;  ///< this stream's nvJPEG state, once needed
};

}  // namespace pinfeed::loaders::detail
