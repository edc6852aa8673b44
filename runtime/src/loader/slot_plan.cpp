// The slot plan: how the fields lie in a slot, how many slots the ring has and how many are
// allocated at first (prefetch auto grows into the rest), checked against the memory budget or
// this rank's share of the node's memory, with the source's own memory counted in; and where the
// node plan places a loader.
#include <algorithm>
#include <optional>
#include <string>

#include "../detail/loader_core.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed::detail {
namespace {

constexpr std::size_t kFieldAlign = 256;  // every field starts on a 256-byte boundary (coalesced loads)

std::uint64_t memory_total(const std::vector<memory_use>& parts) {
  std::uint64_t total = 0;
  for (const auto& p : parts) total = p.bytes > ~std::uint64_t{0} - total ? ~std::uint64_t{0} : total + p.bytes;
  return total;
}

std::string memory_list(const std::vector<memory_use>& parts) {
  std::string list;
  for (const auto& p : parts) list += (list.empty() ? "" : ", ") + p.consumer + " " + format_bytes(p.bytes);
  return list;
}

/// The memory `slots` slots take: their data (on the host, and as much on the device with a GPU)
/// and their batches' dataset indices (8 bytes a sample, host).
struct slot_need {
  std::size_t data, host;  ///< a device slot's bytes (with a GPU), and the host's with the indices
};

/// plan_slots() step by step. Sizes driven by the options are checked before anything is
/// allocated: an overflow or a request beyond the machine's memory is an error naming the options,
/// not a std::bad_alloc.
class plan_builder {
 public:
  plan_builder(const loader_options& o, bool cuda) : o_(o), cuda_(cuda), prefetch_auto_(o.prefetch == auto_tune) {
    p_.options_used = "batch_size " + std::to_string(o.batch_size) + ", prefetch " +
                      (prefetch_auto_ ? std::string("auto") : std::to_string(o.prefetch)) + " + max_batches_in_use " +
                      std::to_string(o.max_batches_in_use) + " slots";
  }

  /// The fields' offsets in a slot, and the slot's size (whole pages). A variable-size field has
  /// its extents (16 bytes a sample) where a fixed one has its data, and its arena (its most per
  /// sample for every sample) after every field: the copy then takes the fields and extents in one
  /// piece and each arena's used part. The device_only fields come last, past the host slot's end
  /// (host_slot_bytes): only a device slot has them.
  void lay_out(const std::vector<field_spec>& fields) {
    for (const auto& field : fields)
      if (field.device_only && !cuda_)
        throw pinfeed::invalid_argument("loader: field '" + field.name +
                                        "' is made on the GPU after the copy (device_only), and this loader's batches stay on the "
                                        "CPU: give it a CUDA device");
    std::size_t offset = 0;
    const auto place = [&](const field_spec& field, std::size_t per_sample) {
      offset = round_up(offset, kFieldAlign);
      const std::size_t at = offset;
      std::size_t field_bytes = 0;
      if (__builtin_mul_overflow(per_sample, o_.batch_size, &field_bytes) ||
          __builtin_add_overflow(offset, field_bytes, &offset))
        too_big("field '" + field.name + "' of " + std::to_string(per_sample) + " bytes per sample overflows a slot");
      return at;
    };
    p_.field_offset.assign(fields.size(), 0);
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (!fields[f].device_only) p_.field_offset[f] = place(fields[f], fields[f].variable ? 16 : fields[f].bytes());
    for (const auto& field : fields) p_.arena_offset.push_back(field.variable ? place(field, field.bytes()) : 0);
    p_.host_slot_bytes = round_up(std::max<std::size_t>(offset, 1), page_size());
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (fields[f].device_only) p_.field_offset[f] = place(fields[f], fields[f].bytes());
    p_.slot_bytes = round_up(std::max<std::size_t>(offset, 1), page_size());
  }

  /// The source's adapting parts (a remote read-ahead) get what the first slots leave; the rest of
  /// its parts and the slots prefetch auto may add are then checked against the whole budget.
  /// Without a budget, this rank's share of the node's memory (the node plan: physical memory or
  /// a cgroup limit, divided among the local ranks) is the budget of the host's parts.
  void limit_source(source& src) {
    if (cuda_) device_memory_ = src.device_memory(o_.batch_size);
    const std::size_t first = (prefetch_auto_ ? 2 : o_.prefetch) + o_.max_batches_in_use;
    const auto n = need_for(first);
    if (o_.memory_budget) {
      const std::uint64_t device = memory_total(device_memory_);
      const std::uint64_t slots = n ? n->host + (cuda_ ? n->data + device : 0) : ~std::uint64_t{0};
      src.limit_memory(*o_.memory_budget - std::min<std::uint64_t>(*o_.memory_budget, slots));
      source_memory_ = src.memory();
    } else if (rank_memory_ > 0) {
      const std::uint64_t slots = n ? n->host : ~std::uint64_t{0};
      src.limit_memory(rank_memory_ - std::min<std::uint64_t>(rank_memory_, slots));
      source_memory_ = src.memory();
    }
  }

