#pragma once
// Opens libpinfeed_imgcodecs.so (plugin_abi.hpp) the first time an image needs it.

#include <string>
#include <vector>

#include "plugin_abi.hpp"

namespace pinfeed::loaders::detail {

/// The module, opened on the first call and kept for the life of the process; safe from any thread.
/// Looks, in order, at PINFEED_IMGCODECS_MODULE (a file path: then nowhere else), next to the
/// executable or library holding this code (and in its pinfeed/ and ../lib/pinfeed/), the directory
/// pinfeed installs it to, and the build tree. Throws pinfeed::runtime_error that names each place
/// and why it failed (the same error again on later calls, without another try), std::bad_alloc
/// when opening it ran out of memory (tried again on the next call).
const pinfeed_imgcodecs_v1& imgcodecs_module();

/// The places imgcodecs_module() looks at, in order.
std::vector<std::string> imgcodecs_module_candidates();

}  // namespace pinfeed::loaders::detail
