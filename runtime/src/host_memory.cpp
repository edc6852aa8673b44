#include "pinfeed/runtime/host_memory.hpp"

#include <cstdlib>
#include <new>
#include <utility>

#include <unistd.h>

#include "pinfeed/runtime/cuda_api.hpp"

#include "pinfeed/runtime/error.hpp"

namespace pinfeed {

std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

host_buffer::host_buffer(std::size_t bytes, bool pinned) : size_(bytes), pinned_(pinned) {
  if (bytes == 0) return;
  if (pinned) {
    void* p = nullptr;
    PINFEED_CUDA_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    data_ = static_cast<std::byte*>(p);
  } else {
    const std::size_t page = page_size();
    const std::size_t rounded = (bytes + page - 1) / page * page;
    data_ = static_cast<std::byte*>(std::aligned_alloc(page, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
}

host_buffer::host_buffer(host_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      pinned_(other.pinned_) {}

host_buffer& host_buffer::operator=(host_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pinned_ = other.pinned_;
  }
  return *this;
}

host_buffer::~host_buffer() { reset(); }

void host_buffer::reset() noexcept {
  if (data_ == nullptr) return;
  if (pinned_) {
    PINFEED_CUDA_TRY_NOTHROW(cudaFreeHost(data_));
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
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
