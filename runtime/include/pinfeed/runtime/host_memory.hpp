#pragma once
/// @file host_memory.hpp
/// Owning host and device buffers, allocated once and never resized.

#include <cstddef>

namespace pinfeed {

/// A host allocation: page-locked (cudaHostAlloc, portable) when `pinned`, otherwise page-aligned
/// pageable memory. Move-only. Throws cuda_error or std::bad_alloc when allocation fails.
class host_buffer {
 public:
  host_buffer() = default;
  host_buffer(std::size_t bytes, bool pinned);
  host_buffer(host_buffer&& other) noexcept;
  host_buffer& operator=(host_buffer&& other) noexcept;
  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;
  ~host_buffer();

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }

 private:
  void reset() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
};

/// A device allocation on the current CUDA device (cudaMalloc). Move-only.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes);
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer();

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void reset() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The system page size.
[[nodiscard]] std::size_t page_size() noexcept;

}  // namespace pinfeed
