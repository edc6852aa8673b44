#include "pinfeed/runtime/checksum.hpp"

#include "pinfeed/runtime/cuda_handles.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

#include "pinfeed/runtime/error.hpp"

namespace pinfeed {

std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed) noexcept {
  constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;
  auto mix = [](std::uint64_t h, std::uint64_t w) {
    h ^= w * kP2;
    h = (h << 31) | (h >> 33);
    return h * kP1;
  };
  std::uint64_t h = seed ^ (bytes * kP1);
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  if (i < bytes) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    h = mix(h, w ^ 0xFF);
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  return h;
}

std::string checksum_line(const batch& b) {
  const auto idx = b.indices();
  char head[160];
  std::snprintf(head, sizeof head, "batch %u:%llu n=%zu indices=%llu..%llu #%016llx", b.epoch(),
                static_cast<unsigned long long>(b.index()), b.size(),
                static_cast<unsigned long long>(idx.empty() ? 0 : idx.front()),
                static_cast<unsigned long long>(idx.empty() ? 0 : idx.back()),
                static_cast<unsigned long long>(hash_bytes(idx.data(), idx.size_bytes())));
  std::string line = head;
  std::vector<std::byte> host;
  for (std::size_t f = 0; f < b.field_count(); ++f) {
    if (b.spec(f).scratch) continue;
    const tensor_view v = b.field(f);
    const void* data = v.data;
    if (v.location.is_cuda()) {
      // On the batch's device: a thread with no device current would otherwise get a context on
      // device 0 for this copy.
      device_guard guard(v.location.device);
      host.resize(v.bytes());
      PINFEED_CUDA_TRY(cudaMemcpyAsync(host.data(), v.data, v.bytes(), cudaMemcpyDeviceToHost, b.stream()));
      PINFEED_CUDA_TRY(cudaStreamSynchronize(b.stream()));
      data = host.data();
    }
    std::uint64_t h = hash_bytes(data, v.bytes());
    if (b.spec(f).variable) {  // sample by sample: where the samples' claims fell in the arena does not count
      const auto extents = b.extents(f);
      const std::size_t size = dtype_size(v.type);
      h = 0;
      for (std::size_t j = 0; j < b.size(); ++j) {
        const auto* first = static_cast<const std::byte*>(data) + extents[2 * j] * size;
        h = h * 0x9E3779B97F4A7C15ull ^ hash_bytes(first, extents[2 * j + 1] * size) ^ extents[2 * j + 1];
      }
    }
    char part[64];
    std::snprintf(part, sizeof part, "%016llx", static_cast<unsigned long long>(h));
    line += " " + b.spec(f).name + "=" + part;
  }
  return line;
}

}  // namespace pinfeed
