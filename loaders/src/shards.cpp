#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <cinttypes>
#include <optional>
#include <sstream>
#include <fstream>
#include <map>
#include <stdexcept>

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detail/tar_samples.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders {
std::vector<std::string> detail::expand_braces(const std::string& pattern) {
  // At most 8 ranges, 1,000,000 names and 256 MiB of them in all (each range is at most 1,000,001
  // names on its own: two could otherwise ask for 10^12).
  constexpr std::size_t kMaxRanges = 8, kMaxNames = 1000000, kMaxBytes = std::size_t{256} << 20;
  std::vector<std::string> patterns{pattern};
  // Brace ranges first: {000..127}, keeping the width of the lower bound.
  for (std::size_t round = 0; round <= kMaxRanges; ++round) {
    std::vector<std::string> next;
    std::size_t next_bytes = 0;
    bool expanded = false;
    for (const auto& p : patterns) {
      const auto open = p.find('{');
      if (open == std::string::npos) {
        next_bytes += p.size();
        next.push_back(p);
        continue;
      }
      const auto close = p.find('}', open);
      const auto dots = p.find("..", open);
      if (close == std::string::npos || dots == std::string::npos || dots > close)
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': expected {first..last}");
      const std::string lo = p.substr(open + 1, dots - open - 1), hi = p.substr(dots + 2, close - dots - 2);
      if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
          hi.find_first_not_of("0123456789") != std::string::npos)
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': range {" + lo + ".." + hi + "} is not numeric");
      if (lo.size() > 18 || hi.size() > 18)
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': range {" + lo + ".." + hi + "} has numbers too long");
      const long a = std::stol(lo), b = std::stol(hi);
      if (b < a || b - a > 1000000)
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': bad range {" + lo + ".." + hi + "}");
      if (round == kMaxRanges)
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': more than " + std::to_string(kMaxRanges) +
                                    " {first..last} ranges");
      const auto names = static_cast<std::size_t>(b - a) + 1, name_bytes = p.size() + hi.size() + lo.size();
      if (next.size() + names > kMaxNames || next_bytes + names * name_bytes > kMaxBytes)  // no overflow: names <= 1000001
        throw pinfeed::invalid_argument("shard pattern '" + pattern + "': expands to more than " + std::to_string(kMaxNames) +
                                    " names or " + std::to_string(kMaxBytes >> 20) + " MiB of them");
      next_bytes += names * name_bytes;
      for (long v = a; v <= b; ++v) {
        std::string num = std::to_string(v);
        if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');
        next.push_back(p.substr(0, open) + num + p.substr(close + 1));
      }
      expanded = true;
    }
    patterns = std::move(next);
    if (!expanded) break;
  }
  return patterns;
}

