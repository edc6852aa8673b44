#include "pinfeed/runtime/node_plan.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "detail/node_topology.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/loader.hpp"  // format_bytes
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace {

namespace fs = std::filesystem;

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

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

/// A whole non-negative decimal number (no sign, no spaces, no suffix), or nullopt.
std::optional<std::uint64_t> parse_count(const std::string& s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// What reading one small file gave: its trimmed text, nothing (absent: the controller is not
/// there), or a warning (present but unreadable).
struct file_text {
  std::optional<std::string> text;
  bool unreadable = false;
};

file_text read_small_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s, '\0')) {
    if (in.eof() && !in.bad()) return {std::string(), false};  // empty file: read, nothing in it
    return {std::nullopt, true};
  }
  return {trim(s), false};
}

/// Undoes mountinfo's octal escapes (a space is "\040").
std::string unescape_mount(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) && std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct mount {
  std::string root, point, fstype;
  std::vector<std::string> super_options;
};

/// One cgroup hierarchy this process is in: v2's unified one, or a v1 controller's.
struct hierarchy {
  bool v2 = false;
  std::string dir;    ///< the process's cgroup directory (with the test prefix)
  std::string top;    ///< the hierarchy's mount point (with the test prefix): where the walk ends
};

class reader {
 public:
  reader(const node_plan_inputs& in, std::vector<std::string>& warnings) : in_(in), warnings_(warnings) {
    read_cgroups();
    read_mounts();
  }

  /// The hierarchy that holds controller `name` (v1), else the v2 one where it is enabled or not
  /// known to be off; nullopt when there is none.
  std::optional<hierarchy> find(const std::string& controller) const {
    for (const auto& [controllers, path] : v1_paths_) {
      if (std::find(controllers.begin(), controllers.end(), controller) == controllers.end()) continue;
      if (const mount* m = mount_for(path, [&](const mount& x) {
            return x.fstype == "cgroup" &&
                   std::find(x.super_options.begin(), x.super_options.end(), controller) != x.super_options.end();
          }))
        return hierarchy{false, dir_of(*m, path), in_.cgroup_root_prefix + m->point};
    }
    if (v2_path_)
      if (const mount* m = mount_for(*v2_path_, [](const mount& x) { return x.fstype == "cgroup2"; }))
        return hierarchy{true, dir_of(*m, *v2_path_), in_.cgroup_root_prefix + m->point};
    return std::nullopt;
  }

  /// Reads `file` in the process's cgroup and each parent up to the hierarchy's root, calling
  /// `use(text, path)` for each one present.
  template <class Use>
  void walk(const hierarchy& h, const std::string& file, Use&& use) const {
    fs::path dir = h.dir;
    const fs::path top = fs::path(h.top).lexically_normal();
    for (int depth = 0; depth < 64; ++depth) {  // cgroup trees are shallow; a bound against loops
      const std::string path = (dir / file).string();
      const file_text t = read_small_file(path);
      if (t.unreadable) warnings_.push_back("cannot read " + path + ": left out of the plan");
      else if (t.text) use(*t.text, path);
      const fs::path norm = dir.lexically_normal();
      if (norm == top || norm == norm.root_path() || !norm.has_parent_path()) break;
      // Never above the mount point: a path outside it (a bad /proc/self/cgroup) stops here.
      const auto rel = norm.lexically_relative(top);
      if (rel.empty() || *rel.begin() == "..") break;
      dir = norm.parent_path();
    }
  }

 private:
  void read_cgroups() {
    std::ifstream in(in_.proc_self_cgroup);
    if (!in) {
      warnings_.push_back("cannot read " + in_.proc_self_cgroup + ": no cgroup limits in the plan");
      return;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto c1 = line.find(':');
      const auto c2 = c1 == std::string::npos ? std::string::npos : line.find(':', c1 + 1);
      if (c2 == std::string::npos) {
        warnings_.push_back("malformed line in " + in_.proc_self_cgroup + ": '" + line + "' (want ID:CONTROLLERS:PATH)");
        continue;
      }
      const std::string id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
      if (id == "0" && controllers.empty()) v2_path_ = path;
      else if (!controllers.empty()) v1_paths_.emplace_back(split(controllers, ','), path);
    }
  }

