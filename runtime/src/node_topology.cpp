#include "detail/node_topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace pinfeed::detail {
namespace {

struct topology_deleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};

std::vector<unsigned> members(hwloc_const_bitmap_t set) {
  std::vector<unsigned> out;
  if (set == nullptr || hwloc_bitmap_iszero(set)) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(static_cast<unsigned>(i));
  return out;
}

}  // namespace

std::optional<topology_facts> read_topology(const std::optional<std::string>& xml, std::string& why) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    why = "hwloc_topology_init failed";
    return std::nullopt;
  }
  std::unique_ptr<hwloc_topology, topology_deleter> topo(raw);
  // PCI devices from sysfs (the linux component), not libpciaccess; no GPU library is loaded.
  (void)hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  for (const char* plugin : {"opencl", "cuda", "nvml", "rsmi", "levelzero", "gl"})
    (void)hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  (void)hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (xml && hwloc_topology_set_xmlbuffer(raw, xml->data(), static_cast<int>(xml->size()) + 1) != 0) {
    why = "hwloc cannot read the topology XML given";
    return std::nullopt;
  }
  if (hwloc_topology_load(raw) != 0) {
    why = xml ? "hwloc cannot load the topology XML given" : "hwloc cannot load this machine's topology";
    return std::nullopt;
  }
  topology_facts f;
  f.numa_nodes = static_cast<std::size_t>(std::max(0, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE)));
  for (hwloc_obj_t d = hwloc_get_next_pcidev(raw, nullptr); d != nullptr; d = hwloc_get_next_pcidev(raw, d)) {
    const auto& pci = d->attr->pcidev;
    if (pci.vendor_id != 0x10de || (pci.class_id >> 8) != 0x03) continue;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci.domain), static_cast<unsigned>(pci.bus),
                  static_cast<unsigned>(pci.dev), static_cast<unsigned>(pci.func));
    const hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(raw, d);
    topology_facts::gpu g{bus, {}, members(near ? near->nodeset : nullptr)};
    // An ancestor that is the whole machine says nothing of where the GPU is.
    if (near != nullptr && near->cpuset != nullptr && !hwloc_bitmap_iszero(near->cpuset) &&
        !hwloc_bitmap_isequal(near->cpuset, hwloc_topology_get_topology_cpuset(raw))) {
      // Whole cores (all their hardware threads) go to one rank: two ranks never share a core.
      const int depth = hwloc_get_type_depth(raw, HWLOC_OBJ_CORE);
      if (depth >= 0) {
        for (hwloc_obj_t c = hwloc_get_next_obj_inside_cpuset_by_depth(raw, near->cpuset, depth, nullptr); c != nullptr;
             c = hwloc_get_next_obj_inside_cpuset_by_depth(raw, near->cpuset, depth, c))
          g.close_cores.push_back(members(c->cpuset));
      } else {
        for (const unsigned pu : members(near->cpuset)) g.close_cores.push_back({pu});  // no core level: PUs
      }
    } else {
      g.numa_nodes.clear();
    }
    f.gpus.push_back(std::move(g));
  }
  std::sort(f.gpus.begin(), f.gpus.end(), [](const auto& a, const auto& b) { return a.bus_id < b.bus_id; });
  return f;
}

}  // namespace pinfeed::detail
