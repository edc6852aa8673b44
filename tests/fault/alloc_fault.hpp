#pragma once
// Allocation failure on demand, for the fault tests only (alloc_fault.cpp replaces the global
// operator new family, and outside the sanitizers the malloc family too, in the one test
// executable that links it). Armed, it counts every allocation of every thread and fails the
// k-th (mode::once) or the k-th and every one after it (mode::from): operator new throws
// std::bad_alloc (nullptr for the nothrow forms), malloc and friends return nullptr with ENOMEM.

#include <cstdint>

namespace pinfeed::test::alloc_fault {

enum class mode { count_only, once, from };

/// Starts counting from zero; allocation number `k` (1-based) fails as `m` says.
void arm(mode m, std::uint64_t k = 0) noexcept;
/// Stops failing and counting; returns how many allocations were counted since arm().
std::uint64_t disarm() noexcept;
/// How many allocations failed since arm().
[[nodiscard]] std::uint64_t failed() noexcept;
/// True where the malloc family is replaced too (not under ASan or TSan, which own malloc).
[[nodiscard]] bool covers_malloc() noexcept;
/// Counts one allocation made elsewhere (a library's own allocator hook, such as libcurl's
/// curl_global_init_mem where malloc is not replaced); true when it must fail.
[[nodiscard]] bool count_allocation() noexcept;

/// Allocations of this thread inside its scope are neither counted nor failed (the harness's own).
class exempt {
 public:
  exempt() noexcept;
  ~exempt();
  exempt(const exempt&) = delete;
  exempt& operator=(const exempt&) = delete;

 private:
  bool was_;
};

}  // namespace pinfeed::test::alloc_fault
