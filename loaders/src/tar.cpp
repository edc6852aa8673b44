// Tar archives read as their bytes arrive (detail::tar_scanner) or whole (index_tar): POSIX
// ustar, GNU long names and base-256 sizes, pax path records.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
namespace {

constexpr std::size_t kBlock = detail::kTarBlock;

std::string field(std::span<const std::byte> h, std::size_t at, std::size_t len) {
  const char* p = reinterpret_cast<const char*>(h.data()) + at;
  return std::string(p, strnlen(p, len));
}

/// A numeric header field: octal text (NUL or space terminated), or GNU base-256 (high bit set).
bool parse_number(std::span<const std::byte> h, std::size_t at, std::size_t len, std::uint64_t& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(h.data()) + at;
  if (p[0] & 0x80) {
    out = 0;
    for (std::size_t i = 1; i < len; ++i) {
      if (out >> 56) return false;
      out = (out << 8) | p[i];
    }
    return (p[0] & 0x7F) == 0;
  }
  std::size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  out = 0;
  bool any = false;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (out >> 60) return false;
    out = out * 8 + (p[i] - '0');
    any = true;
  }
  for (; i < len; ++i)
    if (p[i] != 0 && p[i] != ' ') return false;
  return any;
}

bool zero_block(std::span<const std::byte> b) {
  return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}

/// "path=..." from a pax extended header's records ("<len> key=value\n", len counting the whole
/// record). Stops at the first record that is not well-formed.
std::string pax_path(std::span<const std::byte> data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t space = text.find(' ', at);
    if (space == std::string_view::npos || space == at || space - at > 20) break;
    std::uint64_t len = 0;
    for (std::size_t i = at; i < space; ++i) {
      if (text[i] < '0' || text[i] > '9') return {};
      len = len * 10 + static_cast<std::uint64_t>(text[i] - '0');
    }
    // The record holds its length, the space, at least "k=" and the newline.
    if (len < space - at + 4 || len > text.size() - at || text[at + len - 1] != '\n') break;
    const std::string_view record = text.substr(space + 1, len - (space - at) - 2);  // without the newline
    if (record.substr(0, 5) == "path=") return std::string(record.substr(5));
    at += len;
  }
  return {};
}

}  // namespace

detail::tar_scanner::tar_scanner(std::string what, std::function<bool(const std::string&)> keep)
    : what_(std::move(what)), keep_(std::move(keep)) {}

pinfeed::invalid_argument detail::tar_scanner::fail(const std::string& why) const {
  return pinfeed::invalid_argument("tar shard '" + what_ + "': " + why + " (header at byte " + std::to_string(header_at_) + ")");
}

void detail::tar_scanner::feed(std::span<const std::byte> bytes) {
  while (!bytes.empty() && !ended_) {
    if (skip_ > 0) {  // data nobody keeps, or padding
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(skip_, bytes.size()));
      skip_ -= n;
      at_ += n;
      bytes = bytes.subspan(n);
      continue;
    }
    if (want_ > 0) {  // data being kept
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(want_, bytes.size()));
      kept_.insert(kept_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      want_ -= n;
      at_ += n;
      bytes = bytes.subspan(n);
      if (want_ == 0) end_member();
      continue;
    }
    const std::size_t n = std::min(kBlock - header_fill_, bytes.size());
    std::memcpy(header_.data() + header_fill_, bytes.data(), n);
    header_fill_ += n;
    at_ += n;
    bytes = bytes.subspan(n);
    if (header_fill_ == kBlock) {
      header_fill_ = 0;
      begin_member();
    }
  }
  if (ended_) at_ += bytes.size();  // past the end-of-archive block: not read
}