std::vector<std::string> expand_shard_pattern(const std::string& pattern) {
  std::vector<std::string> out;
  for (const auto& p : detail::expand_braces(pattern)) {
    if (p.find_first_of("*?[") == std::string::npos) {
      out.push_back(p);
      continue;
    }
    glob_t g{};
    if (::glob(p.c_str(), 0, nullptr, &g) == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  if (out.empty()) throw pinfeed::invalid_argument("shard pattern '" + pattern + "' matches no file");
  return out;
}

namespace {

/// A read-only memory map of a whole file.
class mapped_file {
 public:
  explicit mapped_file(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw pinfeed::invalid_argument("tar shard '" + path + "' cannot be opened: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw pinfeed::invalid_argument("tar shard '" + path + "': cannot stat");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw pinfeed::invalid_argument("tar shard '" + path + "' cannot be mapped: " + std::strerror(errno));
      }
      data_ = static_cast<const std::byte*>(p);
      ::madvise(p, size_, MADV_WILLNEED);
    }
    ::close(fd);
  }
  ~mapped_file() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const auto next = s.find(sep, at);
    out.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return out;
}


std::int64_t parse_label(std::span<const std::byte> b, const std::string& shard, const std::string& key) {
  std::string text(reinterpret_cast<const char*>(b.data()), b.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw pinfeed::invalid_argument("tar shard '" + shard + "': sample '" + key + "' has label '" + text.substr(0, 32) +
                                "', not an integer");
  return v;
}

}  // namespace

detail::shard_scanner::shard_scanner(std::uint32_t shard, std::string what, const shard_options& options)
    : shard_(shard),
      what_(std::move(what)),
      options_(options),
      scan_(what_, [label = "." + options.label_key](const std::string& name) {
        const auto dot = detail::key_end(name);  // the label members' data is kept, nothing else's
        return dot != std::string::npos && name.compare(dot, std::string::npos, label) == 0;
      }) {}

std::vector<detail::shard_sample> detail::shard_scanner::samples() {
  scan_.finish();
  const auto image_keys = split(options_.image_keys, ';');
  const auto& members = scan_.members();
  // Group by key, keeping the order of first appearance.
  std::map<std::string, std::size_t> slot;
  std::vector<shard_sample> group;
  std::vector<char> has_image, has_label;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    const auto dot = detail::key_end(m.name);
    if (dot == std::string::npos) continue;
    const std::string key = m.name.substr(0, dot), ext = m.name.substr(dot + 1);
    auto [it, fresh] = slot.emplace(key, group.size());
    if (fresh) {
      group.push_back({shard_, key, {}, 0});
      has_image.push_back(0);
      has_label.push_back(0);
    }
    const std::size_t g = it->second;
    if (std::find(image_keys.begin(), image_keys.end(), ext) != image_keys.end()) {
      group[g].image = m;
      has_image[g] = 1;
    } else if (ext == options_.label_key) {
      group[g].label = parse_label(scan_.data(i), what_, key);
      has_label[g] = 1;
    }
  }
  for (std::size_t g = 0; g < group.size(); ++g) {
    if (!has_image[g])
      throw pinfeed::invalid_argument("tar shard '" + what_ + "': sample '" + group[g].key + "' has no image member (." +
                                  options_.image_keys + ")");
    if (!has_label[g])
      throw pinfeed::invalid_argument("tar shard '" + what_ + "': sample '" + group[g].key + "' has no ." +
                                  options_.label_key + " label member");
  }
  return group;
}

std::vector<detail::shard_sample> detail::shard_samples(std::span<const std::byte> archive, std::uint32_t shard,
                                                        const std::string& what, const shard_options& options) {
  shard_scanner scan(shard, what, options);
  scan.limit(archive.size());
  scan.feed(archive);
  return scan.samples();
}

std::size_t detail::key_end(const std::string& name) {
  const auto slash = name.find_last_of('/');
  return name.find('.', slash == std::string::npos ? 0 : slash + 1);
}

std::shared_ptr<const sample_groups> detail::shard_groups(const std::vector<shard_sample>& entries, std::size_t shards,
                                                          std::uint32_t window) {
  if (window == 0) return nullptr;
  auto g = std::make_shared<sample_groups>();
  g->sizes.assign(shards, 0);
  for (const auto& e : entries) ++g->sizes.at(e.shard);
  g->window = window;
  return g;
}

std::string detail::shards_identity(const std::vector<std::string>& locations, const std::vector<shard_sample>& entries) {
  std::vector<std::uint64_t> counts(locations.size(), 0);
  for (const auto& e : entries) ++counts.at(e.shard);
  std::string id = "tar shards";
  for (std::size_t s = 0; s < locations.size(); ++s) {
    const auto slash = locations[s].find_last_of('/');  // the name alone: the same data moved stays the same
    id += '\n';
    id.append(locations[s], slash == std::string::npos ? 0 : slash + 1);
    id += '\t';
    id += std::to_string(counts[s]);
  }
  return id;
}

detail::tar_sample_reader::tar_sample_reader(storage_kind kind, std::vector<std::string> shard_names,
                                             std::vector<shard_sample> entries, decode_options decode,
                                             std::uint32_t window)
    : kind_(kind), names_(std::move(shard_names)), entries_(std::move(entries)), decode_(std::move(decode)),
      window_(window) {}

std::string detail::tar_sample_reader::name() const {
  return std::to_string(entries_.size()) + " samples in " + std::to_string(names_.size()) +
         (kind_ == storage_kind::remote_tar_shards ? " remote tar shard(s)" : " tar shard(s)");
}

const detail::shard_sample& detail::tar_sample_reader::entry(sample& s) const {
  const shard_sample& e = entries_.at(s.index());
  s.set_origin(names_[e.shard] + ":" + e.image.name);
  s.as<std::int64_t>(1)[0] = e.label;
  return e;
}

read_result detail::tar_sample_reader::read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) {
  // A range read's bytes, kept for the next sample's.
  auto& storage = pinfeed::detail::thread_scratch<std::vector<std::byte>, struct range_read_bytes>();
  std::shared_ptr<const void> held;  // keeps a cached shard until the sample is decoded: no copy
  const auto bytes = bytes_of(s, entry(s), storage, held);
  return decode_stored(s, bytes, image, plan);
}

std::span<const std::byte> detail::tar_sample_reader::read_stored(sample& s, std::vector<std::byte>& storage) {
  std::shared_ptr<const void> held;
  const auto bytes = bytes_of(s, entry(s), storage, held);
  if (!held) return bytes;
  storage.assign(bytes.begin(), bytes.end());  // the caller may keep the view past an eviction
  return storage;
}

read_result detail::tar_sample_reader::decode_stored(sample& s, std::span<const std::byte> bytes,
                                                     std::vector<std::byte>& image, const decode_planner& plan) {
  const shard_sample& e = entries_.at(s.index());
  return decode_sample(s, bytes, image, decode_, plan, names_[e.shard] + ":" + e.image.name);
}

