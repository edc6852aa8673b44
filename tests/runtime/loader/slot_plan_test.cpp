// The slot plan (runtime/src/loader/slot_plan.cpp): the fields' layout in a slot, how many slots,
// and the memory they and the source take against the budget or this rank's share of memory.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/loader_core.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/runtime/random.hpp"
#include "runtime/loader_fixtures.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {
using test::kFeatures;
using test::produce_reference;
using test::reference_fields;
loader_options cpu_options(std::size_t batch, std::size_t workers, std::size_t prefetch = 3) {
  return pinfeed::test::cpu_loader(batch, workers, 2024, prefetch);
}

/// A source that records what limit_memory() gave it and reports a fixed part of its own.
struct budgeted_source : source {
  std::uint64_t own = 0;
  std::uint64_t limit = ~std::uint64_t{0};
  int limited = 0;
  std::uint64_t size() const override { return 64; }
  std::vector<field_spec> fields() const override { return {{"x", dtype::u8, {100}}, {"y", dtype::i64, {}}}; }
  void produce(sample&) override {}
  std::vector<memory_use> memory() const override { return {{"read-ahead", own}}; }
  void limit_memory(std::uint64_t bytes) override {
    limit = bytes;
    ++limited;
  }
};
}  // namespace

TEST_CASE("slot_plan.fields_lie_on_256_byte_boundaries_in_whole_pages") {
  budgeted_source src;
  loader_options o = cpu_options(4, 1, 3);
  const auto p = detail::plan_slots(o, src.fields(), /*cuda=*/false, src);
  // x: 4 x 100 bytes at 0; y: 4 x 8 bytes at the next 256-byte boundary.
  CHECK(p.field_offset == std::vector<std::size_t>{0, 512});
  CHECK(p.slot_bytes % page_size() == 0);
  CHECK(p.slot_bytes >= 512 + 32);
  CHECK(p.prefetch == 3);
  CHECK(p.prefetch_most == 3);
  CHECK(p.options_used == "batch_size 4, prefetch 3 + max_batches_in_use 1 slots");
}

TEST_CASE("slot_plan.prefetch_auto_takes_what_the_budget_leaves_and_the_source_its_share") {
  budgeted_source src;
  src.own = 1000;
  loader_options o = cpu_options(4, 1, auto_tune);
  const std::size_t page = page_size();
  // Slots of one page and 4 x 8 index bytes each: a budget for 5 slots (4 prefetch + 1 in use)
  // and the source's 1000 bytes, but not for 6.
  o.memory_budget = 5 * (page + 32) + 1000 + 10;
  const auto p = detail::plan_slots(o, src.fields(), /*cuda=*/false, src);
  CHECK(p.slot_bytes == page);
  CHECK(p.prefetch_most == 4);
  CHECK(p.prefetch == 2);  // auto starts at 2 and grows into the rest
  // The source was told what the first 2 + 1 slots leave of the budget, once.
  CHECK(src.limited == 1);
  CHECK(src.limit == *o.memory_budget - 3 * (page + 32));
  // With the device slots too (a GPU), the same budget holds fewer.
  budgeted_source gpu_src;
  gpu_src.own = 1000;
  const auto q = detail::plan_slots(o, gpu_src.fields(), /*cuda=*/true, gpu_src);
  CHECK(q.prefetch_most == 1);
}

TEST_CASE("slot_plan.a_budget_too_small_names_each_part_and_the_options") {
  budgeted_source src;
  src.own = 1 << 20;
  loader_options o = cpu_options(4, 1, 2);
  o.memory_budget = 1 << 20;
  CHECK_THROWS_WITH_AS((void)detail::plan_slots(o, src.fields(), false, src),
                       doctest::Contains("the memory budget of 1.0 MiB is too small for host slots"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)detail::plan_slots(o, src.fields(), false, src), doctest::Contains("read-ahead 1.0 MiB"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)detail::plan_slots(o, src.fields(), false, src),
                       doctest::Contains("batch_size 4, prefetch 2 + max_batches_in_use 1 slots"), std::invalid_argument);
}

TEST_CASE("slot_plan.a_cpu_loader_is_placed_nowhere_and_works_on_the_ranks_cores") {
  loader_options o = cpu_options(4, 1);
  const auto place = detail::place_of(o, resolve_device("cpu"));
  CHECK(place.cpus.empty());
  CHECK(!place.numa_node);
  CHECK(place.cores == this_node_plan_without_gpu().rank_cores);
}

