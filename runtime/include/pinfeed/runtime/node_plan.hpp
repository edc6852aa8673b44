#pragma once
/// @file node_plan.hpp
/// The share of the machine this process (one rank of a job, or the only process) may use: cores,
/// memory and the ranks on this node, each with where it came from. Computed once per process; the
/// loader's defaults (workers on auto, the memory budget) and the doctor follow it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pinfeed {

/// What set a plan's cores: the least of the three.
enum class cores_limit { hardware_threads, affinity_mask, cgroup_quota };

/// One process's share of the node.
struct node_plan {
  // --- cores ---------------------------------------------------------------------------------
  std::size_t hardware_threads = 1;     ///< online hardware threads of the machine
  std::size_t affinity_cores = 1;       ///< CPUs in this process's affinity mask
  std::vector<unsigned> affinity_cpus;  ///< those CPUs (OS indices, ascending)
  std::optional<std::size_t> cpuset_cores;  ///< CPUs of the cgroup's cpuset, where it says
  std::optional<double> quota_cpus;     ///< the least cgroup CPU quota on the way to the root, in CPUs
  std::string quota_source;             ///< the file that set it ("/sys/fs/cgroup/x/cpu.max")
  std::size_t cores = 1;                ///< the least of the three (the quota rounded up), 1 at least
  cores_limit cores_limited_by = cores_limit::hardware_threads;
  std::string cores_source;             ///< why: "cgroup quota 0.5 CPUs (...)", "affinity mask", ...
  // --- memory --------------------------------------------------------------------------------
  std::uint64_t physical_memory = 0;    ///< the machine's memory (0 where the system does not say)
  std::optional<std::uint64_t> cgroup_memory;  ///< the least cgroup memory limit on the way to the root
  std::string cgroup_memory_source;     ///< the file that set it
  std::uint64_t memory = 0;             ///< the least of the two (0 where neither is known)
  std::string memory_source;            ///< "physical memory" or "cgroup v1 memory.limit_in_bytes (...)"
  // --- ranks on this node --------------------------------------------------------------------
  std::size_t local_rank = 0;
  std::size_t local_ranks = 1;
  std::string ranks_source;             ///< the variables read ("LOCAL_RANK/LOCAL_WORLD_SIZE"), or "one process"
  // --- this rank's share ---------------------------------------------------------------------
  /// The cores this rank's defaults use: `cores` divided among the local ranks, 1 at least; all of
  /// `cores` when the affinity mask is already narrower than the cpuset (or the machine), i.e. a
  /// launcher or the user bound this rank to its own CPUs.
  std::size_t rank_cores = 1;
  std::string rank_cores_source;
  std::size_t ranks_sharing_cores = 1;  ///< the local ranks `cores` is divided among
  /// The memory this rank's defaults use: `memory` divided among the local ranks (0 if unknown).
  std::uint64_t rank_memory = 0;
  // --- GPU locality (from the topology, through hwloc) -------------------------------------------
  std::optional<int> gpu;               ///< the CUDA device this rank's defaults take (device "auto")
  std::string gpu_bus_id;               ///< its PCI bus id
  std::vector<unsigned> gpu_cpus;       ///< the CPUs close to it that this process may use
  std::optional<unsigned> numa_node;    ///< its NUMA node
  std::size_t numa_nodes = 1;           ///< NUMA nodes of the machine
  std::size_t ranks_near_gpu = 1;       ///< local ranks whose GPUs share those CPUs, this one included
  /// The CPUs this rank's threads run on when the loader places them (loader_options::bind): its
  /// share of gpu_cpus. Empty when there is nothing to place (no GPU or no topology, or a launcher
  /// already bound the rank).
  std::vector<unsigned> rank_cpus;
  /// The workers of a loader placed on rank_cpus (loader_options::bind): their count, within
  /// rank_cores where a cgroup quota is shared. 0 when nothing is placed.
  std::size_t placed_cores = 0;
  std::string locality_source;          ///< how the GPU's CPUs were found, or why not
  /// What could not be read or made sense of (a bad variable, a malformed cgroup file), each naming
  /// the variable or file; the plan is made without that part.
  std::vector<std::string> warnings;

