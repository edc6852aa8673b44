#pragma once
// Test helper: hwloc XML topologies of machines larger than the one the tests run on: `packages`
// packages of `cores` cores (one PU each, numbered package by package), each package its NUMA node
// and a host bridge with `gpus_per_package` NVIDIA GPUs (PCI class 0302, buses 0x10, 0x11, ...).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
namespace pinfeed::test::topology_xml {
inline std::string bitmap(const std::vector<unsigned>& bits) {
  unsigned most = 0;
  for (const unsigned b : bits) most = std::max(most, b);
  std::vector<unsigned> w(most / 32 + 1, 0);
  for (const unsigned b : bits) w[b / 32] |= 1u << (b % 32);
  std::string s;
  for (std::size_t k = w.size(); k-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", w[k]);
    s += s.empty() ? buf : std::string(",") + buf;
  }
  return s;
}
inline std::vector<unsigned> range(unsigned first, unsigned count) {
  std::vector<unsigned> v;
  for (unsigned i = 0; i < count; ++i) v.push_back(first + i);
  return v;
}
inline std::string sets(const std::vector<unsigned>& cpus, const std::vector<unsigned>& nodes) {
  const std::string c = bitmap(cpus), n = bitmap(nodes);
  return " cpuset=\"" + c + "\" complete_cpuset=\"" + c + "\" nodeset=\"" + n + "\" complete_nodeset=\"" + n + "\"";
}
/// `threads` hardware threads a core, numbered as Linux does: thread t of core c (counted over the
/// machine) is CPU c + t x (all cores), so a core's siblings are far apart.
inline std::string machine(unsigned packages, unsigned cores, unsigned gpus_per_package, unsigned threads = 1) {
  unsigned gp = 1;
  auto id = [&] { return " gp_index=\"" + std::to_string(gp++) + "\""; };
  const unsigned all = packages * cores;
  auto cpus_of = [&](unsigned first_core, unsigned count) {
    std::vector<unsigned> v;
    for (unsigned t = 0; t < threads; ++t)
      for (unsigned c = first_core; c < first_core + count; ++c) v.push_back(c + t * all);
    return v;
  };
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n";
  x += "<object type=\"Machine\" os_index=\"0\"" + sets(cpus_of(0, all), range(0, packages)) + " allowed_cpuset=\"" +
       bitmap(cpus_of(0, all)) + "\" allowed_nodeset=\"" + bitmap(range(0, packages)) + "\"" + id() + ">\n";
  unsigned bus = 0x10;
  for (unsigned p = 0; p < packages; ++p) {
    const auto pkg = cpus_of(p * cores, cores);
    x += " <object type=\"Package\" os_index=\"" + std::to_string(p) + "\"" + sets(pkg, {p}) + id() + ">\n";
    x += "  <object type=\"NUMANode\" os_index=\"" + std::to_string(p) + "\"" + sets(pkg, {p}) + id() +
         " local_memory=\"68719476736\"/>\n";
    for (unsigned c = 0; c < cores; ++c) {
      const unsigned core = p * cores + c;
      x += "  <object type=\"Core\" os_index=\"" + std::to_string(c) + "\"" + sets(cpus_of(core, 1), {p}) + id() + ">";
      for (unsigned t = 0; t < threads; ++t)
        x += "<object type=\"PU\" os_index=\"" + std::to_string(core + t * all) + "\"" + sets({core + t * all}, {p}) + id() + "/>";
      x += "</object>\n";
    }
    if (gpus_per_package) {
      char span[32];
      std::snprintf(span, sizeof span, "0000:[%02x-%02x]", bus, bus + gpus_per_package - 1);
      x += "  <object type=\"Bridge\"" + id() + " bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"" + span + "\">\n";
      for (unsigned g = 0; g < gpus_per_package; ++g, ++bus) {
        char busid[32];
        std::snprintf(busid, sizeof busid, "0000:%02x:00.0", bus);
        x += "   <object type=\"PCIDev\"" + id() + " pci_busid=\"" + busid +
             "\" pci_type=\"0302 [10de:2335] [10de:18be] a1\" pci_link_speed=\"0.0\"/>\n";
      }
      x += "  </object>\n";
    }
    x += " </object>\n";
  }
  x += "</object>\n</topology>\n";
  return x;
}
}  // namespace pinfeed::test::topology_xml
