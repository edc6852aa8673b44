#include "module_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <system_error>

#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed::loaders::detail {
namespace {

constexpr const char* kModuleFile = "libpinfeed_imgcodecs.so";

/// dlerror()'s text for a failure to allocate: "Cannot allocate memory" (an mmap or open that ran
/// out), "out of memory", glibc's "cannot create shared object descriptor" (its malloc of a link
/// map failed) and "cannot open shared object file" with no reason after it (its malloc of the
/// file's path failed: a file that is missing or unreadable has its errno's text after it).
/// Found by failing every allocation of a run in turn (tests/tools/tool_faults_test.sh).
bool says_no_memory(const std::string& text) {
  std::string lower(text.size(), '\0');
  std::transform(text.begin(), text.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string_view no_reason = "cannot open shared object file";
  return lower.find("cannot allocate memory") != std::string::npos || lower.find("out of memory") != std::string::npos ||
         lower.find("cannot create shared object descriptor") != std::string::npos ||
         (lower.size() >= no_reason.size() && lower.compare(lower.size() - no_reason.size(), no_reason.size(), no_reason) == 0);
}

/// Opens one candidate: the module's entry when it loads and was built by this build, else nullptr
/// with the reason appended to why.
const pinfeed_imgcodecs_v1* open_module(const std::string& path, std::string& why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    const std::string reason = e != nullptr ? e : "dlopen failed";
    if (says_no_memory(reason)) throw std::bad_alloc();
    why += (why.empty() ? "" : "; ") + path + ": " + reason;
    return nullptr;
  }
  auto entry = reinterpret_cast<pinfeed_imgcodecs_entry_fn>(dlsym(handle, "pinfeed_imgcodecs_entry_v1"));
  const pinfeed_imgcodecs_v1* m = entry != nullptr ? entry() : nullptr;
  if (m != nullptr && m->abi == PINFEED_IMGCODECS_ABI && std::strcmp(m->version, PINFEED_VERSION_STRING) == 0)
    return m;  // kept open for the life of the process
  why += (why.empty() ? "" : "; ") + path + ": " +
         (m == nullptr ? std::string("no pinfeed_imgcodecs_entry_v1 in it")
                       : "built for pinfeed " + std::string(m->version) + " (module ABI " + std::to_string(m->abi) +
                             "), not for this pinfeed " + PINFEED_VERSION_STRING + " (module ABI " +
                             std::to_string(PINFEED_IMGCODECS_ABI) + ")");
  dlclose(handle);
  return nullptr;
}

const pinfeed_imgcodecs_v1* load(std::string& why) {
  const std::vector<std::string> places = imgcodecs_module_candidates();
  for (const std::string& path : places) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      why += (why.empty() ? "" : "; ") + path + ": no such file";
      continue;
    }
    if (const pinfeed_imgcodecs_v1* m = open_module(path, why)) return m;
  }
  return nullptr;
}

std::mutex& load_mutex() {
  static std::mutex m;
  return m;
}
std::atomic<const pinfeed_imgcodecs_v1*> loaded{nullptr};
std::string* refusal = nullptr;  // guarded by load_mutex(): why the module cannot be had, once known

}  // namespace

std::vector<std::string> imgcodecs_module_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("PINFEED_IMGCODECS_MODULE"); env != nullptr && *env != '\0') {
    out.emplace_back(env);
    return out;
  }
  auto add = [&out](const std::filesystem::path& p) {
    std::string s = p.lexically_normal().string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  };
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&imgcodecs_module_candidates), &info) != 0 && info.dli_fname != nullptr &&
      *info.dli_fname != '\0') {
    const std::filesystem::path here = std::filesystem::path(info.dli_fname).parent_path();
    add(here / kModuleFile);
    add(here / "pinfeed" / kModuleFile);
    add(here / PINFEED_IMGCODECS_RELATIVE_DIR / kModuleFile);
  }
  add(std::filesystem::path(PINFEED_IMGCODECS_INSTALL_DIR) / kModuleFile);
  add(std::filesystem::path(PINFEED_IMGCODECS_BUILD_DIR) / kModuleFile);
  return out;
}

const pinfeed_imgcodecs_v1& imgcodecs_module() {
  if (const pinfeed_imgcodecs_v1* m = loaded.load(std::memory_order_acquire)) return *m;
  const std::lock_guard lock(load_mutex());
  if (const pinfeed_imgcodecs_v1* m = loaded.load(std::memory_order_relaxed)) return *m;
  if (refusal != nullptr) throw pinfeed::runtime_error(*refusal);
  std::string why;
  if (const pinfeed_imgcodecs_v1* m = load(why)) {
    loaded.store(m, std::memory_order_release);
    return *m;
  }
  std::string message = std::string("pinfeed's PNG, WebP and TIFF module ") + kModuleFile +
                        " could not be loaded (PINFEED_IMGCODECS_MODULE names its path): " + why;
  refusal = new std::string(message);  // kept: later images get the same answer without another try
  throw pinfeed::runtime_error(std::move(message));
}

}  // namespace pinfeed::loaders::detail
