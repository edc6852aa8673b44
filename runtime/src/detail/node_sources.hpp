#pragma once
// What the node plan reads from the system (node_sources.cpp): the cgroup limits and the
// launcher's local ranks. Each fills its part of a plan; what it cannot use becomes a warning.

#include <functional>

#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed::detail {

/// The CPU quota (and its file), the cpuset's CPUs and the memory limit (and its file) of the
/// cgroup `in` describes, each the least over the levels up to the hierarchy's root.
void read_cgroup_limits(const node_plan_inputs& in, node_plan& p);

/// The local rank and the ranks on this node from a launcher's variables (`env`): torchrun's, Open
/// MPI's, or a Slurm step's.
void read_local_ranks(const std::function<const char*(const char*)>& env, node_plan& p);

}  // namespace pinfeed::detail
