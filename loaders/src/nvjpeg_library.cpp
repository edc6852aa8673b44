#include "nvjpeg_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <iterator>
#include <optional>
#include <type_traits>
#include <vector>

#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders::detail {

std::string nvjpeg::status_name(int status) {
  static const char* const names[] = {"SUCCESS",        "NOT_INITIALIZED",  "INVALID_PARAMETER",
                                      "BAD_JPEG",       "JPEG_NOT_SUPPORTED", "ALLOCATOR_FAILURE",
                                      "EXECUTION_FAILED", "ARCH_MISMATCH",  "INTERNAL_ERROR",
                                      "IMPLEMENTATION_NOT_SUPPORTED", "INCOMPLETE_BITSTREAM"};
  const std::string name = status >= 0 && status < static_cast<int>(std::size(names)) ? names[status] : "an unknown status";
  return "NVJPEG_STATUS_" + name + " (" + std::to_string(status) + ")";
}

namespace {

/// The files load_nvjpeg() tries.
std::vector<std::string> library_files() {
  if (const char* named = std::getenv("PINFEED_NVJPEG_LIBRARY"); named != nullptr && *named != '\0') return {named};
  return {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11", "libnvjpeg.so"};
}

}  // namespace

nvjpeg_library::~nvjpeg_library() {
  if (so != nullptr) dlclose(so);
}

std::unique_ptr<nvjpeg_library> load_nvjpeg_from(const std::vector<std::string>& files, std::string& why) {
  void* so = nullptr;
  std::string path;
  for (const std::string& f : files) {
    so = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (so != nullptr) {
      path = f;
      break;
    }
    const char* e = dlerror();
    why += (why.empty() ? "" : "; ") + std::string(e != nullptr ? e : f + ": dlopen failed");
  }
  if (so == nullptr) return nullptr;
  auto lib = std::make_unique<nvjpeg_library>();
  lib->so = so;
  lib->path = path;
  std::string missing;
  const auto bind = [&](auto& fn, const char* name) {
    void* p = dlsym(so, name);
    if (p == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind(lib->create_ex, "nvjpegCreateEx");
  bind(lib->destroy, "nvjpegDestroy");
  bind(lib->state_create, "nvjpegJpegStateCreate");
  bind(lib->state_destroy, "nvjpegJpegStateDestroy");
  bind(lib->batched_initialize, "nvjpegDecodeBatchedInitialize");
  bind(lib->batched, "nvjpegDecodeBatched");
  if (!missing.empty()) {
    why = path + " lacks " + missing;
    return nullptr;
  }
  return lib;
}

const nvjpeg_library* load_nvjpeg(std::string& why) {
  static std::string failure;
  // Kept for the process: nvJPEG's handles may outlive any owner here.
  static const nvjpeg_library* const lib = load_nvjpeg_from(library_files(), failure).release();
  if (lib == nullptr) why = failure;
  return lib;
}

std::unique_ptr<nvjpeg_decoder> nvjpeg_decoder::open(int device, const nvjpeg_library* lib) {
  std::string why;
  if (lib == nullptr) lib = load_nvjpeg(why);
  if (lib == nullptr) throw pinfeed::runtime_error("nvJPEG could not be loaded: " + why);
  // On the loader's device for the calls here, and back to the caller's after (a loader is made on
  // the user's thread).
  std::optional<device_guard> on_device;
  if (device >= 0) on_device.emplace(device);
  std::unique_ptr<nvjpeg_decoder> d(new nvjpeg_decoder());
  d->lib_ = lib;
  d->device_ = device;
  // The hardware backend first: its engines take the entropy decoding off the host's cores too.
  const int hw = lib->create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &d->first_);
  if (hw == nvjpeg::kSuccess) {
    d->hardware_ = true;
    return d;
  }
  d->first_ = nullptr;
  const int hybrid = lib->create_ex(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &d->first_);
  if (hybrid == nvjpeg::kSuccess) return d;
  d->first_ = nullptr;
  throw pinfeed::runtime_error("nvjpegCreateEx (" + lib->path + ") failed on CUDA device " + std::to_string(device) +
                               ": hardware backend " + nvjpeg::status_name(hw) + ", hybrid backend " + nvjpeg::status_name(hybrid));
}

namespace {
/// The device its handles were made on, current while they are destroyed (where it can be made so).
void guard_quietly(std::optional<device_guard>& g, int device) noexcept {
  try {
    if (device >= 0) g.emplace(device);
  } catch (...) {
  }
}
}  // namespace

nvjpeg_decoder::~nvjpeg_decoder() {
  if (lib_ == nullptr) return;
  std::optional<device_guard> on_device;
  guard_quietly(on_device, device_);
  if (hybrid_ != nullptr) (void)lib_->destroy(hybrid_);
  if (first_ != nullptr) (void)lib_->destroy(first_);
}

nvjpeg::handle_type* nvjpeg_decoder::hybrid_handle() const {
  std::lock_guard lock(hybrid_mutex_);
  if (hybrid_ == nullptr) {
    const int st = lib_->create_ex(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &hybrid_);
    if (st != nvjpeg::kSuccess) {
      hybrid_ = nullptr;
      throw pinfeed::runtime_error("nvjpegCreateEx (hybrid backend, the hardware one's fallback) failed on CUDA device " +
                                   std::to_string(device_) + ": " + nvjpeg::status_name(st));
    }
  }
  return hybrid_;
}

std::unique_ptr<nvjpeg_decoder::state> nvjpeg_decoder::make_state() const {
  std::unique_ptr<state> s(new state(*this));
  if (const int st = lib_->state_create(first_, &s->first_); st != nvjpeg::kSuccess) {
    s->first_ = nullptr;
    throw pinfeed::runtime_error("nvjpegJpegStateCreate failed: " + nvjpeg::status_name(st));
  }
  return s;
}

nvjpeg_decoder::state::~state() {
  std::optional<device_guard> on_device;
  guard_quietly(on_device, d_.device_);
  if (hybrid_ != nullptr) (void)d_.lib_->state_destroy(hybrid_);
  if (first_ != nullptr) (void)d_.lib_->state_destroy(first_);
}

void nvjpeg_decoder::decode(state& s, const unsigned char* const* data, const std::size_t* lengths, nvjpeg::image* out,
                            std::size_t count, cudaStream_t stream) const {
  if (count == 0) return;
  const int n = static_cast<int>(count);
  // One handle and state: initialized for this batch size (again where it changed), then the batch.
  const auto run = [&](nvjpeg::handle_type* h, nvjpeg::state_type* st, int& ready) {
    if (ready != n) {
      if (const int r = lib_->batched_initialize(h, st, n, 1, nvjpeg::kOutputRgbInterleaved); r != nvjpeg::kSuccess) return r;
      ready = n;
    }
    return lib_->batched(h, st, data, lengths, out, stream);
  };
  const int first = run(first_, s.first_, s.batch_first_);
  if (first == nvjpeg::kSuccess) return;
  s.batch_first_ = 0;  // a failed batch resets the state: initialize it again next time
  if (!hardware_)
    throw pinfeed::runtime_error("nvjpegDecodeBatched (hybrid backend) failed on " + std::to_string(count) +
                                 " images: " + nvjpeg::status_name(first));
  // The hardware backend refused the batch (a file its engines do not take): the hybrid one.
  nvjpeg::handle_type* h = hybrid_handle();
  if (s.hybrid_ == nullptr)
    if (const int st = lib_->state_create(h, &s.hybrid_); st != nvjpeg::kSuccess) {
      s.hybrid_ = nullptr;
      throw pinfeed::runtime_error("nvjpegJpegStateCreate (hybrid backend) failed: " + nvjpeg::status_name(st));
    }
  const int second = run(h, s.hybrid_, s.batch_hybrid_);
  if (second == nvjpeg::kSuccess) return;
  s.batch_hybrid_ = 0;
  throw pinfeed::runtime_error("nvjpegDecodeBatched failed on " + std::to_string(count) + " images: hardware backend " +
                               nvjpeg::status_name(first) + ", hybrid backend " + nvjpeg::status_name(second));
}

}  // namespace pinfeed::loaders::detail
