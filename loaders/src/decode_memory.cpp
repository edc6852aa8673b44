// The memory a decode needs, estimated from the image's header, and the limit it is held to.
#include "decode_memory.hpp"

#include <algorithm>

#include <oneapi/tbb/global_control.h>

#include "image_header.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed::loaders {
namespace detail {
namespace {

/// The threads that may decode at once: TBB's cap on this process's threads.
std::size_t decoding_threads() {
  return std::max<std::size_t>(1, tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

/// decode_memory_limit_of(o).bytes, without its words.
std::uint64_t limit_bytes(const decode_options& o) {
  if (o.max_decode_bytes) return *o.max_decode_bytes;
  const std::uint64_t memory = this_node_plan_without_gpu().rank_memory;
  return memory == 0 ? 0 : memory / decoding_threads();
}

/// decode_memory_need()'s bytes for an image of size `s` (0 where it has none), its parts in words
/// into `parts` where given. Allocates nothing without `parts`: it runs before every decode.
std::uint64_t memory_need(std::span<const std::byte> bytes, const decode_options& o, bool region,
                          const header_facts& h, std::string* parts) {
  const image_size& s = h.size;
  if (s.width <= 0 || s.height <= 0) return 0;
  const bool jpeg = is_jpeg(bytes);
  std::uint64_t per_pixel = 3;
  if (parts) *parts = "3 bytes a pixel for the decoded RGB pixels";
  const auto add = [&](std::uint64_t n, const char* what) {
    per_pixel += n;
    if (parts) *parts += std::string(", ") + std::to_string(n) + " for " + what;
  };
  if (jpeg && h.jpeg_marker != 0xC0 && h.jpeg_marker != 0xC1)
    add(6, "libjpeg's DCT coefficients of a progressive or arithmetic-coded JPEG");
  if (is_webp(bytes)) add(4, "libwebp's ARGB pixels");
  if (is_tiff(bytes)) add(4, "libtiff's RGBA raster");
  if (region && !jpeg) add(3, "the whole image a window is cut from");
  if (o.apply_exif_orientation && detail::exif_orientation(bytes) != 1) add(3, "the turned copy");
  std::uint64_t need = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(s.width), static_cast<std::uint64_t>(s.height), &need) ||
      __builtin_mul_overflow(need, per_pixel, &need))
    return ~std::uint64_t{0};
  return need;
}

}  // namespace

header_facts read_header_facts(std::span<const std::byte> bytes) {
  if (!is_jpeg(bytes)) return {peek_size(bytes), 0};
  const jpeg_frame f = read_jpeg_frame(bytes);
  return {{f.width, f.height}, f.marker};
}

void check_decode_memory(std::span<const std::byte> bytes, const decode_options& o, bool region, const header_facts& h,
                         const char* format, const std::string& what) {
  const image_size& s = h.size;
  const std::uint64_t need = memory_need(bytes, o, region, h, nullptr);  // before the limit: it takes TBB's lock
  if (need == 0) return;
  const std::uint64_t limit = limit_bytes(o);
  if (limit == 0 || need <= limit) return;
  std::string parts;
  (void)memory_need(bytes, o, region, h, &parts);
  throw pinfeed::runtime_error(what + ": decoding this " + std::to_string(s.width) + "x" + std::to_string(s.height) + " " +
                               format + " needs about " + format_bytes(need) + " (" + parts + "), more than the " +
                               format_bytes(limit) + " one decode may take (" + decode_memory_limit_of(o).source + ")");
}

}  // namespace detail

decode_memory decode_memory_need(std::span<const std::byte> bytes, const decode_options& o, bool region) {
  std::string parts;
  const std::uint64_t need = detail::memory_need(bytes, o, region, detail::read_header_facts(bytes), &parts);
  return {need, need ? parts : std::string()};
}

decode_memory_limit decode_memory_limit_of(const decode_options& o) {
  if (o.max_decode_bytes) return {*o.max_decode_bytes, "decode_options::max_decode_bytes, pinfeed --max-decode-memory"};
  const node_plan& plan = this_node_plan_without_gpu();
  if (plan.rank_memory == 0) return {0, "no limit: this process's memory is unknown"};
  const std::size_t threads = detail::decoding_threads();
  return {plan.rank_memory / threads, "this process's share of memory, " + format_bytes(plan.rank_memory) + " (" +
                                          plan.memory_source + "), over the " + std::to_string(threads) +
                                          " threads that may decode at once"};
}

}  // namespace pinfeed::loaders
