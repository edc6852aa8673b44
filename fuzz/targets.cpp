#include "targets.hpp"

#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/shards.hpp"

namespace pinfeed::fuzz {

int tar_index(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    for (const auto& m : loaders::index_tar(bytes, "fuzz.tar")) {
      if (m.offset > size || m.size > size - m.offset) std::abort();  // a member must lie inside the archive
      volatile std::byte touch = m.size ? bytes[m.offset + m.size - 1] : std::byte{0};
      (void)touch;
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

int file_list(const std::uint8_t* data, std::size_t size) {
  try {
    for (const auto& f : loaders::parse_file_list(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz",
                                                  "/base"))
      if (f.label < 0 || f.path.empty()) std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

int decode(const std::uint8_t* data, std::size_t size) {
  thread_local std::vector<std::byte> out;
  loaders::decode_options o;
  o.max_pixels = std::int64_t{1} << 22;
  try {
    const auto spec = loaders::decode_image(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size),
                                            out, o, "fuzz");
    if (spec.height <= 0 || spec.width <= 0 || out.size() != spec.bytes()) std::abort();
  } catch (const std::runtime_error&) {
  }
  // Window decoding, with pinfeed's Huffman decoder and libjpeg-turbo's: where both decode, the
  // pixels must be the same. The window and the scale come from the input's last bytes.
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto tail = [&](std::size_t back) { return size > back ? static_cast<std::int64_t>(data[size - 1 - back]) : 0; };
  const loaders::image_region window{tail(0) * 3, tail(1) * 3, 1 + tail(2) * 4, 1 + tail(3) * 4};
  const std::int64_t min_short_side = tail(4) % 4 == 0 ? 0 : tail(4);
  thread_local std::vector<std::byte> ours, theirs;
  bool ours_ok = true, theirs_ok = true;
  loaders::image_spec ours_spec{}, theirs_spec{};
  try {
    ours_spec = loaders::decode_image_region(bytes, ours, o, window, min_short_side, "fuzz");
  } catch (const std::runtime_error&) {
    ours_ok = false;
  }
  o.huffman = loaders::decode_options::huffman_decoder::libjpeg;
  try {
    theirs_spec = loaders::decode_image_region(bytes, theirs, o, window, min_short_side, "fuzz");
  } catch (const std::runtime_error&) {
    theirs_ok = false;
  }
  if (ours_ok && theirs_ok && (ours_spec.height != theirs_spec.height || ours_spec.width != theirs_spec.width || ours != theirs))
    std::abort();
  return 0;
}

}  // namespace pinfeed::fuzz
