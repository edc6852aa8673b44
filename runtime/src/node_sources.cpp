// The node plan's facts read from the system (node_plan.cpp combines them): the cgroup limits, found
// through /proc/self/cgroup and /proc/self/mountinfo and read at every level up to the hierarchy's
// root, and the launcher's local ranks.
#include "detail/node_sources.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pinfeed::detail {
namespace {

namespace fs = std::filesystem;

/// `dir` and `name` with one '/' between.
std::string joined(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (name.empty()) return dir;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
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
  in.exceptions(std::ios::badbit);  // a failed allocation is std::bad_alloc, not a shorter list
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
      // Joined as strings: libstdc++ 12's path::operator/ frees a bad pointer when an allocation in
      // it fails (a crash the tool's allocation-failure sweep found).
      const std::string path = joined(dir.string(), file);
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
  /// Calls `f` with each line of `path`, a file the cgroup limits come from; warns when it cannot
  /// be read.
  template <class F>
  void each_line(const std::string& path, F&& f) {
    std::ifstream in(path);
    if (!in) {
      warnings_.push_back("cannot read " + path + ": no cgroup limits in the plan");
      return;
    }
    in.exceptions(std::ios::badbit);  // a line that cannot be held is std::bad_alloc, not the file's end
    for (std::string line; std::getline(in, line);) f(line);
  }

  void read_cgroups() {
    each_line(in_.proc_self_cgroup, [&](const std::string& line) {
      if (line.empty()) return;
      const auto c1 = line.find(':');
      const auto c2 = c1 == std::string::npos ? std::string::npos : line.find(':', c1 + 1);
      if (c2 == std::string::npos) {
        warnings_.push_back("malformed line in " + in_.proc_self_cgroup + ": '" + line + "' (want ID:CONTROLLERS:PATH)");
        return;
      }
      const std::string id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
      if (id == "0" && controllers.empty()) v2_path_ = path;
      else if (!controllers.empty()) v1_paths_.emplace_back(split(controllers, ','), path);
    });
  }

  void read_mounts() {
    each_line(in_.proc_self_mountinfo, [&](const std::string& line) {
      std::istringstream fields(line);
      fields.exceptions(std::ios::badbit);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      const auto dash = std::find(f.begin(), f.end(), "-");
      if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) return;  // not a mount line we need
      const std::string fstype = *(dash + 1);
      if (fstype != "cgroup" && fstype != "cgroup2") return;
      mounts_.push_back({unescape_mount(f[3]), unescape_mount(f[4]), fstype, split(*(dash + 3), ',')});
    });
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
    const fs::path dir = fs::path(joined(top.string(), fs::path(rel).relative_path().string())).lexically_normal();
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
      const std::string period_path = joined(fs::path(path).parent_path().string(), "cpu.cfs_period_us");
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

}  // namespace

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

void read_cgroup_limits(const node_plan_inputs& in, node_plan& p) {
  const reader r(in, p.warnings);
  read_cpu_quota(r, p);
  read_cpuset(r, p);
  read_memory_limit(r, p);
}

}  // namespace pinfeed::detail
