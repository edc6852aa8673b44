// The node plan on cgroup trees and environments of the tests' own making (v1 and v2 hierarchies,
// a container's view, quotas, limits, cpusets, launchers' rank variables), and its bad inputs:
// each a warning naming the file or variable, never a crash and never zero cores.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "pinfeed/runtime/node_plan.hpp"
#include "test_util.hpp"
#include "topology_xml.hpp"

using namespace pinfeed;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

std::vector<unsigned> cpu_range(unsigned first, unsigned count) {
  std::vector<unsigned> v(count);
  for (unsigned i = 0; i < count; ++i) v[i] = first + i;
  return v;
}

/// A fake /proc/self/{cgroup,mountinfo} and cgroup tree under a temporary directory.
struct fake_node {
  test::temp_dir dir;
  std::map<std::string, std::string> env;
  node_plan_inputs in;

  fake_node(const fake_node&) = delete;  // in.getenv reads this object's env
  fake_node& operator=(const fake_node&) = delete;
  fake_node(std::size_t hardware, std::size_t affinity, std::uint64_t memory) {
    in.proc_self_cgroup = (dir.path / "proc_cgroup").string();
    in.proc_self_mountinfo = (dir.path / "proc_mountinfo").string();
    in.cgroup_root_prefix = (dir.path / "root").string();
    in.hardware_threads = hardware;
    in.affinity_cpus = cpu_range(0, static_cast<unsigned>(affinity));
    // One package of `hardware` cores and no GPU, unless a case says otherwise.
    in.topology_xml = test::topology_xml::machine(1, static_cast<unsigned>(hardware), 0);
    in.gpu_bus_ids = std::vector<std::string>{};
    in.physical_memory = memory;
    in.getenv = [this](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  }
  void write(const std::string& path, const std::string& text) const {
    const auto p = path.rfind("proc_", 0) == 0 ? dir.path / path : dir.path / ("root" + path);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  node_plan plan() const { return make_node_plan(in); }
};

/// A cgroup v1 node: cpu, memory and cpuset hierarchies mounted as systemd and Docker do.
void make_v1(fake_node& n) {
  n.write("proc_cgroup", "12:cpuset:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n9:memory:/kubepods/pod1/c1\n"
                         "1:name=systemd:/kubepods/pod1/c1\n");
  n.write("proc_mountinfo",
          "25 0 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
          "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
          "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
          "32 25 0:28 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset\n");
}

/// A cgroup v2 container: the pod's subtree mounted at /sys/fs/cgroup (root /kubepods/pod2).
void make_v2_container(fake_node& n) {
  n.write("proc_cgroup", "0::/kubepods/pod2\n");
  n.write("proc_mountinfo", "40 0 0:30 / / rw - overlay overlay rw\n"
                            "41 40 0:31 /kubepods/pod2 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
}

bool warned(const node_plan& p, const std::string& part) {
  for (const auto& w : p.warnings)
    if (w.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("node_plan.v1_quota_memory_and_cpuset_over_the_whole_hierarchy") {
  fake_node n(112, 112, 512 * kGiB);
  make_v1(n);
  // A quota of 2.5 CPUs on the pod, none on the container; the pod's memory limit is the lower one.
  n.write("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us", "250000\n");
  n.write("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us", "100000\n");
  n.write("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us", "-1\n");
  n.write("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us", "100000\n");
  n.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  n.write("/sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes", "1073741824\n");
  n.write("/sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes", "2147483648\n");
  n.write("/sys/fs/cgroup/cpuset/kubepods/pod1/c1/cpuset.effective_cpus", "0-1,7\n");
  const node_plan p = n.plan();
  CHECK(p.warnings.empty());
  REQUIRE(p.quota_cpus);
  CHECK(*p.quota_cpus == doctest::Approx(2.5));
  CHECK(p.cores == 3);  // 2.5 CPUs rounded up
  CHECK(p.quota_source.find("kubepods/pod1/cpu.cfs_quota_us") != std::string::npos);
  CHECK(p.cores_source.find("cgroup quota 2.5 CPUs") != std::string::npos);
  CHECK(p.memory == kGiB);
  CHECK(p.cgroup_memory_source.find("kubepods/pod1/memory.limit_in_bytes") != std::string::npos);
  CHECK(p.memory_source.find("cgroup limit") != std::string::npos);
  REQUIRE(p.cpuset_cores);
  CHECK(*p.cpuset_cores == 3);
  CHECK(p.local_ranks == 1);
  CHECK(p.rank_cores == 3);
  CHECK(p.rank_memory == kGiB);
}

TEST_CASE("node_plan.v2_container_view_reads_its_own_cgroup_not_above_the_mount") {
  fake_node n(128, 128, 256 * kGiB);
  make_v2_container(n);
  n.write("/sys/fs/cgroup/cpu.max", "50000 100000\n");
  n.write("/sys/fs/cgroup/memory.max", "536870912\n");
  n.write("/sys/fs/cgroup/cpuset.cpus.effective", "0-127\n");
  // Above the mount point: the host's tree, never read from inside the container's view.
  n.write("/sys/fs/cpu.max", "1000 100000\n");
  const node_plan p = n.plan();
  CHECK(p.warnings.empty());
  CHECK(p.cores == 1);  // 0.5 CPU: one core, never zero
  CHECK(p.cores_source.find("cgroup quota 0.5 CPUs") != std::string::npos);
  CHECK(p.memory == 512 * (std::uint64_t{1} << 20));
  // A quota that is no round number reads with three significant digits: 4/3 CPUs.
  fake_node third(128, 128, 256 * kGiB);
  make_v2_container(third);
  third.write("/sys/fs/cgroup/cpu.max", "400000 300000\n");
  const node_plan q = third.plan();
  CHECK(q.cores == 2);
  CHECK(q.cores_source.find("cgroup quota 1.33 CPUs: ") != std::string::npos);
  CHECK(p.hardware_threads == 128);

  SUBCASE("no quota and no limit: max") {
    n.write("/sys/fs/cgroup/cpu.max", "max 100000\n");
    n.write("/sys/fs/cgroup/memory.max", "max\n");
    const node_plan q = n.plan();
    CHECK(q.warnings.empty());
    CHECK_FALSE(q.quota_cpus);
    CHECK(q.cores == 128);
    CHECK(q.cores_source == "hardware threads");
    CHECK(q.memory == 256 * kGiB);
    CHECK(q.memory_source == "physical memory");
  }
}

TEST_CASE("node_plan.v2_nested_cgroups_take_the_least_on_the_way_to_the_root") {
  fake_node n(64, 64, 64 * kGiB);
  n.write("proc_cgroup", "0::/ci/job7/step\n");
  n.write("proc_mountinfo", "41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  n.write("/sys/fs/cgroup/ci/cpu.max", "400000 100000\n");        // 4 CPUs
  n.write("/sys/fs/cgroup/ci/job7/cpu.max", "800000 100000\n");   // 8: the parent's 4 wins
  n.write("/sys/fs/cgroup/ci/job7/step/cpu.max", "max 100000\n");
  n.write("/sys/fs/cgroup/ci/job7/memory.max", "2147483648\n");
  const node_plan p = n.plan();
  CHECK(p.cores == 4);
  CHECK(p.quota_source.find("/ci/cpu.max") != std::string::npos);
  CHECK(p.memory == 2 * kGiB);
}

TEST_CASE("node_plan.mount_points_with_escaped_spaces_are_read") {
  // Contract: mountinfo writes a space in a path as "\040" (octal escapes); the cgroup tree is found
  // at the unescaped path, wherever the escape stands in it (here right after the root's '/').
  fake_node n(64, 64, 64 * kGiB);
  n.write("proc_cgroup", "0::/job\n");
  n.write("proc_mountinfo", "41 1 0:31 / /\\040cg\\040v2 rw - cgroup2 cgroup2 rw\n");
  n.write("/ cg v2/job/cpu.max", "300000 100000\n");  // 3 CPUs
  const node_plan p = n.plan();
  CHECK(p.warnings.empty());
  CHECK(p.cores == 3);
  CHECK(p.quota_source.find("/ cg v2/job/cpu.max") != std::string::npos);
}

TEST_CASE("node_plan.affinity_mask_and_local_ranks") {
  fake_node n(112, 112, 1024 * kGiB);
  n.write("proc_cgroup", "0::/\n");
  n.write("proc_mountinfo", "41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");

  SUBCASE("torchrun: 8 local ranks share 112 cores") {
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}};
    const node_plan p = n.plan();
    CHECK(p.warnings.empty());
    CHECK(p.local_rank == 3);
    CHECK(p.local_ranks == 8);
    CHECK(p.ranks_source == "LOCAL_RANK/LOCAL_WORLD_SIZE");
    CHECK(p.rank_cores == 14);
    CHECK(p.rank_memory == 128 * kGiB);
    CHECK(p.describe().find("rank 3 of 8 on this node") != std::string::npos);
  }
  SUBCASE("3 ranks on a cpuset-sized mask of 4 cores: 1 each, never 0") {
    n.in.hardware_threads = 4;
    n.in.affinity_cpus = cpu_range(0, 4);
    n.env = {{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}};
    const node_plan p = n.plan();
    CHECK(p.local_ranks == 3);
    CHECK(p.rank_cores == 1);
    n.env = {{"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "7"}};
    CHECK(n.plan().rank_cores == 1);  // 4 cores, 8 ranks: still one core each
  }
  SUBCASE("a mask with gaps is written as its runs") {
    // The plan's JSON and `pinfeed info` give CPU lists as the kernel writes them: runs joined
    // by '-', single CPUs alone, never a gap folded into a run.
    n.in.affinity_cpus = std::vector<unsigned>{0, 1, 2, 3, 7, 9, 10, 63};
    const auto j = nlohmann::json::parse(n.plan().to_json());
    CHECK(j["cores"]["affinity_cpus"] == "0-3,7,9-10,63");
    CHECK(j["cores"]["affinity"] == 8);
  }
  SUBCASE("a launcher bound each rank to cores of its own: the mask is not divided again") {
    n.in.affinity_cpus = cpu_range(14, 14);
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "0"}};
    const node_plan p = n.plan();
    CHECK(p.cores == 14);
    CHECK(p.cores_source == "affinity mask");
    CHECK(p.rank_cores == 14);
    CHECK(p.rank_cores_source.find("not divided") != std::string::npos);
  }
  SUBCASE("Slurm tasks-per-node lists") {
    n.env = {{"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODEID", "1"}, {"SLURM_LOCALID", "2"}, {"SLURM_STEP_ID", "0"}};
    node_plan p = n.plan();
    CHECK(p.warnings.empty());
    CHECK(p.local_ranks == 4);
    CHECK(p.local_rank == 2);
    n.env = {{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "1"}};
    CHECK(n.plan().local_ranks == 1);
    n.env = {{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "1"}};
    CHECK(n.plan().local_ranks == 2);
    // A step's own list wins inside a step; the job's list is for the allocation.
    n.env = {{"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_STEP_ID", "0"},
             {"SLURM_NODEID", "0"}, {"SLURM_LOCALID", "1"}};
    p = n.plan();
    CHECK(p.local_ranks == 2);
    CHECK(p.ranks_source == "SLURM_LOCALID/SLURM_STEP_TASKS_PER_NODE");
    // srun -n 2 inside sbatch --ntasks-per-node=8: the step's 2 tasks, not the allocation's 8.
    n.env = {{"SLURM_NTASKS_PER_NODE", "8"}, {"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_STEP_TASKS_PER_NODE", "2"},
             {"SLURM_STEP_ID", "3"}, {"SLURM_NODEID", "0"}, {"SLURM_LOCALID", "0"}};
    CHECK(n.plan().local_ranks == 2);
    // A batch script's own process (no step): the allocation's counts are not its ranks.
    n.env = {{"SLURM_NTASKS_PER_NODE", "8"}, {"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_NODEID", "0"}, {"SLURM_LOCALID", "0"}};
    p = n.plan();
    CHECK(p.local_ranks == 1);
    CHECK(p.ranks_source == "one process");
  }
}

TEST_CASE("node_plan.bad_inputs_are_named_and_left_out") {
  fake_node n(16, 16, 32 * kGiB);
  n.write("proc_cgroup", "0::/job\n");
  n.write("proc_mountinfo", "41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  auto check_one_process = [](const node_plan& p) {
    CHECK(p.local_ranks == 1);
    CHECK(p.local_rank == 0);
    CHECK(p.rank_cores == 16);
  };
  SUBCASE("rank variables") {
    for (const auto& [size, rank, named] :
         std::vector<std::tuple<std::string, std::string, std::string>>{{"0", "0", "LOCAL_WORLD_SIZE=0"},
                                                                       {"abc", "0", "LOCAL_WORLD_SIZE=abc"},
                                                                       {"-2", "0", "LOCAL_WORLD_SIZE=-2"},
                                                                       {"8", "8", "LOCAL_RANK=8"},
                                                                       {"8", "x", "LOCAL_RANK=x"}}) {
      CAPTURE(size);
      CAPTURE(rank);
      n.env = {{"LOCAL_WORLD_SIZE", size}, {"LOCAL_RANK", rank}};
      const node_plan p = n.plan();
      CHECK(warned(p, named));
      check_one_process(p);
    }
    n.env = {{"SLURM_TASKS_PER_NODE", "2(x3"}, {"SLURM_NODEID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}};
    CHECK(warned(n.plan(), "SLURM_TASKS_PER_NODE=2(x3"));
    n.env = {{"SLURM_TASKS_PER_NODE", "2(x3)"}, {"SLURM_NODEID", "5"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}};
    CHECK(warned(n.plan(), "no task count for node 5"));
    check_one_process(n.plan());
  }
  SUBCASE("malformed cgroup files") {
    n.write("/sys/fs/cgroup/job/cpu.max", "abc\n");
    n.write("/sys/fs/cgroup/job/memory.max", "-5\n");
    n.write("/sys/fs/cgroup/job/cpuset.cpus.effective", "\n");
    const node_plan p = n.plan();
    CHECK(warned(p, "malformed " + n.in.cgroup_root_prefix + "/sys/fs/cgroup/job/cpu.max: 'abc'"));
    CHECK(warned(p, "/sys/fs/cgroup/job/memory.max: '-5'"));
    CHECK(warned(p, "cpuset.cpus.effective has no CPUs"));
    CHECK(p.cores == 16);
    CHECK(p.memory == 32 * kGiB);
    check_one_process(p);
    n.write("/sys/fs/cgroup/job/cpu.max", "0 100000\n");
    n.write("/sys/fs/cgroup/job/cpuset.cpus.effective", "3-1\n");
    const node_plan q = n.plan();
    CHECK(warned(q, "cpu.max: '0 100000'"));
    CHECK(warned(q, "cpuset.cpus.effective: '3-1'"));
    CHECK(q.cores == 16);
  }
  SUBCASE("an unreadable cgroup file") {
    // A directory where the file should be: present, but nothing can be read from it.
    std::filesystem::create_directories(n.in.cgroup_root_prefix + "/sys/fs/cgroup/job/cpu.max");
    const node_plan p = n.plan();
    CHECK(warned(p, "cannot read " + n.in.cgroup_root_prefix + "/sys/fs/cgroup/job/cpu.max"));
    CHECK(p.cores == 16);
  }
  SUBCASE("v1 quota without a readable period") {
    fake_node v1(16, 16, 32 * kGiB);
    make_v1(v1);
    v1.write("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us", "50000\n");
    const node_plan p = v1.plan();
    CHECK(warned(p, "cpu.cfs_period_us: the quota in"));
    CHECK(p.cores == 16);
    CHECK_FALSE(p.quota_cpus);  // left out of the plan, as the warning says: no quota at all
    CHECK(p.quota_source.empty());
  }
  SUBCASE("no /proc/self/cgroup, a malformed line") {
    n.in.proc_self_cgroup = (n.dir.path / "missing").string();
    CHECK(warned(n.plan(), "cannot read " + n.in.proc_self_cgroup));
    n.in.proc_self_cgroup = (n.dir.path / "proc_cgroup").string();
    n.write("proc_cgroup", "garbage\n0::/job\n");
    CHECK(warned(n.plan(), "malformed line in " + n.in.proc_self_cgroup + ": 'garbage'"));
  }
  SUBCASE("a cgroup path outside the mount: nothing above the mount point is read") {
    n.write("proc_cgroup", "0::/../../etc\n");
    n.write("/sys/fs/cgroup/cpu.max", "200000 100000\n");
    n.write("/sys/etc/cpu.max", "100000 100000\n");  // outside the mount: never read
    const node_plan p = n.plan();
    CHECK(p.cores == 2);  // read as the mount's root
  }
}

TEST_CASE("node_plan.this_process_and_its_json") {
  const node_plan& p = this_node_plan();
  CHECK(&p == &this_node_plan());  // computed once
  CHECK(p.cores >= 1);
  CHECK(p.cores <= p.hardware_threads);
  CHECK(p.rank_cores >= 1);
  CHECK(p.rank_cores <= p.cores);
  CHECK(p.memory > 0);
  CHECK(p.memory <= p.physical_memory);
  const auto j = nlohmann::json::parse(p.to_json());
  CHECK(j["cores"]["value"] == p.cores);
  CHECK(j["cores"]["source"] == p.cores_source);
  CHECK(j["memory"]["bytes"] == p.memory);
  CHECK(j["local_ranks"]["size"] == p.local_ranks);
  CHECK(j["rank"]["cores"] == p.rank_cores);
  CHECK(j["warnings"].size() == p.warnings.size());
  CHECK(p.describe().find("cores        " + std::to_string(p.cores) + " of ") == 0);
}

TEST_CASE("node_plan.two_sockets_eight_gpus_eight_ranks") {
  // 2 packages of 56 cores, 4 GPUs on each (buses 0x10-0x13 on package 0, 0x14-0x17 on package 1).
  fake_node n(112, 112, 2048 * kGiB);
  n.write("proc_cgroup", "0::/\n");
  n.write("proc_mountinfo", "41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  n.in.topology_xml = test::topology_xml::machine(2, 56, 4);
  std::vector<std::string> all;
  for (int b = 0x10; b < 0x18; ++b) {
    char id[32];
    std::snprintf(id, sizeof id, "0000:%02X:00.0", b);  // CUDA may spell it in capitals
    all.emplace_back(id);
  }

  SUBCASE("every rank sees all 8 GPUs") {
    n.in.gpu_bus_ids = all;
    for (unsigned rank = 0; rank < 8; ++rank) {
      CAPTURE(rank);
      n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", std::to_string(rank)}};
      const node_plan p = n.plan();
      CHECK(p.warnings.empty());
      REQUIRE(p.gpu);
      CHECK(*p.gpu == static_cast<int>(rank));
      CHECK(p.numa_nodes == 2);
      REQUIRE(p.numa_node);
      CHECK(*p.numa_node == rank / 4);
      CHECK(p.gpu_cpus == cpu_range(56 * (rank / 4), 56));
      CHECK(p.ranks_near_gpu == 4);
      CHECK(p.rank_cpus == cpu_range(56 * (rank / 4) + 14 * (rank % 4), 14));  // rank 3: 42-55
      CHECK(p.rank_cores == 14);
      CHECK(p.placed_cores == 14);
    }
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}};
    CHECK(n.plan().describe().find("CUDA device 3 (PCI 0000:13:00.0): 56 CPUs close to GPU 3 (NUMA node 0), 4 local ranks "
                                   "near them; this rank on CPUs 42-55") != std::string::npos);
  }
  SUBCASE("each rank sees only its own GPU (CUDA_VISIBLE_DEVICES per rank)") {
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "5"}};
    n.in.gpu_bus_ids = std::vector<std::string>{all[5]};
    const node_plan p = n.plan();
    REQUIRE(p.gpu);
    CHECK(*p.gpu == 0);
    CHECK(p.gpu_bus_id == "0000:15:00.0");
    CHECK(p.ranks_near_gpu == 4);
    CHECK(p.rank_cpus == cpu_range(56 + 14, 14));
  }
  SUBCASE("3 ranks: GPUs 0 and 1 on package 0, GPU 2 alone on package 1") {
    n.in.gpu_bus_ids = std::vector<std::string>{all[0], all[1], all[4]};
    n.env = {{"LOCAL_WORLD_SIZE", "3"}, {"LOCAL_RANK", "2"}};
    node_plan p = n.plan();
    CHECK(p.ranks_near_gpu == 1);  // GPU 2 is bus 0x14, package 1: alone there
    CHECK(p.rank_cpus == cpu_range(56, 56));
    CHECK(p.placed_cores == 56);
    CHECK(p.rank_cores == 37);  // unplaced (--bind none, another device): 112 cores / 3 ranks
    n.env = {{"LOCAL_WORLD_SIZE", "3"}, {"LOCAL_RANK", "1"}};
    p = n.plan();
    CHECK(p.ranks_near_gpu == 2);
    CHECK(p.rank_cpus == cpu_range(28, 28));
  }
  SUBCASE("a container's cpuset of 3 cores on package 1") {
    n.write("/sys/fs/cgroup/cpuset.cpus.effective", "60-62\n");
    n.in.affinity_cpus = std::vector<unsigned>{60, 61, 62};
    n.in.gpu_bus_ids = all;
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "5"}};
    node_plan p = n.plan();
    CHECK(p.cores == 3);
    CHECK(p.gpu_cpus == std::vector<unsigned>{60, 61, 62});
    CHECK(p.rank_cpus.size() == 1);  // 4 ranks near 3 CPUs: one each, shared
    CHECK(p.rank_cores == 1);
    // A rank whose GPU is on package 0, which the mask leaves none of: nothing placed, a warning.
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}};
    p = n.plan();
    CHECK(p.rank_cpus.empty());
    CHECK(warned(p, "none of the CPUs close to GPU 1 are in this process's affinity mask"));
    CHECK(p.rank_cores >= 1);
  }
  SUBCASE("a quota of 2.5 CPUs: the rank's cores stay within the quota's share") {
    n.write("/sys/fs/cgroup/cpu.max", "250000 100000\n");
    n.in.gpu_bus_ids = all;
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "0"}};
    const node_plan p = n.plan();
    CHECK(p.cores == 3);
    CHECK(p.rank_cores == 1);
    CHECK(p.rank_cpus.size() == 14);  // placed near the GPU, run with one worker
    CHECK(p.placed_cores == 1);
  }
  SUBCASE("a GPU the topology does not have, a broken topology") {
    n.in.gpu_bus_ids = std::vector<std::string>{"0000:00:00.0"};  // the simulator's bus id
    node_plan p = n.plan();
    CHECK(warned(p, "0000:00:00.0 is not an NVIDIA GPU of the machine's topology"));
    CHECK(p.rank_cpus.empty());
    n.in.topology_xml = "<topology version=\"2.0\"><object type=";
    n.in.gpu_bus_ids = all;
    p = n.plan();
    CHECK(warned(p, "hwloc cannot"));
    CHECK(p.rank_cpus.empty());
    CHECK(p.cores == 112);
  }
}

