#pragma once
/// @file host_memory.hpp
/// Owning host and device buffers, allocated once and never resized.

#include <cstddef>
#include <optional>

namespace pinfeed {

/// A host allocation: page-locked (cudaHostAlloc, portable) when `pinned`, otherwise page-aligned
/// pageable memory. Move-only. Throws cuda_error or std::bad_alloc when allocation fails.
class host_buffer {
 public:
  host_buffer() = default;
  host_buffer(std::size_t bytes, bool pinned);
  /// On NUMA node `numa_node` (an OS index; nullopt: wherever the kernel puts it): the pages are
  /// mapped, bound there (preferred, as mbind's MPOL_PREFERRED: the kernel falls back to another node
  /// when that one is full), touched, and pinned with cudaHostRegister when `pinned`. Where the
  /// kernel refuses the binding (a container's seccomp profile, say) the buffer is allocated all the
  /// same, once warned. Throws as the constructor above.
  host_buffer(std::size_t bytes, bool pinned, std::optional<unsigned> numa_node);
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
  enum class origin : unsigned char { none, cuda_host, aligned, mapped };
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;  ///< the mapping's length (origin::mapped)
  bool pinned_ = false;
  origin origin_ = origin::none;
};

/// The NUMA node (OS index) the page holding `address` is on, or -1 where the kernel does not say.
[[nodiscard]] int numa_node_of(const void* address) noexcept;

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
