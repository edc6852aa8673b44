// The machine a doctor report came from, as `pinfeed info` describes it.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>

#include "pinfeed/config.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed {

namespace {

std::string cuda_version(int v) {
  return v ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "none";
}

std::string gpus(const cuda_status& s) {
  if (!s.usable) return "none (" + s.reason + ")";
  std::string out;
  for (const auto& d : s.devices) {
    char line[256];
    std::snprintf(line, sizeof line, "%s[%d] %s, sm_%d%d, %.1f GiB, %d SMs", out.empty() ? "" : "; ", d.index, d.name.c_str(),
                  d.cc_major, d.cc_minor, d.total_memory / 1073741824.0, d.multiprocessors);
    out += line;
  }
  return out;
}

}  // namespace

std::vector<machine_fact> describe_machine() {
  const cuda_status& s = cuda_devices();
  std::vector<machine_fact> f;
  f.push_back({"pinfeed", std::string(PINFEED_VERSION_STRING) + (PINFEED_WITH_CUDA ? " (CUDA build)" : " (CPU-only build)")});
  f.push_back({"CPU", cpu_model()});
  f.push_back({"hardware threads", std::to_string(std::thread::hardware_concurrency())});
  f.push_back({"GPU", gpus(s)});
  f.push_back({"CUDA runtime", cuda_version(s.runtime_version) + " (built with " + std::to_string(PINFEED_CUDART_VERSION / 1000) +
                                   "." + std::to_string((PINFEED_CUDART_VERSION % 1000) / 10) + ")"});
  f.push_back({"CUDA driver", cuda_version(s.driver_version)});
  f.push_back({"TBB", std::string(TBB_VERSION_STRING) + ", default concurrency " + std::to_string(tbb::info::default_concurrency())});
  f.push_back({"SIMD", to_string(simd_level_in_use()) + " in use (CPU supports " + to_string(cpu_simd_support()) +
                           (std::getenv("PINFEED_SIMD") ? ", capped by PINFEED_SIMD)" : ")")});
  f.push_back({"JPEG Huffman", loaders::jpeg_huffman_in_use().reason});
#if defined(DLPACK_MAJOR_VERSION)
  f.push_back({"DLPack", std::to_string(DLPACK_MAJOR_VERSION) + "." + std::to_string(DLPACK_MINOR_VERSION) +
                             " (classic and versioned views)"});
#else
  f.push_back({"DLPack", std::to_string(DLPACK_VERSION / 100) + "." + std::to_string(DLPACK_VERSION % 100 / 10) +
                             " (classic views; the versioned ones need a DLPack 1.x header)"});
#endif
  f.push_back({"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                                    "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH)});
  return f;
}

}  // namespace pinfeed
