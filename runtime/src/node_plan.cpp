#include "pinfeed/runtime/node_plan.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "detail/node_sources.hpp"
#include "detail/node_topology.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/loader.hpp"  // format_bytes
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace {

constexpr std::size_t kMaskBits = 8 * sizeof(unsigned long);

/// The affinity of thread `who` (0: the calling one) as raw mask words (empty on failure).
std::vector<unsigned long> thread_mask(pid_t who = 0) {
  for (std::size_t words = CPU_SETSIZE / kMaskBits; words <= (std::size_t{1} << 16) / kMaskBits; words *= 2) {
    std::vector<unsigned long> mask(words, 0);
    if (::sched_getaffinity(who, words * sizeof(unsigned long), reinterpret_cast<cpu_set_t*>(mask.data())) == 0) {
      return mask;
    }
    if (errno != EINVAL) break;
  }
  return {};
}

/// The CPUs set in a raw mask, ascending.
std::vector<unsigned> cpus_of(const std::vector<unsigned long>& mask) {
  std::vector<unsigned> cpus;
  for (std::size_t w = 0; w < mask.size(); ++w)
    for (std::size_t b = 0; b < kMaskBits; ++b)
      if (mask[w] >> b & 1ul) cpus.push_back(static_cast<unsigned>(w * kMaskBits + b));
  return cpus;
}

/// "0-13,56,58-59"
std::string cpu_list(const std::vector<unsigned>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string cores_word(std::size_t n) { return std::to_string(n) + (n == 1 ? " core" : " cores"); }

/// The PCI bus ids of the CUDA devices this process sees, by index, in lower case.
std::vector<std::string> visible_bus_ids(const node_plan_inputs& in) {
  std::vector<std::string> visible;
  if (in.gpu_bus_ids) {
    visible = *in.gpu_bus_ids;
  } else if (const auto& s = cuda_devices(); s.usable) {
    for (const auto& d : s.devices) visible.push_back(d.pci_bus_id);
  }
  for (auto& b : visible)
    for (auto& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return visible;
}

/// This rank's share of `cores` (the GPU's cores it may use, each as its hardware threads): whole
/// cores, split evenly among the `group` local ranks near them, this one at position `pos`; more
/// ranks than cores share them.
void take_share(node_plan& p, const std::vector<std::vector<unsigned>>& cores, std::size_t group, std::size_t pos) {
  const std::size_t n = cores.size();
  const std::size_t first = n >= group ? pos * n / group : pos % n, last = n >= group ? (pos + 1) * n / group : first + 1;
  for (std::size_t c = first; c < last; ++c) p.rank_cpus.insert(p.rank_cpus.end(), cores[c].begin(), cores[c].end());
  std::sort(p.rank_cpus.begin(), p.rank_cpus.end());
  // A shared cgroup quota still bounds the workers (rank_cores); else the CPUs placed on do.
  p.placed_cores = p.cores_limited_by == cores_limit::cgroup_quota ? std::min(p.rank_cores, p.rank_cpus.size())
                                                                    : p.rank_cpus.size();
}

const detail::topology_facts::gpu* gpu_by_bus(const detail::topology_facts& facts, const std::string& bus) {
  for (const auto& g : facts.gpus)
    if (g.bus_id == bus) return &g;
  return nullptr;
}

/// The local ranks whose GPUs are close to the same CPUs as `mine` (this rank's), and this rank's
/// position among them. The other ranks' GPUs: the same list when every rank sees every GPU; when
/// each sees only its own, the node's GPUs in bus order, one per local rank.
std::pair<std::size_t, std::size_t> ranks_near(const node_plan& p, const detail::topology_facts& facts,
                                               const std::vector<std::string>& visible,
                                               const detail::topology_facts::gpu& mine) {
  auto gpu_of = [&](std::size_t r) -> const detail::topology_facts::gpu* {
    if (r == p.local_rank) return &mine;
    if (visible.size() > 1) return r < visible.size() ? gpu_by_bus(facts, visible[r]) : nullptr;
    return facts.gpus.empty() ? nullptr : &facts.gpus[r % facts.gpus.size()];
  };
  std::size_t group = 0, pos = 0;
  for (std::size_t r = 0; r < p.local_ranks; ++r) {
    const auto* g = gpu_of(r);
    if (g == nullptr || g->close_cores != mine.close_cores) continue;
    if (r < p.local_rank) ++pos;
    ++group;
  }
  return {group, pos};
}

/// The GPU this rank's defaults take, the CPUs close to it (through hwloc) and this rank's share
/// of them among the local ranks near the same CPUs.
void place_near_gpu(const node_plan_inputs& in, node_plan& p) {
  const std::vector<std::string> visible = visible_bus_ids(in);
  std::string why;
  const auto facts = detail::read_topology(in.topology_xml, why);
  if (!facts) {
    p.locality_source = why;
    p.warnings.push_back(why + ": the plan has no GPU locality and places nothing");
    return;
  }
  p.numa_nodes = std::max<std::size_t>(1, facts->numa_nodes);
  if (visible.empty()) {
    p.locality_source = "no CUDA device";
    return;
  }
  // Device auto's choice (resolve_device): the only device a rank sees, else its local rank's.
  const std::size_t dev = visible.size() == 1 ? 0 : p.local_rank;
  if (dev >= visible.size()) {
    p.locality_source = "local rank " + std::to_string(p.local_rank) + " has no CUDA device of its own";
    p.warnings.push_back(p.locality_source + " (" + std::to_string(visible.size()) + " visible): nothing placed");
    return;
  }
  p.gpu = static_cast<int>(dev);
  p.gpu_bus_id = visible[dev];
  const auto* mine = gpu_by_bus(*facts, p.gpu_bus_id);
  if (mine == nullptr) {
    p.locality_source = "GPU " + std::to_string(dev) + " (PCI " + p.gpu_bus_id + ") is not in the topology";
    p.warnings.push_back("CUDA device " + std::to_string(dev) + "'s PCI bus id " + p.gpu_bus_id +
                         " is not an NVIDIA GPU of the machine's topology: no GPU locality, nothing placed");
    return;
  }
  if (mine->close_cores.empty()) {
    p.locality_source = "the topology does not say which CPUs are close to GPU " + std::to_string(dev);
    return;
  }
  if (mine->numa_nodes.size() == 1) p.numa_node = mine->numa_nodes.front();
  // Its cores, each as the hardware threads this process may use.
  std::vector<std::vector<unsigned>> cores;
  for (const auto& core : mine->close_cores) {
    std::vector<unsigned> usable;
    std::set_intersection(core.begin(), core.end(), p.affinity_cpus.begin(), p.affinity_cpus.end(), std::back_inserter(usable));
    if (usable.empty()) continue;
    p.gpu_cpus.insert(p.gpu_cpus.end(), usable.begin(), usable.end());
    cores.push_back(std::move(usable));
  }
  std::sort(p.gpu_cpus.begin(), p.gpu_cpus.end());
  if (cores.empty()) {
    p.locality_source = "none of the CPUs close to GPU " + std::to_string(dev) + " are in this process's affinity mask";
    p.warnings.push_back(p.locality_source + ": threads are not placed");
    return;
  }
  const auto [group, pos] = ranks_near(p, *facts, visible, *mine);
  p.ranks_near_gpu = group;
  p.locality_source = std::to_string(p.gpu_cpus.size()) + " CPUs close to GPU " + std::to_string(dev) +
                      (p.numa_node ? " (NUMA node " + std::to_string(*p.numa_node) + ")" : std::string()) + ", " +
                      std::to_string(group) + (group == 1 ? " local rank" : " local ranks") + " near them";
  // A launcher bound this rank to CPUs of its own: they are its place.
  if (p.ranks_sharing_cores == 1 && p.local_ranks > 1) return;
  take_share(p, cores, group, pos);
}


/// The plan's cores: the least of the hardware threads, the affinity mask and the quota read.
void count_cores(node_plan& p) {
  p.cores = p.hardware_threads;
  p.cores_source = "hardware threads";
  if (p.affinity_cores < p.cores) {
    p.cores = p.affinity_cores;
    p.cores_limited_by = cores_limit::affinity_mask;
    p.cores_source = "affinity mask";
  }
  if (p.quota_cpus && std::ceil(*p.quota_cpus - 1e-9) <= static_cast<double>(p.cores)) {
    p.cores = static_cast<std::size_t>(std::max(1.0, std::ceil(*p.quota_cpus - 1e-9)));
    p.cores_limited_by = cores_limit::cgroup_quota;
    std::ostringstream s;
    s.precision(3);
    s << "cgroup quota " << *p.quota_cpus << " CPUs: " << p.quota_source;
    p.cores_source = s.str();
  }
}

/// This rank's share of the cores and memory. A cgroup quota is the whole cgroup's: every local
/// rank's. An affinity mask narrower than the cpuset (or the machine) was set by a launcher
/// (mpirun --bind-to, srun --cpu-bind, taskset): as many ranks share it as its part of the CPUs
/// holds of the local ranks (1 for a rank bound to cores of its own, 2 of 4 ranks bound by socket).
void share_among_ranks(node_plan& p) {
  const std::size_t bound_to = p.cpuset_cores.value_or(p.hardware_threads);
  std::size_t sharing = p.local_ranks;
  if (p.cores_limited_by == cores_limit::affinity_mask && p.affinity_cores < bound_to)
    sharing = std::clamp<std::size_t>((p.local_ranks * p.affinity_cores + bound_to / 2) / bound_to, 1, p.local_ranks);
  p.ranks_sharing_cores = sharing;
  p.rank_cores = std::max<std::size_t>(1, p.cores / sharing);
  if (p.local_ranks <= 1) p.rank_cores_source = "all of the plan's cores";
  else if (sharing == 1) p.rank_cores_source = "this rank's own affinity mask (" + cores_word(p.affinity_cores) + " of " + std::to_string(bound_to) + "), not divided";
  else p.rank_cores_source = cores_word(p.cores) + " / " + std::to_string(sharing) + " local ranks";
  p.rank_memory = p.memory / p.local_ranks;
}

}  // namespace

node_plan make_node_plan(const node_plan_inputs& in) {
  node_plan p;
  const std::function<const char*(const char*)> env = in.getenv ? in.getenv : [](const char* n) { return std::getenv(n); };
  // Cores.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  p.hardware_threads = std::max<std::size_t>(1, in.hardware_threads.value_or(
                                                    online > 0 ? static_cast<std::size_t>(online) : std::thread::hardware_concurrency()));
  // The process's (its main thread's) mask, whichever thread asks first.
  p.affinity_cpus = in.affinity_cpus ? *in.affinity_cpus : cpus_of(thread_mask(::getpid()));
  if (p.affinity_cpus.empty()) {
    p.warnings.push_back("the CPU affinity mask could not be read: the hardware threads are used");
    for (unsigned c = 0; c < p.hardware_threads; ++c) p.affinity_cpus.push_back(c);
  }
  p.affinity_cores = std::min(p.affinity_cpus.size(), p.hardware_threads);
  if (in.off) {
    p.cores = p.rank_cores = p.hardware_threads;
    p.cores_source = p.rank_cores_source = "hardware threads (PINFEED_NODE_PLAN=off)";
    p.physical_memory = p.memory = p.rank_memory = in.physical_memory.value_or(physical_memory_bytes());
    p.memory_source = "physical memory (PINFEED_NODE_PLAN=off)";
    p.ranks_source = "PINFEED_NODE_PLAN=off";
    p.locality_source = "PINFEED_NODE_PLAN=off";
    return p;
  }
  detail::read_cgroup_limits(in, p);
  count_cores(p);
  // Memory.
  p.physical_memory = in.physical_memory.value_or(physical_memory_bytes());
  p.memory = p.physical_memory;
  p.memory_source = "physical memory";
  if (p.cgroup_memory && (p.memory == 0 || *p.cgroup_memory < p.memory)) {
    p.memory = *p.cgroup_memory;
    p.memory_source = "cgroup limit: " + p.cgroup_memory_source;
  }
  // Ranks, and this rank's share.
  p.ranks_source = "one process";
  detail::read_local_ranks(env, p);
  share_among_ranks(p);
  if (in.gpu_locality) place_near_gpu(in, p);
  else p.locality_source = "not looked up (no CUDA device asked for)";
  return p;
}