  void read_mounts() {
    std::ifstream in(in_.proc_self_mountinfo);
    if (!in) {
      warnings_.push_back("cannot read " + in_.proc_self_mountinfo + ": no cgroup limits in the plan");
      return;
    }
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      const auto dash = std::find(f.begin(), f.end(), "-");
      if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;  // not a mount line we need
      const std::string fstype = *(dash + 1);
      if (fstype != "cgroup" && fstype != "cgroup2") continue;
      mounts_.push_back({unescape_mount(f[3]), unescape_mount(f[4]), fstype, split(*(dash + 3), ',')});
    }
  }

  /// Of the mounts `fits` accepts, the one whose root holds `path` most closely (a hierarchy mounted
  /// twice, as a container's view and a bind mount of the host's, is read where this cgroup is).
  template <class Fits>
  const mount* mount_for(const std::string& path, Fits&& fits) const {
    const mount* best = nullptr;
    for (const auto& m : mounts_) {
      if (!fits(m) || !below(path, m.root)) continue;
      if (best == nullptr || m.root.size() > best->root.size()) best = &m;
    }
    if (best == nullptr)  // a namespaced path outside every mount's root: the first mount's root
      for (const auto& m : mounts_)
        if (fits(m)) return &m;
    return best;
  }

  static bool below(const std::string& path, const std::string& root) {
    return root == "/" || path == root ||
           (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
  }

  /// The directory of cgroup `path` under mount `m`: a mount of a cgroup's subtree (a container's
  /// view, root "/docker/abc") holds the paths below its root.
  std::string dir_of(const mount& m, const std::string& path) const {
    std::string rel = path;
    if (m.root != "/") rel = below(path, m.root) ? path.substr(m.root.size()) : std::string();
    const fs::path top = fs::path(in_.cgroup_root_prefix + m.point).lexically_normal();
    const fs::path dir = (top / fs::path(rel).relative_path()).lexically_normal();
    // A path that leaves the mount ("/../..", from a bad /proc/self/cgroup) is read as its root.
    const auto inside = dir.lexically_relative(top);
    return (inside.empty() || *inside.begin() == "..") ? top.string() : dir.string();
  }

  const node_plan_inputs& in_;
  std::vector<std::string>& warnings_;
  std::optional<std::string> v2_path_;
  std::vector<std::pair<std::vector<std::string>, std::string>> v1_paths_;
  std::vector<mount> mounts_;
};

/// CPUs in a cpuset list ("0-3,8,10-11"); nullopt when malformed.
std::optional<std::size_t> count_cpu_list(const std::string& list) {
  std::size_t n = 0;
  if (list.empty()) return 0;
  for (const auto& part : split(list, ',')) {
    const auto dash = part.find('-');
    const auto lo = parse_count(part.substr(0, dash));
    const auto hi = dash == std::string::npos ? lo : parse_count(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi >= (1u << 22)) return std::nullopt;
    n += *hi - *lo + 1;
  }
  return n;
}

void read_cpu_quota(const reader& r, node_plan& p) {
  const auto h = r.find("cpu");
  if (!h) return;
  auto take = [&](double cpus, const std::string& path) {
    if (!p.quota_cpus || cpus < *p.quota_cpus) {
      p.quota_cpus = cpus;
      p.quota_source = path;
    }
  };
  if (h->v2) {
    r.walk(*h, "cpu.max", [&](const std::string& text, const std::string& path) {
      const auto f = split(text, ' ');
      if (f.size() == 2 && f[0] == "max" && parse_count(f[1])) return;  // no quota here
      const auto quota = f.size() == 2 ? parse_count(f[0]) : std::nullopt;
      const auto period = f.size() == 2 ? parse_count(f[1]) : std::nullopt;
      if (!quota || !period || *quota == 0 || *period == 0) {
        p.warnings.push_back("malformed " + path + ": '" + text + "' (want 'QUOTA PERIOD' or 'max PERIOD'): left out of the plan");
        return;
      }
      take(static_cast<double>(*quota) / static_cast<double>(*period), path);
    });
  } else {
    r.walk(*h, "cpu.cfs_quota_us", [&](const std::string& text, const std::string& path) {
      if (text == "-1") return;  // no quota here
      const auto quota = parse_count(text);
      const std::string period_path = fs::path(path).parent_path() / "cpu.cfs_period_us";
      const file_text pt = read_small_file(period_path);
      const std::uint64_t period = pt.text ? parse_count(*pt.text).value_or(0) : 0;
      if (!quota || *quota == 0) {
        p.warnings.push_back("malformed " + path + ": '" + text + "' (want microseconds, or -1): left out of the plan");
        return;
      }
      if (period == 0) {
        p.warnings.push_back((pt.text ? "malformed " : "cannot read ") + period_path +
                             (pt.text ? ": '" + *pt.text + "'" : std::string()) + ": the quota in " + path +
                             " is left out of the plan");
        return;
      }
      take(static_cast<double>(*quota) / static_cast<double>(period), path);
    });
  }
}

