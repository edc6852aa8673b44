#pragma once
// The interface between pinfeed's loaders and libpinfeed_imgcodecs.so, the module that decodes
// PNG (libpng), WebP (libwebp) and TIFF (libtiff). The module is opened on the first such image
// (module_loader.hpp), so a process that never meets one never loads those libraries.
//
// Both sides are built from one pinfeed build: the module names the version and ABI it was built
// for, and a module of another build is refused.

#include <cstddef>
#include <cstdint>

extern "C" {

/// Raised when the layout below changes.
#define PINFEED_IMGCODECS_ABI 2u

/// What decode() returns.
enum pinfeed_imgcodecs_status : int {
  pinfeed_imgcodecs_ok = 0,
  pinfeed_imgcodecs_corrupt = 1,        ///< the library refused the bytes: the message says why, in its words
  pinfeed_imgcodecs_out_of_memory = 3,  ///< an allocation inside the library failed
};

/// Where the decoded pixels go: called once with the image's size, returns rows * cols * 3 bytes
/// for 8-bit RGB. It may throw (std::bad_alloc), and the exception leaves decode() as thrown.
typedef unsigned char* (*pinfeed_imgcodecs_output)(void* context, int rows, int cols);

struct pinfeed_imgcodecs_v1 {
  std::uint32_t abi;       ///< PINFEED_IMGCODECS_ABI of the module's build
  const char* version;     ///< PINFEED_VERSION_STRING of the module's build
  const char* libraries;   ///< the libraries it was built with, for messages
  /// Decodes a PNG, WebP or TIFF into 8-bit RGB through output, the pixels as stored (no EXIF
  /// orientation, and a TIFF's rows as the file lays them out). The message (message_size
  /// bytes, NUL-terminated) is set for every status but ok; nothing is written to stderr.
  int (*decode)(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context,
                char* message, std::size_t message_size);
};

/// The module's one exported symbol.
const pinfeed_imgcodecs_v1* pinfeed_imgcodecs_entry_v1();
typedef const pinfeed_imgcodecs_v1* (*pinfeed_imgcodecs_entry_fn)();
}
