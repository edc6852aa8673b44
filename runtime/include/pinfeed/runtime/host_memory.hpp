#pragma once
/// @file host_memory.hpp
/// Owning host and device buffers, allocated once and never resized.

#include <cstddef>
#include <memory>
#include <optional>

namespace pinfeed {

namespace detail {
/// How bytes a buffer owns go back, run by the buffer's owning pointer when it lets them go.
struct bytes_release {
  enum class kind : unsigned char { cuda_host, aligned, mapped, mapped_pinned, cuda_device };
  kind how = kind::aligned;
  std::size_t mapped = 0;  ///< the mapping's length (kind::mapped, kind::mapped_pinned)
  void operator()(std::byte* p) const noexcept;
};
/// The one owner of a buffer's bytes: move-only, released once.
using owned_bytes = std::unique_ptr<std::byte, bytes_release>;
}  // namespace detail

/// A host allocation: page-locked (cudaHostAlloc, portable) when `pinned`, otherwise page-aligned
/// pageable memory. Move-only (a moved-from buffer holds nothing: data() null, size() 0). Throws
/// cuda_error or std::bad_alloc when allocation fails.
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

  [[nodiscard]] std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return data_ ? size_ : 0; }
  [[nodiscard]] bool pinned() const noexcept { return pinned_; }

 private:
  detail::owned_bytes data_;
  std::size_t size_ = 0;
  bool pinned_ = false;
};

/// The NUMA node (OS index) the page holding `address` is on, or -1 where the kernel does not say.
[[nodiscard]] int numa_node_of(const void* address) noexcept;

/// A device allocation on the current CUDA device (cudaMalloc). Move-only, as host_buffer.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes);

  [[nodiscard]] std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return data_ ? size_ : 0; }

 private:
  detail::owned_bytes data_;
  std::size_t size_ = 0;
};

/// The system page size.
[[nodiscard]] std::size_t page_size() noexcept;

}  // namespace pinfeed