void read_memory_limit(const reader& r, node_plan& p) {
  const auto h = r.find("memory");
  if (!h) return;
  const std::string file = h->v2 ? "memory.max" : "memory.limit_in_bytes";
  r.walk(*h, file, [&](const std::string& text, const std::string& path) {
    if (text == "max") return;  // v2: no limit here
    const auto bytes = parse_count(text);
    if (!bytes || *bytes == 0) {
      p.warnings.push_back("malformed " + path + ": '" + text + "' (want bytes" + (h->v2 ? ", or max" : "") +
                           "): left out of the plan");
      return;
    }
    if (*bytes >= (std::uint64_t{1} << 60)) return;  // v1's "no limit" (PAGE_COUNTER_MAX pages)
    if (!p.cgroup_memory || *bytes < *p.cgroup_memory) {
      p.cgroup_memory = *bytes;
      p.cgroup_memory_source = path;
    }
  });
}

void read_cpuset(const reader& r, node_plan& p) {
  const auto h = r.find("cpuset");
  if (!h) return;
  // The cgroup nearest this process that has the file (v2 has it only where the controller is on).
  bool done = false;
  r.walk(*h, h->v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus", [&](const std::string& text, const std::string& path) {
    if (done) return;
    done = true;
    const auto n = count_cpu_list(text);
    if (!n) p.warnings.push_back("malformed " + path + ": '" + text + "' (want a CPU list such as 0-3,8): left out of the plan");
    else if (*n == 0) p.warnings.push_back(path + " has no CPUs: left out of the plan");
    else p.cpuset_cores = *n;
  });
}

/// Reads one rank-count variable pair; true when it set the plan's ranks.
bool read_ranks(const std::function<const char*(const char*)>& env, node_plan& p, const char* size_var,
                const char* rank_var, std::optional<std::uint64_t> size_override = std::nullopt,
                const std::string& size_text = {}) {
  const char* size_s = env(size_var);
  if (!size_override && size_s == nullptr) return false;
  const std::string shown = size_override ? size_text : std::string(size_var) + "=" + size_s;
  const auto size = size_override ? size_override : parse_count(size_s);
  if (!size || *size == 0 || *size > 65536) {
    p.warnings.push_back(shown + " is not a count of ranks on this node (want 1 to 65536): the plan assumes one process");
    return true;  // named, not to be looked for elsewhere
  }
  std::size_t rank = 0;
  if (const char* rank_s = env(rank_var)) {
    const auto r = parse_count(rank_s);
    if (!r || *r >= *size) {
      p.warnings.push_back(std::string(rank_var) + "=" + rank_s + " is not a rank below " + shown +
                           ": the plan assumes one process");
      return true;
    }
    rank = static_cast<std::size_t>(*r);
  } else {
    p.warnings.push_back(shown + " without " + rank_var + ": this process is taken as local rank 0");
  }
  p.local_ranks = static_cast<std::size_t>(*size);
  p.local_rank = rank;
  p.ranks_source = std::string(rank_var) + "/" + (size_override ? size_text.substr(0, size_text.find('=')) : size_var);
  return true;
}

/// The tasks on node `node` from a Slurm tasks-per-node list ("2(x3),1": 2 on each of the first
/// three nodes, then 1); nullopt when malformed or too short.
std::optional<std::uint64_t> slurm_tasks_on(const std::string& list, std::uint64_t node) {
  std::uint64_t first = 0;
  for (const auto& part : split(list, ',')) {
    const auto paren = part.find('(');
    const auto tasks = parse_count(part.substr(0, paren));
    std::optional<std::uint64_t> repeat = 1;
    if (paren != std::string::npos) {
      if (part.size() < paren + 4 || part.compare(paren, 2, "(x") != 0 || part.back() != ')') return std::nullopt;
      repeat = parse_count(part.substr(paren + 2, part.size() - paren - 3));
    }
    if (!tasks || !repeat || *repeat == 0 || *repeat > ~std::uint64_t{0} - first) return std::nullopt;
    if (node < first + *repeat) return tasks;
    first += *repeat;
  }
  return std::nullopt;
}

