#pragma once
// The interface between pinfeed's loaders and libpinfeed_imgcodecs.so, the module that decodes
// PNG, WebP, BMP, TIFF, PNM and CMYK JPEGs through OpenCV imgcodecs. The module is opened on the
// first such image (plugin.hpp), so a process that never meets one never loads imgcodecs and the
// libraries it pulls in (GDAL, HDF5, poppler, GDCM, ... on Debian), nor runs their static
// constructors.
//
// Both sides are built from one pinfeed build: the module names the version and ABI it was built
// for, and a module of another build is refused.

#include <cstddef>
#include <cstdint>

extern "C" {

/// Raised when the layout below changes.
#define PINFEED_IMGCODECS_ABI 1u

/// What decode() returns.
enum pinfeed_imgcodecs_status : int {
  pinfeed_imgcodecs_ok = 0,
  pinfeed_imgcodecs_corrupt = 1,  ///< the decoder refused the bytes: the message says why
  pinfeed_imgcodecs_empty = 2,    ///< the decoder returned no image, twice (corrupt, truncated or not an image)
};

/// Where the decoded pixels go: called once with the image's size, returns rows * cols * 3 bytes
/// for 8-bit RGB. It may throw (std::bad_alloc), and the exception leaves decode() as thrown.
typedef unsigned char* (*pinfeed_imgcodecs_output)(void* context, int rows, int cols);

struct pinfeed_imgcodecs_v1 {
  std::uint32_t abi;       ///< PINFEED_IMGCODECS_ABI of the module's build
  const char* version;     ///< PINFEED_VERSION_STRING of the module's build
  const char* opencv;      ///< the OpenCV version the module runs with
  /// Decodes bytes as OpenCV's imdecode(IMREAD_COLOR | IMREAD_IGNORE_ORIENTATION) does, into 8-bit
  /// RGB through output. The
  /// message (message_size bytes, NUL-terminated) is set for pinfeed_imgcodecs_corrupt.
  int (*decode)(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context,
                char* message, std::size_t message_size);
};

/// The module's one exported symbol.
const pinfeed_imgcodecs_v1* pinfeed_imgcodecs_entry_v1();
typedef const pinfeed_imgcodecs_v1* (*pinfeed_imgcodecs_entry_fn)();
}