TEST_CASE("slot_plan.a_loader_is_placed_only_on_the_plans_own_gpu") {
  // Contract: the plan's CPUs, cores and NUMA node go to a loader on the GPU the plan was made for;
  // a loader on any other device (another GPU of the node, the CPU) keeps the rank's cores and is
  // bound nowhere, and so is every loader where the plan placed nothing (no GPU, no CPUs known).
  node_plan plan;
  plan.gpu = 1;
  plan.rank_cpus = {4, 5, 6, 7};
  plan.placed_cores = 3;
  plan.numa_nodes = 2;
  plan.numa_node = 1;
  // (made by hand: resolving "cuda:N" asks for a usable device, and this runs without one)
  const auto on = [&](int cuda) {
    device_choice dev;
    if (cuda >= 0) dev = {device_choice::kind::cuda, cuda};
    return detail::place_in(plan, dev, 9);
  };
  const auto mine = on(1);
  CHECK(mine.cpus == std::vector<unsigned>{4, 5, 6, 7});
  CHECK(mine.cores == 3);
  CHECK(mine.numa_node == 1u);
  for (const int other : {0, 2, -1}) {  // -1: the CPU
    CAPTURE(other);
    const auto p = on(other);
    CHECK(p.cpus.empty());
    CHECK(p.cores == 9);
    CHECK(!p.numa_node);
  }
  plan.numa_nodes = 1;  // one NUMA node: nothing to choose
  CHECK(!on(1).numa_node);
  plan.rank_cpus.clear();  // no CPUs known near the GPU
  CHECK(on(1).cpus.empty());
  CHECK(on(1).cores == 9);
  plan.rank_cpus = {4};
  plan.gpu.reset();  // no GPU in the plan
  CHECK(on(1).cpus.empty());
}

TEST_CASE("loader.oversized_options_name_the_options_not_bad_alloc") {
  // 10^8 samples of 4 KiB a batch: far beyond any machine's memory. The error names the options
  // and the bytes before anything is allocated.
  auto src = make_source(16, {{"x", dtype::u8, {4096}}}, [](sample&) {});
  auto o = test::cpu_loader(100'000'000, 1, 0);
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("batch_size 100000000"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("is more than this process's share of memory"),
                       std::invalid_argument);
  // A slot whose byte count overflows size_t.
  auto huge = make_source(16, {{"x", dtype::u8, {std::int64_t{1} << 40}}}, [](sample&) {});
  o.batch_size = std::size_t{1} << 30;
  CHECK_THROWS_WITH_AS(loader(huge, o), doctest::Contains("overflows"), std::invalid_argument);
  // A field whose own bytes per sample overflow.
  CHECK_THROWS_WITH_AS(
      make_source(16, {{"x", dtype::f64, {std::int64_t{1} << 40, std::int64_t{1} << 40}}}, [](sample&) {}),
      doctest::Contains("too large"), std::invalid_argument);
}

TEST_CASE("loader.memory_budget_counts_the_slots_and_what_the_source_holds") {
  // A source that holds 3 MiB of its own (a cache, say) besides the loader's slots.
  struct holding_source final : source {
    std::uint64_t size() const override { return 64; }
    std::vector<field_spec> fields() const override { return reference_fields(); }
    void produce(sample& s) override { produce_reference(s); }
    std::vector<memory_use> memory() const override { return {{"test cache", 3u << 20}}; }
  };
  const auto src = std::make_shared<holding_source>();
  loader_options o = cpu_options(8, 1);
  o.memory_budget = 3u << 20;  // the cache alone fills it: the slots do not fit
  try {
    loader l(src, o);
    FAIL("a loader over its memory budget was made");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("the memory budget of 3.0 MiB is too small for host slots") != std::string::npos);
    CHECK(what.find("test cache 3.0 MiB") != std::string::npos);
    CHECK(what.find("batch_size 8") != std::string::npos);
  }
  o.memory_budget = 16u << 20;
  loader fits(src, o);
  CHECK(fits.next());
  o.memory_budget = 0;
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("memory_budget must be positive"), std::invalid_argument);
  o.memory_budget = std::uint64_t{1} << 62;
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("more than the memory this process may use"), std::invalid_argument);
}

