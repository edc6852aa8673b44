// The stand-in training step on the GPU: a kernel that spins on the global timer.
#include <cstdint>

#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed {
namespace {

__global__ void busy_kernel(std::uint64_t ns) {
  std::uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    std::uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

}  // namespace

void busy_kernel_ms(double ms, cudaStream_t stream) {
  if (!(ms > 0)) return;
  busy_kernel<<<1, 1, 0, stream>>>(static_cast<std::uint64_t>(ms * 1e6));
  PINFEED_CHECK_LAUNCH();
}

}  // namespace pinfeed