void read_local_ranks(const std::function<const char*(const char*)>& env, node_plan& p) {
  // The launchers whose local rank device auto takes too (local_rank_from_env), in its order.
  if (read_ranks(env, p, "LOCAL_WORLD_SIZE", "LOCAL_RANK")) return;                      // torchrun
  if (read_ranks(env, p, "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")) return;  // Open MPI
  // Slurm: only inside a step (srun), whose own tasks are the ranks; a batch script's environment
  // describes the allocation, not the processes that run. The step's list, indexed by this node.
  const char* step = env("SLURM_STEP_ID");
  if (step == nullptr || !parse_count(step) || env("SLURM_LOCALID") == nullptr) return;
  const char* var = env("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* list = env(var);
  if (list == nullptr) return;
  const char* node_s = env("SLURM_NODEID");
  const auto node = node_s ? parse_count(node_s) : std::optional<std::uint64_t>(0);
  const auto tasks = node ? slurm_tasks_on(list, *node) : std::nullopt;
  const std::string shown = std::string(var) + "=" + list;
  if (!tasks) {
    p.warnings.push_back(shown + (node ? " names no task count for node " + std::to_string(*node)
                                       : std::string(" cannot be indexed by SLURM_NODEID=") + node_s) +
                         ": the plan assumes one process");
    return;
  }
  read_ranks(env, p, var, "SLURM_LOCALID", tasks, shown);
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

/// The GPU this rank's defaults take, the CPUs close to it (through hwloc) and this rank's share
/// of them among the local ranks near the same CPUs.
void place_near_gpu(const node_plan_inputs& in, node_plan& p, bool own_mask) {
  std::vector<std::string> visible;
  if (in.gpu_bus_ids) {
    visible = *in.gpu_bus_ids;
  } else if (const auto& s = cuda_devices(); s.usable) {
    for (const auto& d : s.devices) visible.push_back(d.pci_bus_id);
  }
  for (auto& b : visible)
    for (auto& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string why;
  const auto facts = detail::read_topology(in.topology_xml, why);
  if (!facts) {
    p.locality_source = why;
    p.warnings.push_back(why + ": the plan has no GPU locality and places nothing");
    return;
  }
  p.numa_nodes = std::max<std::size_t>(1, facts->numa_nodes.size());
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
  auto find = [&](const std::string& bus) -> const detail::topology_facts::gpu* {
    for (const auto& g : facts->gpus)
      if (g.bus_id == bus) return &g;
    return nullptr;
  };
  const auto* mine = find(p.gpu_bus_id);
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
  // The other local ranks' GPUs: the same list when every rank sees every GPU; when each sees only
  // its own, the node's GPUs in bus order, one per local rank.
  auto gpu_of = [&](std::size_t r) -> const detail::topology_facts::gpu* {
    if (r == p.local_rank) return mine;
    if (visible.size() > 1) return r < visible.size() ? find(visible[r]) : nullptr;
    return facts->gpus.empty() ? nullptr : &facts->gpus[r % facts->gpus.size()];
  };
  std::size_t group = 0, pos = 0;
  for (std::size_t r = 0; r < p.local_ranks; ++r) {
    const auto* g = gpu_of(r);
    if (g == nullptr || g->close_cores != mine->close_cores) continue;
    if (r < p.local_rank) ++pos;
    ++group;
  }
  p.ranks_near_gpu = group;
  p.locality_source = std::to_string(p.gpu_cpus.size()) + " CPUs close to GPU " + std::to_string(dev) +
                      (p.numa_node ? " (NUMA node " + std::to_string(*p.numa_node) + ")" : std::string()) + ", " +
                      std::to_string(group) + (group == 1 ? " local rank" : " local ranks") + " near them";
  if (own_mask) return;  // a launcher bound this rank to CPUs of its own: they are its place
  // Whole cores, split evenly among the ranks near the GPU; more ranks than cores share them.
  const std::size_t n = cores.size();
  const std::size_t first = n >= group ? pos * n / group : pos % n, last = n >= group ? (pos + 1) * n / group : first + 1;
  for (std::size_t c = first; c < last; ++c) p.rank_cpus.insert(p.rank_cpus.end(), cores[c].begin(), cores[c].end());
  std::sort(p.rank_cpus.begin(), p.rank_cpus.end());
  // A shared cgroup quota still bounds the workers (rank_cores); else the CPUs placed on do.
  const bool quota = p.cores_source.rfind("cgroup quota", 0) == 0;
  p.placed_cores = quota ? std::min(p.rank_cores, p.rank_cpus.size()) : p.rank_cpus.size();
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
  reader r(in, p.warnings);
  read_cpu_quota(r, p);
  read_cpuset(r, p);
  p.cores = p.hardware_threads;
  p.cores_source = "hardware threads";
  if (p.affinity_cores < p.cores) {
    p.cores = p.affinity_cores;
    p.cores_source = "affinity mask";
  }
  if (p.quota_cpus && std::ceil(*p.quota_cpus - 1e-9) <= static_cast<double>(p.cores)) {
    const auto quota_cores = static_cast<std::size_t>(std::max(1.0, std::ceil(*p.quota_cpus - 1e-9)));
    {
      p.cores = quota_cores;
      std::ostringstream s;
      s.precision(3);
      s << "cgroup quota " << *p.quota_cpus << " CPUs: " << p.quota_source;
      p.cores_source = s.str();
    }
  }
  // Memory.
  p.physical_memory = in.physical_memory.value_or(physical_memory_bytes());
  read_memory_limit(r, p);
  p.memory = p.physical_memory;
  p.memory_source = "physical memory";
  if (p.cgroup_memory && (p.memory == 0 || *p.cgroup_memory < p.memory)) {
    p.memory = *p.cgroup_memory;
    p.memory_source = "cgroup limit: " + p.cgroup_memory_source;
  }
  // Ranks, and this rank's share.
  p.ranks_source = "one process";
  read_local_ranks(env, p);
  // The ranks that share this process's cores. A cgroup quota is the whole cgroup's: every local
  // rank's. An affinity mask narrower than the cpuset (or the machine) was set by a launcher
  // (mpirun --bind-to, srun --cpu-bind, taskset): as many ranks share it as its part of the CPUs
  // holds of the local ranks (1 for a rank bound to cores of its own, 2 of 4 ranks bound by socket).
  const std::size_t bound_to = p.cpuset_cores.value_or(p.hardware_threads);
  std::size_t sharing = p.local_ranks;
  if (p.cores_source == "affinity mask" && p.affinity_cores < bound_to)
    sharing = std::clamp<std::size_t>((p.local_ranks * p.affinity_cores + bound_to / 2) / bound_to, 1, p.local_ranks);
  p.ranks_sharing_cores = sharing;
  p.rank_cores = std::max<std::size_t>(1, p.cores / sharing);
  if (p.local_ranks <= 1) p.rank_cores_source = "all of the plan's cores";
  else if (sharing == 1) p.rank_cores_source = "this rank's own affinity mask (" + cores_word(p.affinity_cores) + " of " + std::to_string(bound_to) + "), not divided";
  else p.rank_cores_source = cores_word(p.cores) + " / " + std::to_string(sharing) + " local ranks";
  p.rank_memory = p.memory / p.local_ranks;
  if (in.gpu_locality) place_near_gpu(in, p, sharing == 1 && p.local_ranks > 1);
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
/// This process's plan, with or without the GPU locality; each warning is logged once, by
/// whichever of the two finds it first.
node_plan process_plan(bool gpu_locality) {
  static std::mutex logged_mutex;
  static std::vector<std::string> logged;
  node_plan_inputs in;
  const char* off = std::getenv("PINFEED_NODE_PLAN");
  const std::string v = off ? off : "";
  in.off = v == "off";
  in.gpu_locality = gpu_locality;
  node_plan p = make_node_plan(in);
  if (!v.empty() && v != "off" && v != "on")
    p.warnings.push_back("PINFEED_NODE_PLAN=" + v + " is neither on nor off: the plan is on");
  std::lock_guard lock(logged_mutex);
  for (const auto& w : p.warnings) {
    if (std::find(logged.begin(), logged.end(), w) != logged.end()) continue;
    logged.push_back(w);
    log(log_level::warn, "node plan: " + w);
  }
  return p;
}
}  // namespace

namespace {
std::atomic<const node_plan*> made_plan{nullptr};
}  // namespace

const node_plan& this_node_plan() {
  static const node_plan plan = process_plan(true);
  made_plan.store(&plan, std::memory_order_release);
  return plan;
}

const node_plan* this_node_plan_if_made() noexcept { return made_plan.load(std::memory_order_acquire); }

const node_plan& this_node_plan_without_gpu() {
  static const node_plan plan = process_plan(false);
  return plan;
}

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
