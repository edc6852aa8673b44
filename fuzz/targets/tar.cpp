// Tar shards: index_tar() against the streaming scanner fed the same bytes in pieces, the samples
// grouped from both, and the sidecar index (.idx) parsed, printed and parsed again.
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "targets.hpp"

namespace pinfeed::fuzz {
namespace {

/// Piece sizes from 1 to 1024 bytes, drawn from the input itself (a fuzzer steers them too).
std::vector<std::size_t> pieces(bytes input) {
  std::uint64_t x = 0x9E3779B97F4A7C15ull ^ input.size();
  for (std::size_t i = 0; i < input.size() && i < 64; ++i) x = (x ^ input[i]) * 0x100000001B3ull;
  std::vector<std::size_t> out;
  for (std::size_t at = 0; at < input.size();) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    const std::size_t n = std::min<std::size_t>(1 + (x >> 54), input.size() - at);
    out.push_back(n);
    at += n;
  }
  return out;
}

bool same(const std::vector<loaders::tar_member>& a, const std::vector<loaders::tar_member>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].offset != b[i].offset || a[i].size != b[i].size) return false;
  return true;
}

bool same(const std::vector<loaders::detail::shard_sample>& a, const std::vector<loaders::detail::shard_sample>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].shard != b[i].shard || a[i].key != b[i].key || a[i].label != b[i].label || a[i].image.name != b[i].image.name ||
        a[i].image.offset != b[i].image.offset || a[i].image.size != b[i].image.size)
      return false;
  return true;
}

}  // namespace

outcome tar_index(bytes input) {
  constexpr std::string_view name = "tar_index";
  const auto archive = as_bytes(input);
  std::vector<loaders::tar_member> members;
  bool whole_ok = true;
  try {
    members = loaders::index_tar(archive, "fuzz.tar");
  } catch (const std::invalid_argument&) {
    whole_ok = false;
  }
  for (const auto& m : members) {
    if (m.offset > archive.size() || m.size > archive.size() - m.offset)
      broken(name, "member '" + m.name + "' at " + std::to_string(m.offset) + " + " + std::to_string(m.size) +
                       " lies outside the " + std::to_string(archive.size()) + "-byte archive");
  }
  // The same bytes arriving in pieces, every member's data kept: the same members, the same data.
  loaders::detail::tar_scanner scan("fuzz.tar", [](const std::string&) { return true; });
  scan.limit(archive.size());
  bool stream_ok = true;
  try {
    std::size_t at = 0;
    for (const auto n : pieces(input)) {
      scan.feed(archive.subspan(at, n));
      at += n;
    }
    scan.finish();
  } catch (const std::invalid_argument&) {
    stream_ok = false;
  }
  if (whole_ok != stream_ok)
    broken(name, std::string("index_tar ") + (whole_ok ? "accepts" : "refuses") + " the archive, the scanner fed in pieces " +
                     (stream_ok ? "accepts" : "refuses") + " it");
  if (!whole_ok) return outcome::rejected;
  if (!same(members, scan.members())) broken(name, "index_tar and the scanner fed in pieces list other members");
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto data = scan.data(i);
    const auto expect = archive.subspan(members[i].offset, members[i].size);
    if (data.size() != expect.size() || !std::equal(data.begin(), data.end(), expect.begin()))
      broken(name, "the scanner kept other bytes for member '" + members[i].name + "'");
  }
  // Grouped into samples, whole and streamed: the same samples, or the same refusal.
  const loaders::shard_options o;
  std::vector<loaders::detail::shard_sample> grouped, streamed;
  bool grouped_ok = true, streamed_ok = true;
  try {
    grouped = loaders::detail::shard_samples(archive, 3, "fuzz.tar", o);
  } catch (const std::invalid_argument&) {
    grouped_ok = false;
  }
  try {
    loaders::detail::shard_scanner s(3, "fuzz.tar", o);
    s.limit(archive.size());
    std::size_t at = 0;
    for (const auto n : pieces(input)) {
      s.feed(archive.subspan(at, n));
      at += n;
    }
    streamed = s.samples();
  } catch (const std::invalid_argument&) {
    streamed_ok = false;
  }
  if (grouped_ok != streamed_ok || (grouped_ok && !same(grouped, streamed)))
    broken(name, "shard_samples and the shard scanner fed in pieces disagree");
  // A shard's samples printed as its sidecar index read back as the same samples.
  if (grouped_ok) {
    const auto text = loaders::detail::format_shard_index(grouped, archive.size(), o);
    std::uint64_t tar_bytes = 0;
    const auto back = loaders::detail::parse_shard_index(text, 3, "fuzz.tar.idx", o, tar_bytes);
    if (!back || !same(*back, grouped) || tar_bytes != archive.size())
      broken(name, "the sidecar index of the samples does not read back as them");
  }
  return outcome::accepted;
}

outcome shard_index(bytes input) {
  constexpr std::string_view name = "shard_index";
  const loaders::shard_options o;
  std::uint64_t tar_bytes = 0;
  std::optional<std::vector<loaders::detail::shard_sample>> samples;
  try {
    samples = loaders::detail::parse_shard_index(text_of(input), 5, "fuzz.tar.idx", o, tar_bytes);
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  if (!samples) return outcome::rejected;  // made with other member keys: the shard is indexed anew
  for (const auto& s : *samples)
    if (s.image.offset > tar_bytes || s.image.size > tar_bytes - s.image.offset)
      broken(name, "sample '" + s.image.name + "' lies outside the " + std::to_string(tar_bytes) + "-byte shard");
  const auto text = loaders::detail::format_shard_index(*samples, tar_bytes, o);
  std::uint64_t again_bytes = 0;
  const auto again = loaders::detail::parse_shard_index(text, 5, "fuzz.tar.idx", o, again_bytes);
  if (!again || !same(*again, *samples) || again_bytes != tar_bytes)
    broken(name, "parsed, printed and parsed again, the index changed:\n" + text);
  return outcome::accepted;
}

}  // namespace pinfeed::fuzz