TEST_CASE("node_plan.launcher_bindings_and_hyperthreads") {
  fake_node n(112, 112, 1024 * kGiB);
  n.write("proc_cgroup", "0::/\n");
  n.write("proc_mountinfo", "41 1 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  SUBCASE("4 ranks bound by socket (Open MPI's default past 2 ranks): 2 ranks share each socket") {
    n.in.affinity_cpus = cpu_range(56, 56);
    n.env = {{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}};
    const node_plan p = n.plan();
    CHECK(p.cores == 56);
    CHECK(p.ranks_sharing_cores == 2);
    CHECK(p.rank_cores == 28);
  }
  SUBCASE("8 ranks each bound to one core: 1 each, not divided") {
    n.in.affinity_cpus = std::vector<unsigned>{9};
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}};
    const node_plan p = n.plan();
    CHECK(p.ranks_sharing_cores == 1);
    CHECK(p.rank_cores == 1);
  }
  SUBCASE("two hardware threads a core: a rank's CPUs are whole cores, siblings together") {
    // 2 packages of 28 cores, 2 threads each: CPU c and c + 56 are one core's threads.
    n.in.hardware_threads = 112;
    n.in.topology_xml = test::topology_xml::machine(2, 28, 4, 2);
    n.in.gpu_bus_ids = std::vector<std::string>{"0000:10:00.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0",
                                                "0000:14:00.0", "0000:15:00.0", "0000:16:00.0", "0000:17:00.0"};
    n.env = {{"LOCAL_WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}};
    const node_plan p = n.plan();
    CHECK(p.warnings.empty());
    // Rank 1: the second quarter of package 0's 28 cores, cores 7-13, with their threads 63-69.
    std::vector<unsigned> want = cpu_range(7, 7);
    for (const unsigned c : cpu_range(63, 7)) want.push_back(c);
    CHECK(p.rank_cpus == want);
    CHECK(p.placed_cores == 14);
    CHECK(p.gpu_cpus.size() == 56);
  }
  SUBCASE("more local ranks than visible GPUs: no GPU of its own, nothing placed") {
    n.in.topology_xml = test::topology_xml::machine(2, 56, 1);
    n.in.gpu_bus_ids = std::vector<std::string>{"0000:10:00.0", "0000:11:00.0"};
    n.env = {{"LOCAL_WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}};
    const node_plan p = n.plan();
    CHECK(warned(p, "local rank 3 has no CUDA device of its own (2 visible)"));
    CHECK_FALSE(p.gpu);
    CHECK(p.rank_cpus.empty());
    CHECK(p.rank_cores == 28);
  }
  SUBCASE("without GPU locality looked up (a CPU loader's plan): no CUDA, no topology") {
    n.in.gpu_locality = false;
    n.in.topology_xml = "not XML at all";  // never read
    const node_plan p = n.plan();
    CHECK(p.warnings.empty());
    CHECK(p.locality_source.find("not looked up") != std::string::npos);
  }
}
