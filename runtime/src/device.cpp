#include "pinfeed/runtime/device.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"

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
    s.devices.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.asyncEngineCount,
                         p.multiProcessorCount});
  }
  s.usable = !s.devices.empty();
  if (!s.usable) s.reason = "no CUDA device could be queried";
  return s;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0) throw std::invalid_argument(std::string(name) + "='" + v + "' is not a rank");
  return static_cast<int>(x);
}

}  // namespace

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

int local_rank_from_env() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const int r = env_int(name);
    if (r >= 0) return r;
  }
  return -1;
}

device_choice resolve_device(std::string_view request) {
  auto cuda_index = [](int index, std::string_view what) {
    const auto& s = cuda_devices();
    if (!s.usable)
      throw std::runtime_error("device '" + std::string(what) + "' requested but no CUDA device is usable (" +
                               s.reason + ")");
    if (index < 0 || index >= static_cast<int>(s.devices.size()))
      throw std::runtime_error("device '" + std::string(what) + "': CUDA device " + std::to_string(index) +
                               " does not exist (" + std::to_string(s.devices.size()) + " present)");
    return device_choice{device_choice::kind::cuda, index};
  };
  if (request == "cpu") return {};
  if (request == "auto") {
    if (!cuda_devices().usable) return {};
    const int r = local_rank_from_env();
    return cuda_index(r < 0 ? 0 : r, r < 0 ? "auto" : "auto (local rank)");
  }
  if (request == "cuda") return cuda_index(0, request);
  if (request == "local_rank") {
    const int r = local_rank_from_env();
    if (r < 0)
      throw std::runtime_error(
          "device 'local_rank': none of LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID is set");
    return cuda_index(r, request);
  }
  if (request.starts_with("cuda:")) {
    const std::string digits(request.substr(5));
    char* end = nullptr;
    const long idx = digits.empty() ? -1 : std::strtol(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || idx < 0)
      throw std::invalid_argument("device '" + std::string(request) + "': expected cuda:N with N >= 0");
    return cuda_index(static_cast<int>(idx), request);
  }
  throw std::invalid_argument("unknown device '" + std::string(request) +
                              "' (expected auto, cpu, cuda, cuda:N or local_rank)");
}

}  // namespace pinfeed
