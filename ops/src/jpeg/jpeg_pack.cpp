// The compact form of coefficient blocks (jpeg_planes.hpp): packing and unpacking on the host.
#include <string>

#include "jpeg_math.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {

namespace {

constexpr std::uint8_t kWide = 0x40;  // tag bit 6: a 2-byte value follows (jpeg::unpack_block reads it)

[[noreturn]] void malformed(std::uint64_t block, std::size_t at, const std::string& what) {
  throw pinfeed::invalid_argument("packed JPEG blocks: block " + std::to_string(block) + ", byte " + std::to_string(at) + ": " + what);
}

}  // namespace

void pack_jpeg_blocks(std::span<const std::int16_t> blocks, std::vector<std::uint8_t>& out, std::vector<std::uint32_t>* starts) {
  if (blocks.size() % 64 != 0)
    throw pinfeed::invalid_argument("pack_jpeg_blocks: " + std::to_string(blocks.size()) + " coefficients, not whole blocks of 64");
  for (std::size_t b = 0; b < blocks.size(); b += 64) {
    const std::size_t count_at = out.size();
    if (starts != nullptr) {
      if (count_at > 0xFFFFFFFFu)
        throw pinfeed::invalid_argument("pack_jpeg_blocks: " + std::to_string(count_at) + " bytes packed, past the 4 GiB block starts reach");
      starts->push_back(static_cast<std::uint32_t>(count_at));
    }
    out.push_back(0);
    std::uint8_t count = 0;
    for (int z = 0; z < 64; ++z) {
      const std::int16_t v = blocks[b + jpeg::natural_of(z)];
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

namespace {

std::string why(const jpeg::unpack_result& r) {
  using e = jpeg::unpack_error;
  switch (r.error) {
    case e::none: return "";
    case e::ends_before_block: return "the data ends before the block";
    case e::count_over_64: return std::to_string(r.value) + " coefficients counted, more than 64";
    case e::ends_inside_block: return "the data ends inside the block";
    case e::tag_bit_7: return "tag " + std::to_string(r.value) + " has bit 7 set";
    case e::index_not_after: return "zigzag index " + std::to_string(r.value) + " is not after " + std::to_string(r.last);
    case e::ends_inside_wide: return "the data ends inside a 2-byte value";
    case e::wide_fits_one: return "value " + std::to_string(r.value) + " written in 2 bytes fits in 1";
    case e::ends_inside_value: return "the data ends inside a value";
    case e::zero_value: return "a zero written as a coefficient";
  }
  return "malformed";
}

}  // namespace

void jpeg::check_unpack_call(const std::uint8_t* bytes, std::uint64_t size, const std::uint32_t* starts, std::uint64_t block_count,
                             const std::int16_t* blocks, const std::uint32_t* malformed) {
  if (block_count == 0) return;
  if (starts == nullptr || blocks == nullptr || malformed == nullptr || (bytes == nullptr && size > 0))
    throw pinfeed::invalid_argument("unpack_jpeg_blocks_device: " + std::to_string(block_count) +
                                    " blocks but a null pointer among bytes, starts, blocks and malformed");
}

void unpack_jpeg_blocks(std::span<const std::uint8_t> bytes, std::uint64_t block_count, std::int16_t* blocks) {
  std::uint64_t at = 0;
  for (std::uint64_t b = 0; b < block_count; ++b) {
    const jpeg::unpack_result r = jpeg::unpack_block(bytes.data(), at, bytes.size(), blocks + b * 64);
    if (r.error != jpeg::unpack_error::none) malformed(b, r.at, why(r));
    at = r.at;
  }
  if (at != bytes.size()) malformed(block_count, at, std::to_string(bytes.size() - at) + " bytes left after the last block");
}

}  // namespace pinfeed::ops
