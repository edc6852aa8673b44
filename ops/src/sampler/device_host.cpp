// Host side of the GPU sampler that needs the CUDA runtime but no kernel: the per-device fault
// words (device_host.hpp), and the pointer and temp-storage checks of sampler_checks.hpp.
#include "device_host.hpp"

#include <map>
#include <mutex>
#include <string>

#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/detail/capture.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

namespace gpu_sampler {
namespace {
std::mutex g_fault_mutex;
/// Per device index, any index: kept for the process's life (kernels may still write them).
std::map<int, unsigned long long*>& fault_words() {
  static auto* words = new std::map<int, unsigned long long*>();  // never destroyed: read at exit too
  return *words;
}
}  // namespace

int current_device() {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

unsigned long long* fault_word(int device) {
  std::lock_guard lock(g_fault_mutex);
  auto& words = fault_words();
  if (const auto it = words.find(device); it != words.end()) return it->second;
  void* word = nullptr;
  pinfeed::detail::with_relaxed_capture([&] {
    PINFEED_CUDA_TRY(cudaHostAlloc(&word, sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable));
  });
  *static_cast<volatile unsigned long long*>(word) = 0;
  words.emplace(device, static_cast<unsigned long long*>(word));
  return static_cast<unsigned long long*>(word);
}

void rethrow_fault(unsigned long long* word) {
  if (word == nullptr) return;
  const unsigned long long w = __atomic_exchange_n(word, 0ull, __ATOMIC_ACQ_REL);
  if (w != 0) throw sampler_fault(w, true);
}
}  // namespace gpu_sampler

void check_sampler_faults() {
  const int device = gpu_sampler::current_device();
  unsigned long long* word = nullptr;
  {
    std::lock_guard lock(gpu_sampler::g_fault_mutex);
    const auto& words = gpu_sampler::fault_words();
    if (const auto it = words.find(device); it != words.end()) word = it->second;  // none yet: nothing ran
  }
  gpu_sampler::rethrow_fault(word);
}

namespace detail {

/// Every pointer is visible to the device. Not called while the caller's stream is capturing, and
/// run in relaxed capture mode so that another thread's global-mode capture is not disturbed.
void check_device_pointers(const sampler_args& a, const char* who) {
  pinfeed::detail::with_relaxed_capture([&] {
    pinfeed::detail::require_device_visible(a.labels, who, "labels");
    pinfeed::detail::require_device_visible(a.indices, who, "indices");
    pinfeed::detail::require_device_visible(a.valid, who, "valid");
    pinfeed::detail::require_device_visible(a.features, who, "features");
    pinfeed::detail::require_device_visible(a.gathered_features, who, "gathered_features");
    pinfeed::detail::require_device_visible(a.gathered_labels, who, "gathered_labels");
    pinfeed::detail::require_device_visible(a.status, who, "status");
  });
}

bool answer_temp_query(const void* d_temp, std::size_t& temp_bytes, std::size_t needed, const char* who) {
  if (d_temp == nullptr) {
    temp_bytes = needed;
    return true;
  }
  if (temp_bytes < needed)
    throw pinfeed::invalid_argument(std::string(who) + ": temp storage of " + std::to_string(temp_bytes) +
                                    " bytes is smaller than the " + std::to_string(needed) + " bytes queried");
  return false;
}

}  // namespace detail
}  // namespace pinfeed::ops
