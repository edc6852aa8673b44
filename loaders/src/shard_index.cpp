// The sidecar index of a tar shard (detail::format_shard_index, detail::parse_shard_index): what
// indexing a shard finds, as text a remote reader fetches instead of the shard.
#include <cinttypes>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "detail/tar_samples.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {

namespace {
constexpr std::string_view kIndexMagic = "pinfeed-tar-index";
constexpr int kIndexVersion = 1;
}  // namespace

std::string detail::format_shard_index(const std::vector<shard_sample>& samples, std::uint64_t tar_bytes,
                                       const shard_options& o) {
  std::string out = std::string(kIndexMagic) + " " + std::to_string(kIndexVersion) + " " + std::to_string(tar_bytes) +
                    " " + std::to_string(samples.size()) + " " + o.image_keys + " " + o.label_key + "\n";
  for (const auto& e : samples)
    out += std::to_string(e.image.offset) + " " + std::to_string(e.image.size) + " " + std::to_string(e.label) + " " +
           e.image.name + "\n";
  return out;
}

std::optional<std::vector<detail::shard_sample>> detail::parse_shard_index(std::string_view text, std::uint32_t shard,
                                                                           const std::string& what,
                                                                           const shard_options& o,
                                                                           std::uint64_t& tar_bytes) {
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < text.size();) {
    const auto nl = text.find('\n', at);
    if (nl == std::string_view::npos)
      throw pinfeed::invalid_argument("tar index '" + what + "': truncated (its last line has no newline)");
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  auto bad = [&](std::size_t line, const std::string& why) {
    return pinfeed::invalid_argument("tar index '" + what + "' line " + std::to_string(line + 1) + ": " + why);
  };
  if (lines.empty()) throw pinfeed::invalid_argument("tar index '" + what + "' is empty");
  std::istringstream head{std::string(lines[0])};
  head.exceptions(std::ios::badbit);  // a failed allocation is std::bad_alloc, not "not a header"
  std::string magic, keys, label_key;
  int version = 0;
  std::uint64_t count = 0;
  if (!(head >> magic >> version >> tar_bytes >> count >> keys >> label_key) || magic != kIndexMagic)
    throw bad(0, "not a pinfeed tar index header");
  if (version != kIndexVersion) throw bad(0, "version " + std::to_string(version) + " is not " + std::to_string(kIndexVersion));
  if (keys != o.image_keys || label_key != o.label_key) return std::nullopt;  // indexed with other member keys
  if (lines.size() != count + 1)
    throw bad(0, "says " + std::to_string(count) + " samples, but " + std::to_string(lines.size() - 1) + " lines follow");
  std::vector<shard_sample> out;
  out.reserve(count);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string line(lines[i]);
    std::uint64_t offset = 0, size = 0;
    long long label = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "%" SCNu64 " %" SCNu64 " %lld %n", &offset, &size, &label, &used) != 3 ||
        used <= 0 || static_cast<std::size_t>(used) >= line.size())
      throw bad(i, "not '<offset> <size> <label> <member name>'");
    if (offset > tar_bytes || size > tar_bytes - offset)
      throw bad(i, "member at " + std::to_string(offset) + " + " + std::to_string(size) + " bytes runs past the " +
                       std::to_string(tar_bytes) + "-byte shard");
    shard_sample e;
    e.shard = shard;
    e.image = {line.substr(static_cast<std::size_t>(used)), offset, size};
    e.key = e.image.name.substr(0, detail::key_end(e.image.name));
    e.label = label;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pinfeed::loaders
