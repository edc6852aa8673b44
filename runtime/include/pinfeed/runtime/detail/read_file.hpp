#pragma once
// Internal (not installed): reading a whole small file (a config, a pipeline file, a file list,
// a saved loader state) the one way: out of memory is std::bad_alloc, never "cannot be opened".

#include <cerrno>
#include <fstream>
#include <iterator>
#include <new>
#include <optional>
#include <string>

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

}  // namespace pinfeed::detail
