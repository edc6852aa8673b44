#pragma once
// Internal (not installed): reading and writing a whole small file (a config, a pipeline file, a
// file list, a saved loader state, a report) the one way: out of memory is std::bad_alloc, never
// "cannot be opened" or "cannot write" (a stream whose buffer could not be allocated fails like a
// full disk does; errno, ENOMEM, tells them apart).

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::detail {

/// The bytes of `path`; nullopt when it cannot be opened (errno says why, for the caller's
/// message). std::bad_alloc when memory runs out opening or reading it. (Read through iterators:
/// `ostringstream << rdbuf()` swallows a failed allocation and returns the file cut short.)
inline std::optional<std::string> read_whole_file(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOMEM) throw std::bad_alloc();  // memory, not the file
    return std::nullopt;
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Throws for `what` ("cannot write config 'x'") after a stream failed: std::bad_alloc where errno
/// says memory ran out, else pinfeed::runtime_error with errno's reason appended where there is
/// one. Set errno to 0 before the stream's work, so that an older errno is not taken for its.
[[noreturn]] inline void throw_write_failure(const std::string& what) {
  const int err = errno;
  if (err == ENOMEM) throw std::bad_alloc();
  throw pinfeed::runtime_error(what + (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

/// Writes `bytes` to `path`, replacing it; throw_write_failure(what) when it cannot be opened or
/// written to the end.
inline void write_whole_file(const std::string& path, std::string_view bytes, const std::string& what) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !out.flush()) throw_write_failure(what);
}

}  // namespace pinfeed::detail
