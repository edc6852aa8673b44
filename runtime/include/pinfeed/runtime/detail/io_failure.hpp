#pragma once
// Why a file could not be read or written, for messages (internal). A stream whose buffer could
// not be allocated fails its write like a full disk does; errno tells them apart (ENOMEM), and
// running out of memory is std::bad_alloc everywhere in pinfeed, never a file error.

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::detail {

/// Throws for `what` ("cannot write config 'x'") after a stream failed: std::bad_alloc where errno
/// says memory ran out, else pinfeed::runtime_error with errno's reason appended where there is
/// one. Set errno to 0 before the stream's work, so that an older errno is not taken for its.
[[noreturn]] inline void throw_io_failure(const std::string& what) {
  const int err = errno;
  if (err == ENOMEM) throw std::bad_alloc();
  throw pinfeed::runtime_error(what + (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

}  // namespace pinfeed::detail