std::vector<unsigned> thread_cpus() { return cpus_of(thread_mask()); }

scoped_cpu_binding::scoped_cpu_binding(const std::vector<unsigned>& cpus) noexcept {
  if (cpus.empty()) return;
  try {
    auto before = thread_mask();
    if (before.empty()) return;
    std::vector<unsigned long> want(before.size(), 0);
    bool any = false;
    for (const unsigned c : cpus) {
      const std::size_t w = c / kMaskBits;
      if (w < before.size() && (before[w] >> (c % kMaskBits) & 1ul)) {
        want[w] |= 1ul << (c % kMaskBits);
        any = true;
      }
    }
    if (!any || want == before) return;
    if (::sched_setaffinity(0, want.size() * sizeof(unsigned long), reinterpret_cast<const cpu_set_t*>(want.data())) != 0)
      return;
    previous_ = std::move(before);
  } catch (...) {  // std::bad_alloc: the thread stays where it was
  }
}

scoped_cpu_binding::~scoped_cpu_binding() {
  if (!previous_.empty())
    (void)::sched_setaffinity(0, previous_.size() * sizeof(unsigned long), reinterpret_cast<const cpu_set_t*>(previous_.data()));
}

namespace {
/// This process's inputs: its own files and environment; PINFEED_NODE_PLAN=off turns the plan off.
node_plan_inputs process_inputs() {
  node_plan_inputs in;
  const char* v = std::getenv("PINFEED_NODE_PLAN");
  in.off = v != nullptr && std::string_view(v) == "off";
  return in;
}

void log_warnings(const node_plan& p, std::size_t from) {
  for (std::size_t i = from; i < p.warnings.size(); ++i) log(log_level::warn, "node plan: " + p.warnings[i]);
}

std::atomic<const node_plan*> made_plan{nullptr};
}  // namespace

