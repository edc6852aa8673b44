#include "alloc_fault.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

#include <atomic>

#include <execinfo.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PINFEED_FAULT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PINFEED_FAULT_MALLOC 0
#endif
#endif
#ifndef PINFEED_FAULT_MALLOC
#define PINFEED_FAULT_MALLOC 1
#endif

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace pinfeed::test::alloc_fault {
namespace {
std::atomic<int> armed_mode{-1};  // -1: off, else a mode
std::atomic<std::uint64_t> limit{0}, counted{0}, failures{0};
thread_local bool exempted = false;

/// Counts one allocation; true when it must fail.
bool fail_now() noexcept {
  const int m = armed_mode.load(std::memory_order_relaxed);
  if (m < 0 || exempted) return false;
  const std::uint64_t n = counted.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::uint64_t k = limit.load(std::memory_order_relaxed);
  const bool fail = (m == static_cast<int>(mode::once) && n == k) || (m == static_cast<int>(mode::from) && n >= k);
  if (fail) {
    failures.fetch_add(1, std::memory_order_relaxed);
    // PINFEED_FAULT_BACKTRACE=1: where each failed allocation was asked for (to chase a finding).
    static const bool trace = [] {
      const char* v = std::getenv("PINFEED_FAULT_BACKTRACE");
      return v != nullptr && v[0] == '1';
    }();
    if (trace && m == static_cast<int>(mode::once)) {
      void* frames[40];
      (void)!::write(STDERR_FILENO, "alloc-fault: failing this allocation:\n", 39);
      backtrace_symbols_fd(frames, backtrace(frames, 40), STDERR_FILENO);
    }
  }
  return fail;
}

void* raw_alloc(std::size_t size, std::size_t align) noexcept {
  if (size == 0) size = 1;
#if PINFEED_FAULT_MALLOC
  return align <= alignof(std::max_align_t) ? __libc_malloc(size) : __libc_memalign(align, size);
#else
  if (align <= alignof(std::max_align_t)) return std::malloc(size);
  void* p = nullptr;
  return ::posix_memalign(&p, align, size) == 0 ? p : nullptr;
#endif
}
void raw_free(void* p) noexcept {
#if PINFEED_FAULT_MALLOC
  __libc_free(p);
#else
  std::free(p);
#endif
}

void* new_or_throw(std::size_t size, std::size_t align) {
  if (fail_now()) throw std::bad_alloc();
  void* p = raw_alloc(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* new_or_null(std::size_t size, std::size_t align) noexcept {
  if (fail_now()) return nullptr;
  return raw_alloc(size, align);
}
}  // namespace

void arm(mode m, std::uint64_t k) noexcept {
  counted.store(0);
  failures.store(0);
  limit.store(k);
  armed_mode.store(static_cast<int>(m));
}
std::uint64_t disarm() noexcept {
  armed_mode.store(-1);
  return counted.load();
}
std::uint64_t failed() noexcept { return failures.load(); }
bool count_allocation() noexcept { return fail_now(); }
bool covers_malloc() noexcept { return PINFEED_FAULT_MALLOC != 0; }

exempt::exempt() noexcept : was_(exempted) { exempted = true; }
exempt::~exempt() { exempted = was_; }

}  // namespace pinfeed::test::alloc_fault

using pinfeed::test::alloc_fault::new_or_null;
using pinfeed::test::alloc_fault::new_or_throw;
using pinfeed::test::alloc_fault::raw_free;

void* operator new(std::size_t n) { return new_or_throw(n, 0); }
void* operator new[](std::size_t n) { return new_or_throw(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return new_or_null(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return new_or_null(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return new_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return new_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_or_null(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_or_null(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { raw_free(p); }
void operator delete[](void* p) noexcept { raw_free(p); }
void operator delete(void* p, std::size_t) noexcept { raw_free(p); }
void operator delete[](void* p, std::size_t) noexcept { raw_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { raw_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { raw_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { raw_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { raw_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { raw_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { raw_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { raw_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { raw_free(p); }

#if PINFEED_FAULT_MALLOC
// The C allocator of the whole process (libcurl, libjpeg, OpenCV, TBB, libstdc++'s own), through
// glibc's underlying entry points.
extern "C" {
void* malloc(std::size_t n) {
  if (pinfeed::test::alloc_fault::fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(n);
}
void* calloc(std::size_t c, std::size_t n) {
  if (pinfeed::test::alloc_fault::fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(c, n);
}
void* realloc(void* p, std::size_t n) {
  if (n != 0 && pinfeed::test::alloc_fault::fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t a, std::size_t n) {
  if (pinfeed::test::alloc_fault::fail_now()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(a, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) { return memalign(a, n); }
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  void* p = memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t n) { return memalign(4096, n); }
}
#endif