  /// The plan in a few lines, each number with its source.
  [[nodiscard]] std::string describe() const;
  /// The same as one JSON object (text).
  [[nodiscard]] std::string to_json() const;
};

/// Where a plan's facts are read from; the defaults are this process's. Tests point them at files
/// and variables of their own.
struct node_plan_inputs {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string proc_self_mountinfo = "/proc/self/mountinfo";
  /// Prefixed to every cgroup path read (a copy of a cgroup tree under a test's directory).
  std::string cgroup_root_prefix;
  /// The environment; null: getenv.
  std::function<const char*(const char*)> getenv;
  /// Overrides of what the system says (nullopt: ask it).
  std::optional<std::size_t> hardware_threads;
  std::optional<std::vector<unsigned>> affinity_cpus;  ///< the affinity mask's CPUs
  std::optional<std::uint64_t> physical_memory;
  /// The topology as hwloc XML text (nullopt: this machine's, as hwloc loads it).
  std::optional<std::string> topology_xml;
  /// The PCI bus ids of the CUDA devices this process sees, by device index (nullopt: ask CUDA).
  std::optional<std::vector<std::string>> gpu_bus_ids;
  /// No plan: every hardware thread, the physical memory, one process, nothing placed
  /// (PINFEED_NODE_PLAN=off, for comparisons).
  bool off = false;
  /// Look up the GPU's locality (CUDA's devices and hwloc's topology). Off: the plan's cores,
  /// memory and ranks only (this_node_plan_without_gpu).
  bool gpu_locality = true;
};

/// Computes a plan from `inputs`. Never throws for what it reads: what it cannot use becomes a
/// warning. Throws std::bad_alloc only.
[[nodiscard]] node_plan make_node_plan(const node_plan_inputs& inputs = {});

/// This process's plan, computed at the first call (thread-safe) and kept; its warnings are logged
/// once then. PINFEED_NODE_PLAN=off gives the plan of node_plan_inputs::off (what pinfeed did before
/// it had one: `pinfeed bench node` compares the two); any other value but "on" is named in a warning.
[[nodiscard]] const node_plan& this_node_plan();

/// The same plan without the GPU locality: no CUDA call and no topology loaded, for what runs on
/// the host only (a CPU loader's defaults). Its cores, memory and ranks are this_node_plan()'s.
[[nodiscard]] const node_plan& this_node_plan_without_gpu();

/// this_node_plan() if this process has made it already, else null (never makes it). Thread-safe.
[[nodiscard]] const node_plan* this_node_plan_if_made() noexcept;

/// Runs the calling thread on `cpus` (within the affinity it has: a launcher's or the user's binding
/// wins) until destroyed, then gives it back the affinity it had. Does nothing for an empty list,
/// where none of `cpus` is in the thread's affinity, or where the kernel refuses. Never throws.
class scoped_cpu_binding {
 public:
  explicit scoped_cpu_binding(const std::vector<unsigned>& cpus) noexcept;
  ~scoped_cpu_binding();
  scoped_cpu_binding(const scoped_cpu_binding&) = delete;
  scoped_cpu_binding& operator=(const scoped_cpu_binding&) = delete;
  /// Whether the thread runs on (a subset of) `cpus` now.
  [[nodiscard]] bool bound() const noexcept { return !previous_.empty(); }

 private:
  std::vector<unsigned long> previous_;  ///< the thread's mask before (empty: nothing changed)
};

/// The CPUs the calling thread may run on (OS indices, ascending); empty if the kernel does not say.
[[nodiscard]] std::vector<unsigned> thread_cpus();

}  // namespace pinfeed
