// The memory a decode needs (decode_memory_need, decode_options::max_decode_bytes): the check that
// decode_image() and decode_image_region() run on every header before any decoder does.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "pinfeed/loaders/decode.hpp"

namespace pinfeed::loaders::detail {

/// The size the header gives and, for a JPEG, its frame marker (0 for other formats).
struct header_facts {
  image_size size;
  int jpeg_marker = 0;
};
[[nodiscard]] header_facts read_header_facts(std::span<const std::byte> bytes);

/// Refuses, by name (std::runtime_error naming `what`, the image's size, `format`, the estimate
/// with its parts, the limit and where it came from), a decode whose memory is over
/// decode_memory_limit_of(o), before any of it is allocated. Allocates nothing when it passes, and
/// reads the limit (TBB's thread cap, under its lock) only for an image with a size.
void check_decode_memory(std::span<const std::byte> bytes, const decode_options& o, bool region, const header_facts& h,
                         const char* format, const std::string& what);

}  // namespace pinfeed::loaders::detail
