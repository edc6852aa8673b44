#include "bench_rows.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pinfeed/runtime/host_info.hpp"

namespace pinfeed::bench {

nlohmann::json with_host(nlohmann::json row) {
  row["cpu"] = cpu_model();
  row["simd"] = to_string(simd_level_in_use());
#if defined(__clang__)
  row["compiler"] = "clang " __clang_version__;
#elif defined(__GNUC__)
  row["compiler"] = "gcc " __VERSION__;
#else
  row["compiler"] = "unknown";
#endif
  row["build_type"] = PINFEED_BUILD_TYPE;
  return row;
}

std::vector<simd_level> simd_levels(const std::vector<std::string>& names) {
  if (names.empty()) return {simd_level_in_use()};
  std::vector<simd_level> out;
  for (const auto& name : names) {
    if (name == "all") {
      for (int l = 0; l <= static_cast<int>(cpu_simd_support()); ++l) out.push_back(static_cast<simd_level>(l));
      continue;
    }
    const simd_level l = parse_simd_level(name);
    if (static_cast<int>(l) > static_cast<int>(cpu_simd_support()))
      throw std::invalid_argument("--simd " + name + ": this CPU supports " + to_string(cpu_simd_support()) +
                                  " at most");
    out.push_back(l);
  }
  return out;
}

cycle_counter::cycle_counter() {
  perf_event_attr a{};
  a.type = PERF_TYPE_HARDWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  if (fd_ < 0) why_ = std::string("perf_event_open: ") + std::strerror(errno);
}

cycle_counter::~cycle_counter() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t cycle_counter::read() const {
  std::uint64_t v = 0;
  if (fd_ >= 0 && ::read(fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return 0;
  return v;
}

}  // namespace pinfeed::bench
