// The compact form of coefficient blocks (jpeg_planes.hpp): packing and unpacking on the host.
#include <string>

#include "jpeg_math.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {

namespace {

[[noreturn]] void malformed(std::uint64_t block, std::size_t at, const std::string& what) {
  throw pinfeed::invalid_argument("packed JPEG blocks: block " + std::to_string(block) + ", byte " + std::to_string(at) + ": " + what);
}

}  // namespace

void pack_jpeg_blocks(std::span<const std::int16_t> blocks, std::vector<std::uint8_t>& out, std::vector<std::uint32_t>* starts) {
  if (blocks.size() % 64 != 0)
    throw pinfeed::invalid_argument("pack_jpeg_blocks: " + std::to_string(blocks.size()) + " coefficients, not whole blocks of 64");
  for (std::size_t b = 0; b < blocks.size(); b += 64) {
    const std::size_t first = out.size();
    if (starts != nullptr) {
      if (first > 0xFFFFFFFFu)
        throw pinfeed::invalid_argument("pack_jpeg_blocks: " + std::to_string(first) + " bytes packed, past the 4 GiB block starts reach");
      starts->push_back(static_cast<std::uint32_t>(first));
    }
    std::uint8_t block[1 + 64 * 3];
    std::uint8_t* p = block;
    std::int32_t last = -1;
    for (int z = 0; z < 64; ++z) {
      const std::int16_t v = blocks[b + jpeg::natural_of(z)];
      if (v == 0) continue;
      p = jpeg::pack_coefficient(p, last, z, v);
      last = z;
    }
    *p++ = jpeg::kEndOfBlock;
    out.insert(out.end(), block, p);
  }
}

namespace {

std::string why(const jpeg::unpack_result& r) {
  using e = jpeg::unpack_error;
  switch (r.error) {
    case e::none: return "";
    case e::ends_inside_block: return "the data ends inside the block (no end byte)";
    case e::bad_byte: return "byte " + std::to_string(r.value) + " is neither the end nor 16 zeros";
    case e::index_past_63: return "zigzag index " + std::to_string(r.value) + " is past 63";
    case e::zeros_before_end: return "16 zeros right before the end";
    case e::ends_inside_wide: return "the data ends inside a 2-byte value";
    case e::wide_fits_nibble: return "value " + std::to_string(r.value) + " written in 2 bytes fits in 4 bits";
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
