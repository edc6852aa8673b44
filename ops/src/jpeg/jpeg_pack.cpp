// The compact form of coefficient blocks (jpeg_planes.hpp): packing and unpacking on the host.
#include <string>

#include "jpeg_math.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {

namespace {

constexpr std::uint8_t kWide = 0x40;  // tag bit 6: a 2-byte value follows

[[noreturn]] void malformed(std::uint64_t block, std::size_t at, const std::string& what) {
  throw pinfeed::invalid_argument("packed JPEG blocks: block " + std::to_string(block) + ", byte " + std::to_string(at) + ": " + what);
}

}  // namespace

void pack_jpeg_blocks(std::span<const std::int16_t> blocks, std::vector<std::uint8_t>& out) {
  if (blocks.size() % 64 != 0)
    throw pinfeed::invalid_argument("pack_jpeg_blocks: " + std::to_string(blocks.size()) + " coefficients, not whole blocks of 64");
  for (std::size_t b = 0; b < blocks.size(); b += 64) {
    const std::size_t count_at = out.size();
    out.push_back(0);
    std::uint8_t count = 0;
    for (int z = 0; z < 64; ++z) {
      const std::int16_t v = blocks[b + jpeg::kZigzag[z]];
      if (v == 0) continue;
      ++count;
      if (v >= -128 && v <= 127) {
        out.push_back(static_cast<std::uint8_t>(z));
        out.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
      } else {
        const auto u = static_cast<std::uint16_t>(v);
        out.push_back(static_cast<std::uint8_t>(z | kWide));
        out.push_back(static_cast<std::uint8_t>(u & 0xFF));
        out.push_back(static_cast<std::uint8_t>(u >> 8));
      }
    }
    out[count_at] = count;
  }
}

void unpack_jpeg_blocks(std::span<const std::uint8_t> bytes, std::uint64_t block_count, std::int16_t* blocks) {
  std::size_t at = 0;
  for (std::uint64_t b = 0; b < block_count; ++b) {
    std::int16_t* block = blocks + b * 64;
    for (int i = 0; i < 64; ++i) block[i] = 0;
    if (at >= bytes.size()) malformed(b, at, "the data ends before the block");
    const std::uint8_t count = bytes[at++];
    if (count > 64) malformed(b, at - 1, std::to_string(count) + " coefficients counted, more than 64");
    int last = -1;
    for (std::uint8_t k = 0; k < count; ++k) {
      if (at >= bytes.size()) malformed(b, at, "the data ends inside the block");
      const std::uint8_t tag = bytes[at++];
      const int z = tag & 63;
      if ((tag & 0x80) != 0) malformed(b, at - 1, "tag " + std::to_string(tag) + " has bit 7 set");
      if (z <= last) malformed(b, at - 1, "zigzag index " + std::to_string(z) + " is not after " + std::to_string(last));
      last = z;
      std::int16_t v = 0;
      if ((tag & kWide) != 0) {
        if (bytes.size() - at < 2) malformed(b, at, "the data ends inside a 2-byte value");
        v = static_cast<std::int16_t>(static_cast<std::uint16_t>(bytes[at] | (bytes[at + 1] << 8)));
        if (v >= -128 && v <= 127) malformed(b, at, "value " + std::to_string(v) + " written in 2 bytes fits in 1");
        at += 2;
      } else {
        if (at >= bytes.size()) malformed(b, at, "the data ends inside a value");
        v = static_cast<std::int8_t>(bytes[at++]);
        if (v == 0) malformed(b, at - 1, "a zero written as a coefficient");
      }
      block[jpeg::kZigzag[z]] = v;
    }
  }
  if (at != bytes.size()) malformed(block_count, at, std::to_string(bytes.size() - at) + " bytes left after the last block");
}

}  // namespace pinfeed::ops
