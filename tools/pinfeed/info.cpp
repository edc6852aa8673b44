// pinfeed info: devices, CUDA status, pinned memory, TBB threads, library versions.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>

#include "commands.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/config.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed::tool {
namespace {

std::string cuda_version(int v) {
  return v ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "none";
}

/// The node plan: this process's share of the node, which the loader's defaults follow.
void print_plan() {
  const std::string plan = this_node_plan().describe();
  std::printf("node plan\n");
  for (std::size_t at = 0; at < plan.size();) {
    const auto end = plan.find('\n', at);
    std::printf("  %s\n", plan.substr(at, end - at).c_str());
    at = end == std::string::npos ? plan.size() : end + 1;
  }
}

/// `pinfeed info --json`: the node plan, the CPU and the devices, as one JSON object.
int info_json() {
  const auto& s = cuda_devices();
  nlohmann::json j;
  j["pinfeed"] = PINFEED_VERSION_STRING;
  j["cpu"] = cpu_model();
  j["node_plan"] = nlohmann::json::parse(this_node_plan().to_json());
  j["cuda"] = {{"usable", s.usable}, {"devices", s.devices.size()}, {"reason", s.usable ? std::string() : s.reason}};
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

int cmd_info(bool json) {
  if (json) return info_json();
  const auto& s = cuda_devices();
  std::printf("pinfeed %s (%s)\n", PINFEED_VERSION_STRING, PINFEED_WITH_CUDA ? "CUDA build" : "CPU-only build, PINFEED_WITH_CUDA=OFF");
  std::printf("CUDA runtime      %s (built with %d.%d)\n", cuda_version(s.runtime_version).c_str(),
              PINFEED_CUDART_VERSION / 1000, (PINFEED_CUDART_VERSION % 1000) / 10);
  std::printf("CUDA driver       %s\n", cuda_version(s.driver_version).c_str());
  if (s.usable) {
    std::printf("CUDA devices      %zu\n", s.devices.size());
    for (const auto& d : s.devices)
      std::printf("  [%d] %s, sm_%d%d, %.1f GiB, %d SMs, %d copy engine(s)\n", d.index, d.name.c_str(), d.cc_major,
                  d.cc_minor, d.total_memory / 1073741824.0, d.multiprocessors, d.async_engines);
  } else {
    std::printf("CUDA devices      none (%s): CPU-only mode, batches are delivered in host memory\n",
                s.reason.c_str());
  }
  bool pinned_ok = false;
  std::string pinned_why;
  if (s.usable) {
    try {
      host_buffer probe(1 << 20, true);
      pinned_ok = true;
    } catch (const std::exception& e) {
      pinned_why = e.what();
    }
  } else {
    pinned_why = "needs a CUDA device; page-aligned pageable memory is used instead";
  }
  std::printf("pinned memory     %s%s%s\n", pinned_ok ? "available" : "unavailable", pinned_ok ? "" : " - ",
              pinned_why.c_str());
  std::printf("TBB               %s, default concurrency %d threads\n", TBB_VERSION_STRING,
              tbb::info::default_concurrency());
  std::printf("hardware threads  %u\n", std::thread::hardware_concurrency());
  std::printf("CPU               %s\n", cpu_model().c_str());
  print_plan();
  std::printf("JPEG Huffman      %s\n", loaders::jpeg_huffman_in_use().reason.c_str());
  std::printf("SIMD              %s in use (CPU supports %s%s)\n", to_string(simd_level_in_use()).c_str(),
              to_string(cpu_simd_support()).c_str(),
              std::getenv("PINFEED_SIMD") ? ", capped by PINFEED_SIMD" : "");
#if defined(DLPACK_MAJOR_VERSION)
  std::printf("DLPack            %d.%d (classic and versioned views)\n", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
#else
  std::printf("DLPack            %d.%d (classic views; the versioned ones need a DLPack 1.x header)\n",
              DLPACK_VERSION / 100, DLPACK_VERSION % 100 / 10);
#endif
  std::printf("nlohmann_json     %d.%d.%d\n", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
              NLOHMANN_JSON_VERSION_PATCH);
  std::printf("CLI11             %s\n", CLI11_VERSION);
  return 0;
}

}  // namespace

void add_info(CLI::App& app, command_list& out) {
  auto* info = app.add_subcommand("info", "devices, CUDA status, pinned memory, TBB threads, the node plan, library versions");
  auto json = std::make_shared<bool>(false);
  info->add_flag("--json", *json, "print the node plan, the CPU and the devices as JSON");
  out.push_back({info, [json] { return cmd_info(*json); }, {}});
}

}  // namespace pinfeed::tool