const node_plan& this_node_plan_without_gpu() {
  static const node_plan plan = [] {
    node_plan_inputs in = process_inputs();
    in.gpu_locality = false;
    node_plan p = make_node_plan(in);
    if (const char* v = std::getenv("PINFEED_NODE_PLAN"); v != nullptr && !in.off && std::string_view(v) != "on" && *v != '\0')
      p.warnings.push_back("PINFEED_NODE_PLAN=" + std::string(v) + " is neither on nor off: the plan is on");
    log_warnings(p, 0);
    return p;
  }();
  return plan;
}

const node_plan& this_node_plan() {
  // The plan without the GPU, made (and its warnings logged) once, with the GPU's locality added.
  static const node_plan plan = [] {
    node_plan p = this_node_plan_without_gpu();
    const std::size_t known = p.warnings.size();
    if (const node_plan_inputs in = process_inputs(); !in.off) place_near_gpu(in, p);
    log_warnings(p, known);
    return p;
  }();
  static const bool published = (made_plan.store(&plan, std::memory_order_release), true);
  (void)published;
  return plan;
}

const node_plan* this_node_plan_if_made() noexcept { return made_plan.load(std::memory_order_acquire); }

std::string node_plan::describe() const {
  std::ostringstream s;
  s << "cores        " << cores << " of " << hardware_threads << " hardware threads (" << cores_source << ")\n";
  s << "memory       " << (memory ? format_bytes(memory) : std::string("unknown")) << " ("
    << memory_source << (cgroup_memory && memory != physical_memory && physical_memory
                             ? "; physical " + format_bytes(physical_memory) : std::string())
    << ")\n";
  s << "local ranks  " << (local_ranks == 1 ? std::string("1 (") + ranks_source + ")"
                                           : "rank " + std::to_string(local_rank) + " of " + std::to_string(local_ranks) +
                                                 " on this node (" + ranks_source + ")")
    << "\n";
  s << "this rank    " << cores_word(rank_cores) << " (" << rank_cores_source << "), "
    << (rank_memory ? format_bytes(rank_memory) : std::string("memory unknown"))
    << (local_ranks > 1 ? " (memory / " + std::to_string(local_ranks) + " local ranks)" : std::string()) << "\n";
  s << "GPU          ";
  if (gpu) {
    s << "CUDA device " << *gpu << " (PCI " << gpu_bus_id << "): " << locality_source;
    if (!rank_cpus.empty()) s << "; this rank on CPUs " << cpu_list(rank_cpus);
  } else {
    s << "none (" << locality_source << ")";
  }
  s << "; " << numa_nodes << (numa_nodes == 1 ? " NUMA node" : " NUMA nodes") << "\n";
  for (const auto& w : warnings) s << "warning      " << w << "\n";
  return s.str();
}