  /// Prefetch auto: the most that fits the budget (or half the rank's memory), kAutoPrefetchMost
  /// at most, 1 at least (which check() then judges).
  void choose_prefetch() {
    p_.prefetch_most = o_.prefetch;
    if (prefetch_auto_) {
      p_.prefetch_most = 1;
      for (std::size_t k = kAutoPrefetchMost; k > 1; --k) {
        const auto n = need_for(k + o_.max_batches_in_use);
        if (!n || (rank_memory_ > 0 && memory_total(host_parts(*n)) > rank_memory_ / 2)) continue;
        if (o_.memory_budget && memory_total(all_parts(*n)) > *o_.memory_budget) continue;
        p_.prefetch_most = k;
        break;
      }
    }
    p_.prefetch = prefetch_auto_ ? std::min<std::size_t>(2, p_.prefetch_most) : o_.prefetch;
  }

  /// Every slot the ring may have, with the source's memory, fits the budget (or the rank's share).
  void check() const {
    const std::size_t slots = p_.prefetch_most + o_.max_batches_in_use;
    const auto n = need_for(slots);
    if (!n) too_big("the slots' size overflows");
    if (o_.memory_budget) {
      const auto parts = all_parts(*n);
      if (memory_total(parts) > *o_.memory_budget)
        throw pinfeed::invalid_argument("loader: the memory budget of " + format_bytes(*o_.memory_budget) +
                                        " is too small for " + memory_list(parts) + " (" +
                                        format_bytes(memory_total(parts)) + " in all; " + p_.options_used + ")");
    } else if (rank_memory_ > 0 && memory_total(host_parts(*n)) > rank_memory_) {
      too_big("the host memory needed, " + memory_list(host_parts(*n)) + " (" +
              format_bytes(memory_total(host_parts(*n))) + " in all; " + std::to_string(slots) + " slots of " +
              format_bytes(p_.host_slot_bytes) + "), is more than " + rank_memory_text());
    }
  }

  slot_plan take() { return std::move(p_); }

 private:
  [[noreturn]] void too_big(const std::string& what) const {
    throw pinfeed::invalid_argument("loader: " + what + " (" + p_.options_used + ")");
  }
  /// x rounded up to a multiple of a, with an overflow check (the sizes come from options and shapes).
  std::size_t round_up(std::size_t x, std::size_t a) const {
    std::size_t r = 0;
    if (__builtin_add_overflow(x, a - 1, &r)) too_big("the slots' size overflows");
    return r / a * a;
  }
  /// Nullopt when it overflows.
  std::optional<slot_need> need_for(std::size_t slots) const {
    slot_need n{};
    std::size_t index_bytes = 0, host_data = 0;
    if (__builtin_mul_overflow(slots, p_.slot_bytes, &n.data) || __builtin_mul_overflow(slots, p_.host_slot_bytes, &host_data) ||
        __builtin_mul_overflow(slots * sizeof(std::uint64_t), o_.batch_size, &index_bytes) ||
        __builtin_add_overflow(host_data, index_bytes, &n.host))
      return std::nullopt;
    return n;
  }
  /// The host's parts alone: what the rank's share of memory holds (device slots are on the GPU).
  std::vector<memory_use> host_parts(const slot_need& n) const {
    std::vector<memory_use> parts{{cuda_ ? "pinned host slots" : "host slots", n.host}};
    parts.insert(parts.end(), source_memory_.begin(), source_memory_.end());
    return parts;
  }
  /// The host's parts and, with a GPU, the device slots after the host slots.
  std::vector<memory_use> all_parts(const slot_need& n) const {
    std::vector<memory_use> parts = host_parts(n);
    if (cuda_) {
      parts.insert(parts.begin() + 1, memory_use{"device slots", n.data});
      parts.insert(parts.begin() + 2, device_memory_.begin(), device_memory_.end());
    }
    return parts;
  }
  std::string rank_memory_text() const {
    return "this process's share of memory, " + format_bytes(rank_memory_) + " (" + plan_.memory_source +
           (plan_.local_ranks > 1 ? ", divided among " + std::to_string(plan_.local_ranks) + " local ranks"
                                  : std::string()) +
           "; set memory_budget to choose another)";
  }

  const loader_options& o_;
  const bool cuda_, prefetch_auto_;
  const node_plan& plan_ = this_node_plan_without_gpu();
  const std::uint64_t rank_memory_ = plan_.rank_memory;
  std::vector<memory_use> source_memory_;
  std::vector<memory_use> device_memory_;  ///< the source's on the loader's device (source::device_memory)
  slot_plan p_;
};

}  // namespace

node_place place_of(const loader_options& o, const device_choice& dev) {
  const std::size_t cores = this_node_plan_without_gpu().rank_cores;
  if (o.bind != cpu_binding::plan || !dev.is_cuda()) return {{}, {}, cores};  // a CPU loader never asks CUDA
  return place_in(this_node_plan(), dev, cores);
}

node_place place_in(const node_plan& plan, const device_choice& dev, std::size_t cores) {
  node_place place;
  place.cores = cores;
  if (!dev.is_cuda() || !plan.gpu || *plan.gpu != dev.index || plan.rank_cpus.empty()) return place;
  place.cpus = plan.rank_cpus;
  place.cores = plan.placed_cores;
  if (plan.numa_nodes >= 2) place.numa_node = plan.numa_node;  // one node: nothing to choose
  return place;
}

slot_plan plan_slots(const loader_options& o, const std::vector<field_spec>& fields, bool cuda, source& src) {
  plan_builder b(o, cuda);
  b.lay_out(fields);
  b.limit_source(src);
  b.choose_prefetch();
  b.check();
  return b.take();
}

}  // namespace pinfeed::detail
