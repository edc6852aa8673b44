#include "pinfeed/runtime/host_memory.hpp"

#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

namespace detail {
void bytes_release::operator()(std::byte* p) const noexcept {
  switch (how) {
    case kind::cuda_host: PINFEED_CUDA_TRY_NOTHROW(cudaFreeHost(p)); break;
    case kind::aligned: std::free(p); break;
    case kind::mapped_pinned: PINFEED_CUDA_TRY_NOTHROW(cudaHostUnregister(p)); [[fallthrough]];
    case kind::mapped: ::munmap(p, mapped); break;
    case kind::cuda_device: PINFEED_CUDA_TRY_NOTHROW(cudaFree(p)); break;
  }
}
}  // namespace detail

using detail::bytes_release;

host_buffer::host_buffer(std::size_t bytes, bool pinned) : host_buffer(bytes, pinned, std::nullopt) {}

host_buffer::host_buffer(std::size_t bytes, bool pinned, std::optional<unsigned> numa_node)
    : size_(bytes), pinned_(pinned) {
  if (bytes == 0) return;
  const std::size_t page = page_size();
  const std::size_t rounded = (bytes + page - 1) / page * page;
  if (numa_node) {
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = detail::owned_bytes(static_cast<std::byte*>(p), bytes_release{bytes_release::kind::mapped, rounded});
    std::vector<unsigned long> mask(*numa_node / (8 * sizeof(unsigned long)) + 1, 0);
    mask[*numa_node / (8 * sizeof(unsigned long))] |= 1ul << (*numa_node % (8 * sizeof(unsigned long)));
    if (::syscall(SYS_mbind, p, rounded, MPOL_PREFERRED, mask.data(), mask.size() * 8 * sizeof(unsigned long) + 1, 0) != 0) {
      static std::atomic<bool> warned{false};
      const int error = errno;
      log_once(warned, log_level::warn, [&] {
        return "host memory: binding buffers to NUMA node " + std::to_string(*numa_node) + " was refused (mbind: " +
               std::strerror(error) + "); they are placed as the kernel chooses";
      });
    }
    std::memset(p, 0, rounded);  // the pages are made now, on the node
    if (pinned) {
      PINFEED_CUDA_TRY(cudaHostRegister(p, rounded, cudaHostRegisterPortable));  // a throw unmaps them
      data_.get_deleter().how = bytes_release::kind::mapped_pinned;
    }
    return;
  }
  if (pinned) {
    void* p = nullptr;
    PINFEED_CUDA_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    data_ = detail::owned_bytes(static_cast<std::byte*>(p), bytes_release{bytes_release::kind::cuda_host});
  } else {
    void* p = std::aligned_alloc(page, rounded);
    if (p == nullptr) throw std::bad_alloc();
    data_ = detail::owned_bytes(static_cast<std::byte*>(p), bytes_release{bytes_release::kind::aligned});
  }
}

int numa_node_of(const void* address) noexcept {
  int node = -1;
  if (::syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(address), MPOL_F_NODE | MPOL_F_ADDR) != 0) return -1;
  return node;
}

device_buffer::device_buffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  PINFEED_CUDA_TRY(cudaMalloc(&p, bytes));
  data_ = detail::owned_bytes(static_cast<std::byte*>(p), bytes_release{bytes_release::kind::cuda_device});
}

}  // namespace pinfeed