namespace {

class tar_reader final : public detail::tar_sample_reader {
 public:
  tar_reader(std::vector<std::unique_ptr<mapped_file>> maps, std::vector<detail::shard_sample> entries,
             const shard_options& o)
      : tar_sample_reader(storage_kind::tar_shards, paths(maps), std::move(entries), o.decode, o.window_shards.value_or(0)),
        maps_(std::move(maps)) {}

 protected:
  std::span<const std::byte> bytes_of(sample&, const detail::shard_sample& e, std::vector<std::byte>&,
                                      std::shared_ptr<const void>&) override {
    return maps_[e.shard]->bytes().subspan(e.image.offset, e.image.size);  // zero copy from the mapping
  }

 private:
  static std::vector<std::string> paths(const std::vector<std::unique_ptr<mapped_file>>& maps) {
    std::vector<std::string> out;
    for (const auto& m : maps) out.push_back(m->path());
    return out;
  }
  std::vector<std::unique_ptr<mapped_file>> maps_;
};

/// Appends one member (ustar header, data, padding).
void append_member(std::ofstream& out, const std::string& name, std::span<const std::byte> data) {
  if (name.size() >= 100) throw pinfeed::runtime_error("tar member name '" + name + "' is too long");
  char h[detail::kTarBlock] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  out.write(h, detail::kTarBlock);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  const std::size_t pad = (detail::kTarBlock - data.size() % detail::kTarBlock) % detail::kTarBlock;
  static const char zeros[detail::kTarBlock] = {};
  out.write(zeros, static_cast<std::streamsize>(pad));
}

}  // namespace

std::string shard_index_path(const std::string& shard) { return shard + ".idx"; }

void write_shard_index(const std::string& shard, const shard_options& options) {
  const mapped_file map(shard);
  const auto samples = detail::shard_samples(map.bytes(), 0, shard, options);
  const std::string text = detail::format_shard_index(samples, map.bytes().size(), options);
  const std::string path = shard_index_path(shard), part = path + ".part";
  pinfeed::detail::write_whole_file(part, text, "cannot write the tar index '" + part + "'");
  std::error_code ec;
  std::filesystem::rename(part, path, ec);  // whole or not at all
  if (ec) throw pinfeed::runtime_error("cannot write the tar index '" + path + "': " + ec.message());
}

std::shared_ptr<image_reader> make_shard_reader(const std::vector<std::string>& shards, shard_options options) {
  if (shards.empty()) throw pinfeed::invalid_argument("tar shards: no shard given");
  std::vector<std::unique_ptr<mapped_file>> maps;
  std::vector<detail::shard_sample> entries;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    maps.push_back(std::make_unique<mapped_file>(shards[s]));
    auto group = detail::shard_samples(maps.back()->bytes(), static_cast<std::uint32_t>(s), shards[s], options);
    entries.insert(entries.end(), std::make_move_iterator(group.begin()), std::make_move_iterator(group.end()));
  }
  if (entries.empty()) throw pinfeed::invalid_argument("tar shards: no samples in " + std::to_string(shards.size()) + " shard(s)");
  return std::make_shared<tar_reader>(std::move(maps), std::move(entries), options);
}

std::vector<std::string> write_shards(const std::vector<image_file>& files, const std::string& prefix,
                                      std::uint64_t shard_bytes) {
  if (files.empty()) throw pinfeed::runtime_error("pack: no files to write");
  std::vector<std::string> written;
  std::ofstream out;
  std::uint64_t in_shard = 0;
  std::vector<std::byte> bytes;
  auto close = [&] {
    static const char zeros[2 * detail::kTarBlock] = {};
    out.write(zeros, sizeof zeros);
    out.close();
    if (!out) pinfeed::detail::throw_write_failure("pack: failed writing '" + written.back() + "'");
  };
  const int width = std::max<int>(6, static_cast<int>(std::to_string(files.size()).size()));
  for (std::size_t i = 0; i < files.size(); ++i) {
    read_file(files[i].path, bytes);
    if (!out.is_open() || (in_shard > 0 && in_shard + bytes.size() > shard_bytes)) {
      if (out.is_open()) close();
      char name[32];
      std::snprintf(name, sizeof name, "-%06zu.tar", written.size());
      written.push_back(prefix + name);
      errno = 0;
      out.open(written.back(), std::ios::binary | std::ios::trunc);
      if (!out) pinfeed::detail::throw_write_failure("pack: cannot write '" + written.back() + "'");
      in_shard = 0;
    }
    std::string key = std::to_string(i);
    key.insert(0, static_cast<std::size_t>(width) - key.size(), '0');
    std::string ext = std::filesystem::path(files[i].path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext.empty()) ext = ".jpg";
    append_member(out, key + ext, bytes);
    const std::string label = std::to_string(files[i].label);
    append_member(out, key + ".cls", std::as_bytes(std::span<const char>(label.data(), label.size())));
    in_shard += bytes.size() + 3 * detail::kTarBlock;
  }
  close();
  for (const auto& w : written) write_shard_index(w);
  return written;
}

}  // namespace pinfeed::loaders
