#include "pinfeed/runtime/host_info.hpp"

#include <time.h>
#include <unistd.h>


#include <algorithm>
#include <fstream>

namespace pinfeed {
namespace {

std::string trimmed_value(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) return {};
  const auto begin = line.find_first_not_of(" \t", colon + 1);
  return begin == std::string::npos ? std::string() : line.substr(begin);
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return trimmed_value(line);  // x86
    if (line.rfind("CPU implementer", 0) == 0 && implementer.empty()) implementer = trimmed_value(line);
    if (line.rfind("CPU part", 0) == 0 && part.empty()) part = trimmed_value(line);
  }
  if (!implementer.empty()) return "Arm implementer " + implementer + " part " + part;  // aarch64
  return "unknown";
}

}  // namespace

const std::string& cpu_model() {
  static const std::string model = read_cpu_model();
  return model;
}

std::size_t physical_memory_bytes() noexcept {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

double process_cpu_seconds() noexcept {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace pinfeed