TEST_CASE("loader.without_a_budget_the_node_plans_memory_bounds_the_slots") {
  const node_plan& plan = this_node_plan_without_gpu();  // a CPU loader's plan
  REQUIRE(plan.rank_memory > 0);
  // Samples of a little over a quarter of this rank's memory.
  const std::uint64_t quarter = plan.rank_memory / 4 + 4096;
  const auto src = make_source(64, {{"data", dtype::u8, {static_cast<std::int64_t>(quarter)}}}, [](sample&) {});
  loader_options o = cpu_options(2, 1, 2);  // 3 slots of 2 samples: 1.5x this rank's memory
  try {
    loader l(src, o);
    FAIL("a loader larger than this rank's memory was made");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("is more than this process's share of memory, " + format_bytes(plan.rank_memory)) != std::string::npos);
    CHECK(what.find(plan.memory_source) != std::string::npos);  // where the limit came from
    CHECK(what.find("set memory_budget to choose another") != std::string::npos);
    CHECK(what.find("batch_size 2") != std::string::npos);
  }
  // Prefetch auto takes the fewest slots (2) when more do not fit half of it; samples of over half
  // of this rank's memory do not fit even those: refused at construction, not killed later.
  const std::uint64_t half = plan.rank_memory / 2 + 4096;
  const auto big = make_source(64, {{"data", dtype::u8, {static_cast<std::int64_t>(half)}}}, [](sample&) {});
  o = cpu_options(1, 1, 2);
  o.prefetch = auto_tune;
  CHECK_THROWS_WITH_AS(loader(big, o), doctest::Contains("is more than this process's share of memory"), std::invalid_argument);
  // An explicit budget is the limit instead (checked against the plan's whole memory).
  o.memory_budget = plan.memory + 1;
  CHECK_THROWS_WITH_AS(loader(src, o), doctest::Contains("more than the memory this process may use"), std::invalid_argument);
}

TEST_CASE("slot_plan.device_only_fields_lie_past_the_host_slot_and_count_on_the_device_alone") {
  // A field made on the GPU after the copy: laid out after every host field (and arena), so the
  // host slot and the copy stop before it; the budget counts it in the device slots only.
  struct device_made : budgeted_source {
    std::vector<field_spec> fields() const override {
      field_spec made{"made", dtype::f32, {3, 64, 64}};
      made.device_only = true;
      return {made, {"x", dtype::u8, {100}}, {"y", dtype::i64, {}}};
    }
  } src;
  loader_options o = cpu_options(4, 1, 3);
  CHECK_THROWS_WITH_AS((void)detail::plan_slots(o, src.fields(), /*cuda=*/false, src),
                       doctest::Contains("field 'made' is made on the GPU after the copy (device_only), and this loader's batches stay on "
                                         "the CPU"),
                       pinfeed::invalid_argument);
  const auto p = detail::plan_slots(o, src.fields(), /*cuda=*/true, src);
  CHECK(p.field_offset[1] == 0);    // x first, as if `made` were not there
  CHECK(p.field_offset[2] == 512);  // y
  CHECK(p.host_slot_bytes == page_size());
  CHECK(p.field_offset[0] >= 512 + 32);  // made: past the host fields
  CHECK(p.field_offset[0] % 256 == 0);
  CHECK(p.slot_bytes >= p.field_offset[0] + 4 * 3 * 64 * 64 * sizeof(float));
  CHECK(p.slot_bytes % page_size() == 0);
  // A budget between the host's need and the device's: the device slots are what it refuses.
  o.memory_budget = 4 * p.host_slot_bytes + 4096;
  try {
    (void)detail::plan_slots(o, src.fields(), /*cuda=*/true, src);
    FAIL("a budget below the device slots was accepted");
  } catch (const pinfeed::invalid_argument& e) {
    CHECK(std::string(e.what()).find("device slots " + format_bytes(4 * p.slot_bytes)) != std::string::npos);
  }
  // Variable-size and device_only at once: refused by name.
  field_spec both{"both", dtype::u8, {10}, true};
  both.device_only = true;
  CHECK_THROWS_WITH_AS(validate_fields(std::vector<field_spec>{both}),
                       "field 'both' is both variable-size and device_only: a field made on the device has a fixed size",
                       pinfeed::invalid_argument);
}
