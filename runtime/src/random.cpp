#include "pinfeed/runtime/random.hpp"

#include <cstring>

namespace pinfeed {

void fill_random_bytes(philox_stream stream, std::span<std::byte> out) noexcept {
  const std::size_t full = out.size() / 16;
  std::byte* p = out.data();
  for (std::size_t i = 0; i < full; ++i) {
    const philox_block b = stream.block_at(static_cast<std::uint32_t>(i));
    std::memcpy(p + 16 * i, b.v, 16);  // x86 and CUDA are little-endian
  }
  if (const std::size_t tail = out.size() % 16; tail != 0) {
    const philox_block b = stream.block_at(static_cast<std::uint32_t>(full));
    std::memcpy(p + 16 * full, b.v, tail);
  }
}

}  // namespace pinfeed
