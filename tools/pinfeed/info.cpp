// pinfeed info: devices, CUDA status, pinned memory, TBB threads, library versions.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/config.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed::tool {
namespace {

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

/// The facts called `names`, one a line as info prints them.
void print_facts(const std::vector<machine_fact>& facts, std::initializer_list<const char*> names) {
  for (const char* want : names)
    for (const machine_fact& f : facts)
      if (f.name == want) std::printf("%-17s %s\n", f.name.c_str(), f.value.c_str());
}

int cmd_info(bool json) {
  if (json) return info_json();
  const auto& s = cuda_devices();
  const std::vector<machine_fact> facts = describe_machine();
  std::printf("pinfeed %s (%s)\n", PINFEED_VERSION_STRING, PINFEED_WITH_CUDA ? "CUDA build" : "CPU-only build, PINFEED_WITH_CUDA=OFF");
  print_facts(facts, {"CUDA runtime", "CUDA driver"});
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
  print_facts(facts, {"TBB", "hardware threads", "CPU"});
  print_plan();
  print_facts(facts, {"JPEG Huffman", "SIMD", "DLPack", "nlohmann_json"});
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
