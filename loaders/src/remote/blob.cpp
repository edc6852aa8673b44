#include "remote/blob.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::remote {

bool write_all(int fd, const void* p, std::size_t n) {
  const auto* at = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, at, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    at += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

blob::blob(std::vector<std::byte> bytes, const std::string& dir, std::uint32_t shard) {
  if (dir.empty()) {
    memory_ = std::move(bytes);
    view_ = memory_;
    return;
  }
  // A unique new file (O_EXCL), so that processes sharing the directory never meet.
  std::string templ = (std::filesystem::path(dir) / ("pinfeed-shard-" + std::to_string(shard) + "-XXXXXX")).string();
  const int fd = ::mkostemp(templ.data(), O_CLOEXEC);
  if (fd < 0) throw pinfeed::runtime_error("cannot make a cache file in '" + dir + "': " + std::strerror(errno));
  ::unlink(templ.c_str());  // the descriptor, then the mapping, keep the blocks
  if (!write_all(fd, bytes.data(), bytes.size())) {
    const int err = errno;
    ::close(fd);
    throw pinfeed::runtime_error("cannot write the cache file '" + templ + "': " + std::strerror(err));
  }
  if (!bytes.empty()) {
    void* p = ::mmap(nullptr, bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw pinfeed::runtime_error("cannot map the cache file '" + templ + "': " + std::strerror(err));
    }
    view_ = {static_cast<const std::byte*>(p), bytes.size()};
    mapped_ = true;
  }
  ::close(fd);
}

blob::~blob() {
  if (mapped_) ::munmap(const_cast<std::byte*>(view_.data()), view_.size());
}

}  // namespace pinfeed::loaders::remote
