#pragma once
/// @file host_info.hpp
/// What the host CPU is, for benchmark rows and `pinfeed info`: a figure holds only on the machine
/// that measured it.

#include <cstddef>
#include <string>

namespace pinfeed {

/// The CPU's model name ("AMD EPYC 9R14", "Intel(R) Xeon(R) Platinum 8480+"; on Arm the
/// implementer and part, e.g. "Arm implementer 0x41 part 0xd4f"), or "unknown". Reads
/// /proc/cpuinfo once; thread-safe.
[[nodiscard]] const std::string& cpu_model();

/// The machine's physical memory in bytes (0 where the system does not say): what allocations
/// an option drives are checked against.
[[nodiscard]] std::size_t physical_memory_bytes() noexcept;

/// CPU time this process has used, all threads, in seconds.
[[nodiscard]] double process_cpu_seconds() noexcept;

}  // namespace pinfeed