std::string node_plan::to_json() const {
  nlohmann::json j;
  j["cores"] = {{"value", cores},
                {"source", cores_source},
                {"hardware_threads", hardware_threads},
                {"affinity", affinity_cores},
                {"affinity_cpus", cpu_list(affinity_cpus)},
                {"cpuset", cpuset_cores ? nlohmann::json(*cpuset_cores) : nlohmann::json(nullptr)},
                {"quota_cpus", quota_cpus ? nlohmann::json(*quota_cpus) : nlohmann::json(nullptr)},
                {"quota_source", quota_cpus ? nlohmann::json(quota_source) : nlohmann::json(nullptr)}};
  j["memory"] = {{"bytes", memory},
                 {"source", memory_source},
                 {"physical_bytes", physical_memory},
                 {"cgroup_bytes", cgroup_memory ? nlohmann::json(*cgroup_memory) : nlohmann::json(nullptr)},
                 {"cgroup_source", cgroup_memory ? nlohmann::json(cgroup_memory_source) : nlohmann::json(nullptr)}};
  j["local_ranks"] = {{"rank", local_rank}, {"size", local_ranks}, {"source", ranks_source}};
  j["rank"] = {{"cores", rank_cores},
               {"cores_source", rank_cores_source},
               {"ranks_sharing_cores", ranks_sharing_cores},
               {"memory_bytes", rank_memory}};
  j["gpu"] = {{"device", gpu ? nlohmann::json(*gpu) : nlohmann::json(nullptr)},
              {"pci_bus_id", gpu ? nlohmann::json(gpu_bus_id) : nlohmann::json(nullptr)},
              {"close_cpus", cpu_list(gpu_cpus)},
              {"numa_node", numa_node ? nlohmann::json(*numa_node) : nlohmann::json(nullptr)},
              {"numa_nodes", numa_nodes},
              {"ranks_near", ranks_near_gpu},
              {"rank_cpus", cpu_list(rank_cpus)},
              {"placed_cores", placed_cores},
              {"source", locality_source}};
  j["warnings"] = warnings;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // warnings quote raw input
}

}  // namespace pinfeed
