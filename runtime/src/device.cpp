#include "pinfeed/runtime/device.hpp"

#include <cstdio>

#include "pinfeed/runtime/cuda_api.hpp"
#if PINFEED_WITH_CUDA
#include <cuda.h>
#endif
#include "pinfeed/runtime/cuda_handles.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"

#include "detail/parse_index.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace {

cuda_status discover() {
  cuda_status s;
  cudaRuntimeGetVersion(&s.runtime_version);
  if (cudaDriverGetVersion(&s.driver_version) != cudaSuccess) s.driver_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    s.reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return s;
  }
  if (count == 0) {
    s.reason = "no CUDA device present";
    return s;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                  static_cast<unsigned>(p.pciBusID), static_cast<unsigned>(p.pciDeviceID));
    s.devices.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.asyncEngineCount,
                         p.multiProcessorCount, bus});
  }
  s.usable = !s.devices.empty();
  if (!s.usable) s.reason = "no CUDA device could be queried";
  return s;
}

}  // namespace

namespace detail {
bool thread_has_cuda_context() noexcept {
#if PINFEED_WITH_CUDA && CUDART_VERSION >= 12050
  // The runtime API cannot tell; the driver's cuCtxGetCurrent can, reached through the runtime so
  // that nothing links the driver library directly.
  using get_current = CUresult(CUDAAPI*)(CUcontext*);
  static const get_current fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 4000, cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return get_current{nullptr};
    }
    return reinterpret_cast<get_current>(p);
  }();
  if (fn == nullptr) return true;  // cannot tell: treat it as set, and restore it
  CUcontext ctx = nullptr;
  return fn(&ctx) == CUDA_SUCCESS && ctx != nullptr;
#else
  return true;
#endif
}
}  // namespace detail

int multiprocessor_count(int device) noexcept {
  const auto& devices = cuda_devices().devices;
  for (const auto& d : devices)
    if (d.index == device) return d.multiprocessors > 0 ? d.multiprocessors : 1;
  return 1;
}

const cuda_status& cuda_devices() {
  static const cuda_status status = [] {
    cuda_status s = discover();
    if (s.usable) {
      log(log_level::info, std::to_string(s.devices.size()) + " CUDA device(s); device 0: " +
                               s.devices[0].name);
    } else {
      log(log_level::info, "no usable CUDA device (" + s.reason + "); running CPU-only");
    }
    return s;
  }();
  return status;
}

std::string device_choice::to_string() const {
  return is_cuda() ? "cuda:" + std::to_string(index) : "cpu";
}

device_spec::device_spec(std::string_view text) {
  if (text == "auto") return;
  if (text == "cpu") {
    kind_ = kind::cpu;
  } else if (text == "cuda") {
    kind_ = kind::cuda;
  } else if (text == "local_rank") {
    kind_ = kind::local_rank;
  } else if (text.starts_with("cuda:")) {
    const long idx = detail::parse_index(text.substr(5));
    if (idx < 0)
      throw pinfeed::invalid_argument("device '" + std::string(text) + "': expected cuda:N with N >= 0");
    kind_ = kind::cuda;
    index_ = static_cast<int>(idx);
  } else {
    throw pinfeed::invalid_argument("unknown device '" + std::string(text) +
                                "' (expected auto, cpu, cuda, cuda:N or local_rank)");
  }
}

device_spec device_spec::cuda(int index) {
  if (index < 0) throw pinfeed::invalid_argument("device cuda:" + std::to_string(index) + ": the index must be >= 0");
  device_spec s;
  s.kind_ = kind::cuda;
  s.index_ = index;
  return s;
}

std::string device_spec::to_string() const {
  switch (kind_) {
    case kind::automatic: return "auto";
    case kind::cpu: return "cpu";
    case kind::cuda: return "cuda:" + std::to_string(index_);
    case kind::local_rank: return "local_rank";
  }
  return "auto";
}

device_choice resolve_device(const device_spec& request) {
  const std::string what = request.to_string();
  auto cuda_index = [](int index, const std::string& what) {
    const auto& s = cuda_devices();
    if (!s.usable)
      throw pinfeed::runtime_error("device '" + what + "' requested but no CUDA device is usable (" + s.reason + ")");
    if (index < 0 || index >= static_cast<int>(s.devices.size()))
      throw pinfeed::runtime_error("device '" + what + "': CUDA device " + std::to_string(index) + " does not exist (" +
                               std::to_string(s.devices.size()) + " present)");
    return device_choice{device_choice::kind::cuda, index};
  };
  switch (request.which()) {
    case device_spec::kind::cpu:
      return {};
    case device_spec::kind::automatic: {
      if (!cuda_devices().usable) return {};
      const int r = local_rank_from_env();  // checked even when unused: a bad value is named
      // A rank that sees one device (a launcher gave each its own) takes it, whatever its rank.
      if (cuda_devices().devices.size() == 1) return cuda_index(0, "auto");
      return cuda_index(r < 0 ? 0 : r, r < 0 ? "auto" : "auto (local rank)");
    }
    case device_spec::kind::cuda:
      return cuda_index(request.index(), what);
    case device_spec::kind::local_rank: {
      const int r = local_rank_from_env();
      if (r < 0)
        throw pinfeed::runtime_error("device 'local_rank': none of LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID is set");
      return cuda_index(r, what);
    }
  }
  return {};
}

}  // namespace pinfeed