void detail::tar_scanner::begin_member() {
  const std::span<const std::byte> h(header_.data(), kBlock);
  header_at_ = at_ - kBlock;
  if (zero_block(h)) {  // end of archive
    ended_ = true;
    return;
  }
  std::uint64_t checksum = 0, size = 0;
  if (!parse_number(h, 148, 8, checksum)) throw fail("header checksum field is not a number");
  // The checksum counts the header bytes with its own field as spaces, unsigned (POSIX) or, as
  // some old tars wrote it, signed.
  std::uint64_t sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const auto b = (i >= 148 && i < 156) ? static_cast<std::uint8_t>(' ') : static_cast<std::uint8_t>(h[i]);
    sum += b;
    signed_sum += static_cast<std::int8_t>(b);
  }
  if (sum != checksum && static_cast<std::uint64_t>(signed_sum) != checksum)
    throw fail("bad header checksum (not a tar file, or corrupt)");
  if (!parse_number(h, 124, 12, size)) throw fail("member size is not a number");
  if (size > limit_ || at_ > limit_ - size) throw fail("member of " + std::to_string(size) + " bytes runs past the end");
  type_ = static_cast<char>(h[156]);
  std::string name = field(h, 0, 100);
  const std::string magic = field(h, 257, 6);
  if (magic.rfind("ustar", 0) == 0) {
    const std::string prefix = field(h, 345, 155);
    if (!prefix.empty()) name = prefix + "/" + name;
  }
  size_ = size;
  data_at_ = at_;
  bool keep = false;
  if (type_ == 'L' || type_ == 'x') {  // GNU long name, pax extended header: the next member's name
    // Held whole in memory: a few hundred bytes in any real archive, at most 1 MiB here.
    if (size > (std::uint64_t{1} << 20))
      throw fail(std::string(type_ == 'L' ? "GNU long name" : "pax extended header") + " of " + std::to_string(size) +
                 " bytes (more than 1 MiB)");
    keep = true;
  } else if (type_ == '0' || type_ == '\0' || type_ == '7') {
    if (!long_name_.empty()) name = long_name_;
    name_ = std::move(name);
    keep = keep_ && keep_(name_);
  }
  if (!(type_ == 'L' || type_ == 'x' || type_ == 'g')) long_name_.clear();
  kept_.clear();
  if (keep && size > 0) {
    kept_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(size, std::uint64_t{1} << 20)));
    want_ = size;
  } else {
    if (keep) end_member();
    else end_member_skipping(size);
  }
}

void detail::tar_scanner::end_member_skipping(std::uint64_t size) {
  kept_.clear();
  const bool regular = type_ == '0' || type_ == '\0' || type_ == '7';
  if (regular) {
    members_.push_back({name_, data_at_, size});
    data_.emplace_back();
  }
  skip_ = (size + kBlock - 1) / kBlock * kBlock;
}

void detail::tar_scanner::end_member() {
  const std::span<const std::byte> data(kept_.data(), kept_.size());
  if (type_ == 'L') {
    long_name_ = data.empty() ? std::string()  // (no data: no pointer for strnlen)
                            : std::string(reinterpret_cast<const char*>(data.data()),
                                          strnlen(reinterpret_cast<const char*>(data.data()), data.size()));
  } else if (type_ == 'x') {
    long_name_ = pax_path(data);
  } else {
    members_.push_back({name_, data_at_, size_});
    data_.push_back(std::move(kept_));
  }
  kept_.clear();
  skip_ = (size_ + kBlock - 1) / kBlock * kBlock - size_;  // the padding
}

void detail::tar_scanner::finish() {
  if (ended_) return;
  if (want_ > 0 || (skip_ > 0 && at_ - data_at_ < size_))
    throw fail("member of " + std::to_string(size_) + " bytes runs past the end");
  if (header_fill_ > 0) {
    header_at_ = at_ - header_fill_;
    throw fail("truncated: " + std::to_string(header_fill_) + " bytes of a header at the end");
  }
}

std::vector<tar_member> index_tar(std::span<const std::byte> a, const std::string& what) {
  detail::tar_scanner scan(what);
  scan.limit(a.size());
  scan.feed(a);
  scan.finish();
  return scan.members();
}

}  // namespace pinfeed::loaders
