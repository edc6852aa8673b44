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

host_buffer::host_buffer(std::size_t bytes, bool pinned) : host_buffer(bytes, pinned, std::nullopt) {}

host_buffer::host_buffer(std::size_t bytes, bool pinned, std::optional<unsigned> numa_node)
    : size_(bytes), pinned_(pinned) {
  if (bytes == 0) return;
  const std::size_t page = page_size();
  const std::size_t rounded = (bytes + page - 1) / page * page;
  if (numa_node) {
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
    mapped_ = rounded;
    origin_ = origin::mapped;
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
      try {
        PINFEED_CUDA_TRY(cudaHostRegister(p, rounded, cudaHostRegisterPortable));
      } catch (...) {
        ::munmap(p, rounded);
        data_ = nullptr;
        origin_ = origin::none;
        throw;
      }
    }
    return;
  }
  if (pinned) {
    void* p = nullptr;
    PINFEED_CUDA_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    data_ = static_cast<std::byte*>(p);
    origin_ = origin::cuda_host;
  } else {
    data_ = static_cast<std::byte*>(std::aligned_alloc(page, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    origin_ = origin::aligned;
  }
}

host_buffer::host_buffer(host_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)), pinned_(other.pinned_), origin_(std::exchange(other.origin_, origin::none)) {}

host_buffer& host_buffer::operator=(host_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    pinned_ = other.pinned_;
    origin_ = std::exchange(other.origin_, origin::none);
  }
  return *this;
}

host_buffer::~host_buffer() { reset(); }

void host_buffer::reset() noexcept {
  if (data_ == nullptr) return;
  switch (origin_) {
    case origin::cuda_host: PINFEED_CUDA_TRY_NOTHROW(cudaFreeHost(data_)); break;
    case origin::aligned: std::free(data_); break;
    case origin::mapped:
      if (pinned_) PINFEED_CUDA_TRY_NOTHROW(cudaHostUnregister(data_));
      ::munmap(data_, mapped_);
      break;
    case origin::none: break;
  }
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
  origin_ = origin::none;
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
  data_ = static_cast<std::byte*>(p);
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

device_buffer::~device_buffer() { reset(); }

void device_buffer::reset() noexcept {
  if (data_ != nullptr) PINFEED_CUDA_TRY_NOTHROW(cudaFree(data_));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pinfeed
