#include "remote/index_cache.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "remote/blob.hpp"

namespace pinfeed::loaders::remote {
namespace {

constexpr std::string_view kMagic = "pinfeed-remote-index 1";
constexpr std::size_t kHashDigits = 16;
constexpr std::string_view kExt = ".idx", kTempTemplate = ".XXXXXX";

/// A temporary this cache writes: kHashDigits hex digits, kExt, then mkostemp's suffix.
bool is_temp_name(std::string_view name) {
  const std::string_view hash = name.substr(0, kHashDigits);
  return name.size() == kHashDigits + kExt.size() + kTempTemplate.size() &&
         std::all_of(hash.begin(), hash.end(), [](unsigned char c) { return std::isxdigit(c) != 0; }) &&
         name.substr(kHashDigits, kExt.size()) == kExt && name[kHashDigits + kExt.size()] == kTempTemplate[0];
}

}  // namespace

index_cache::index_cache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw pinfeed::invalid_argument("remote shards: index cache directory '" + dir_ + "' cannot be made: " + ec.message());
  remove_stale_temps();
}

std::filesystem::path index_cache::file(const std::string& location) const {
  char hex[kHashDigits + 1];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<std::uint64_t>(hash_bytes(location.data(), location.size())));
  return std::filesystem::path(dir_) / (hex + std::string(kExt));
}

std::optional<index_cache::entry> index_cache::load(const std::string& location, const std::string& shown) const {
  std::ifstream in(file(location), std::ios::binary);
  std::string magic, where;
  entry e;
  if (!in || !std::getline(in, magic) || magic != kMagic || !std::getline(in, where) || where != shown ||
      !std::getline(in, e.etag) || e.etag.empty())
    return std::nullopt;
  e.index.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return e;
}

void index_cache::store(const std::string& location, const std::string& shown, const std::string& etag,
                        const std::string& index) const {
  if (etag.empty() || etag.find('\n') != std::string::npos) return;
  const auto target = file(location);
  std::string tmp = target.string() + std::string(kTempTemplate);
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return;
  const std::string text = std::string(kMagic) + "\n" + shown + "\n" + etag + "\n" + index;
  const bool written = write_all(fd, text.data(), text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || ::rename(tmp.c_str(), target.c_str()) != 0) ::unlink(tmp.c_str());
}

void index_cache::remove_stale_temps() const noexcept {
  // A process killed between writing a file and renaming it into place leaves its temporary: one
  // untouched for an hour is no writer's (a writer in another process is seconds old). Failures
  // are ignored: the files only take room.
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_temp_name(it->path().filename().string())) continue;
    std::error_code e2;
    const auto when = std::filesystem::last_write_time(it->path(), e2);
    if (!e2 && now - when > std::chrono::hours(1)) std::filesystem::remove(it->path(), e2);
  }
}

}  // namespace pinfeed::loaders::remote
