#pragma once
// The machine's topology as the node plan needs it, read through hwloc: the NUMA nodes with their
// CPUs, and every NVIDIA GPU with the CPUs and NUMA nodes close to it.

#include <optional>
#include <string>
#include <vector>

namespace pinfeed::detail {

struct topology_facts {
  struct gpu {
    std::string bus_id;  ///< "0000:3b:00.0", lower-case hex
    /// The cores of its closest non-I/O ancestor (a package, a NUMA node), each as its hardware
    /// threads (OS indices); empty where that ancestor is the whole machine (locality unknown).
    std::vector<std::vector<unsigned>> close_cores;
    std::vector<unsigned> numa_nodes;  ///< the NUMA nodes (OS indices) of that ancestor
  };
  std::size_t numa_nodes = 0;  ///< of the machine
  std::vector<gpu> gpus;  ///< NVIDIA display or 3D controllers (PCI vendor 0x10de, class 0x03), by bus id
};

/// Loads the topology: this machine's (xml unset), or the hwloc XML text `xml` (tests). Nullopt
/// with `why` set when hwloc cannot load it. hwloc's libpciaccess, OpenCL, CUDA, NVML and other GPU
/// plugins are not used: PCI devices come from Linux's sysfs, and no GPU library is loaded.
std::optional<topology_facts> read_topology(const std::optional<std::string>& xml, std::string& why);

}  // namespace pinfeed::detail
