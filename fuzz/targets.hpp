#pragma once
// The fuzz targets: one entry point per parser of bytes pinfeed did not write, shared by the
// libFuzzer binaries (fuzz/CMakeLists.txt, scripts/fuzz.sh) and the replay of the seed corpus and
// of every input a fuzzer ever failed on (tests/loaders/fuzz_regressions_test.cpp).
//
// An entry returns `accepted` when the parser took the input and every check on the result held
// (a parse printed and parsed again gives the same value; two decoders that both accept give the
// same pixels; a stream fed in pieces finds what the whole finds), `rejected` when the parser
// refused it with its documented exception. A broken check aborts (broken()), which libFuzzer
// reports as a crash and keeps the input.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace pinfeed::fuzz {

enum class outcome { accepted, rejected };
using bytes = std::span<const std::uint8_t>;

/// The input as the bytes pinfeed's decoders and scanners take.
inline std::span<const std::byte> as_bytes(bytes input) {
  return {reinterpret_cast<const std::byte*>(input.data()), input.size()};
}

struct target {
  std::string_view name;  ///< also the folder of its seeds (fuzz/corpus/<name>) and regressions
  outcome (*run)(bytes input);
};

/// Every target of this build (the remote ones need PINFEED_WITH_CURL).
[[nodiscard]] std::span<const target> targets();
/// The targets a build without libcurl leaves out.
inline constexpr std::string_view remote_targets[] = {"s3_list", "http_headers", "location"};
/// The target named `name`, or nullptr.
[[nodiscard]] const target* find_target(std::string_view name);

/// A check failed: prints the target's name and why to stderr, and aborts.
[[noreturn]] void broken(std::string_view target, const std::string& why);

/// The input as text.
[[nodiscard]] inline std::string_view text_of(bytes input) {
  return {reinterpret_cast<const char*>(input.data()), input.size()};
}

// Images (targets/images.cpp).
outcome jpeg(bytes input);   // decode whole and in a window, with both Huffman decoders
outcome image(bytes input);  // PNG, WebP, BMP, TIFF, ...: whole, window, header size
outcome jpeg_planes(bytes input);  // coefficients: packed and back, the planes against the host decode
// Tar shards (targets/tar.cpp).
outcome tar_index(bytes input);    // index_tar, and the streaming scanner fed in pieces
outcome shard_index(bytes input);  // the sidecar .idx: parse, print, parse
// Text the user writes (targets/text.cpp).
outcome file_list(bytes input);
outcome shard_pattern(bytes input);  // {000..127} ranges (and http(s):// patterns)
outcome pipeline(bytes input);       // transform specs and pipeline JSON
outcome config(bytes input);         // pinfeed.config/1
outcome loader_state(bytes input);   // loader::resume
outcome npy(bytes input);
// What a server sends (targets/remote.cpp; PINFEED_WITH_CURL).
outcome s3_list(bytes input);       // ListObjectsV2 pages
outcome http_headers(bytes input);  // status lines and headers
outcome location(bytes input);      // http(s):// and s3:// locations, redaction, percent-encoding

}  // namespace pinfeed::fuzz
