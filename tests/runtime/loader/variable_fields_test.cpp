// Variable-size fields (field_spec::variable): a slot's arena and extents (slot_plan.cpp), the
// samples' claims (sample::claim), what a batch shows of them (batch::field, batch::extents) and
// their checksum, which does not depend on where the claims fell.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/loader_core.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {

constexpr std::int64_t kMost = 40;  // elements a sample may claim

/// Elements sample i claims: none for every fifth, more than kMost for every seventh (which does
/// not fit), else 1 to 37.
std::size_t wanted(std::uint64_t i) {
  if (i % 5 == 0) return 0;
  if (i % 7 == 0) return kMost + 1 + i % 3;
  return 1 + i % 37;
}

std::uint32_t value(std::uint64_t i, std::size_t k) { return static_cast<std::uint32_t>(i * 1000 + k); }

/// Fields: "tokens" (variable, u32, at most kMost a sample), "fit" (u8: 1 when the claim got its
/// bytes) and "label" (i64).
std::shared_ptr<source> token_source(std::uint64_t size) {
  std::vector<field_spec> fields{{"tokens", dtype::u32, {kMost}, true}, {"fit", dtype::u8, {}}, {"label", dtype::i64, {}}};
  return make_source(size, fields, [](sample& s) {
    const std::size_t n = wanted(s.index());
    if (s.index() % 11 == 3) (void)s.claim<std::uint32_t>("tokens", 5);  // claimed again below: replaced
    const auto t = s.claim<std::uint32_t>("tokens", n);
    for (std::size_t k = 0; k < t.size(); ++k) t[k] = value(s.index(), k);
    s.as<std::uint8_t>("fit")[0] = !t.empty();
    s.as<std::int64_t>("label")[0] = static_cast<std::int64_t>(s.index());
  });
}

loader_options options(std::size_t batch, std::size_t workers) {
  return pinfeed::test::cpu_loader(batch, workers, 77, 2);
}

}  // namespace

TEST_CASE("variable_fields.slot_holds_extents_in_place_and_the_arena_after_every_field") {
  auto src = token_source(10);
  const loader_options o = options(8, 1);
  const auto p = detail::plan_slots(o, src->fields(), /*cuda=*/false, *src);
  // tokens' extents: 8 x 16 bytes at 0; fit: 8 bytes at 256; label: 64 bytes at 512; then the
  // arena (8 x 40 x 4 bytes) at 768.
  CHECK(p.field_offset == std::vector<std::size_t>{0, 256, 512});
  CHECK(p.arena_offset == std::vector<std::size_t>{768, 0, 0});
  CHECK(p.slot_bytes >= 768 + 8 * kMost * 4);
  // The worst case per sample is in the budget: a budget that holds the fixed fields but not the
  // arenas is refused.
  loader_options tight = o;
  tight.memory_budget = 4 * 4096;  // 4 slots of one page each would fit without the arena
  auto big = make_source(10, {{"tokens", dtype::u32, {4096}, true}}, [](sample&) {});
  CHECK_THROWS_WITH_AS((void)detail::plan_slots(tight, big->fields(), false, *big),
                       doctest::Contains("memory budget"), std::invalid_argument);
}

TEST_CASE("variable_fields.samples_claim_what_they_hold_and_a_claim_past_the_most_gets_nothing") {
  const std::uint64_t n = 53;
  loader l(token_source(n), options(8, 2));
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    const auto tokens = b->field("tokens");
    const auto extents = b->extents(0);
    REQUIRE(extents.size() == 2 * b->size());
    const auto* data = static_cast<const std::uint32_t*>(tokens.data);
    const auto fit = b->field<std::uint8_t>("fit");
    std::uint64_t total = 0;
    for (std::size_t j = 0; j < b->size(); ++j) {
      const std::uint64_t i = b->indices()[j];
      CAPTURE(i);
      const std::size_t want = wanted(i);
      const bool fits = want > 0 && want <= static_cast<std::size_t>(kMost);
      CHECK(fit.sample(j)[0] == (fits ? 1 : 0));
      CHECK(extents[2 * j + 1] == (fits ? want : 0));
      for (std::size_t k = 0; k < extents[2 * j + 1]; ++k) CHECK(data[extents[2 * j] + k] == value(i, k));
      total += extents[2 * j + 1] + (i % 11 == 3 ? 5 : 0);  // a replaced claim keeps its room
      ++seen;
    }
    CHECK(tokens.shape.size() == 1);
    CHECK(static_cast<std::uint64_t>(tokens.shape[0]) == total);  // the arena holds every claim, no gap
    CHECK_THROWS_WITH_AS((void)b->extents(1), doctest::Contains("'fit' is not variable-size"), std::invalid_argument);
    CHECK_THROWS_AS((void)b->extents(3), std::out_of_range);
  }
  CHECK(seen == n);
}

TEST_CASE("variable_fields.checksums_do_not_depend_on_where_the_claims_fell") {
  // Workers race for the arena, so the claims' places differ from run to run; the checksum takes
  // the samples in batch order.
  const auto lines = [](std::size_t workers) {
    loader l(token_source(40), options(16, workers));
    std::vector<std::string> out;
    while (auto b = l.next()) out.push_back(checksum_line(*b));
    return out;
  };
  const auto one = lines(1);
  CHECK(one == lines(2));
  CHECK(one == lines(4));
  // And it sees the bytes: a source that writes other values gives another line.
  std::vector<field_spec> fields{{"tokens", dtype::u32, {kMost}, true}, {"fit", dtype::u8, {}}, {"label", dtype::i64, {}}};
  loader other(make_source(40, fields,
                           [](sample& s) {
                             const auto t = s.claim<std::uint32_t>("tokens", wanted(s.index()));
                             for (std::size_t k = 0; k < t.size(); ++k) t[k] = value(s.index(), k) + (s.index() == 22);
                             s.as<std::uint8_t>("fit")[0] = !t.empty();
                             s.as<std::int64_t>("label")[0] = static_cast<std::int64_t>(s.index());
                           }),
               options(16, 1));
  std::vector<std::string> changed;
  while (auto b = other.next()) changed.push_back(checksum_line(*b));
  REQUIRE(changed.size() == one.size());
  CHECK(changed[0] == one[0]);  // samples 0..15
  CHECK(changed[1] != one[1]);  // sample 22
}

TEST_CASE("variable_fields.scratch_fields_are_left_out_of_checksums") {
  // Two sources whose samples are the same but whose working fields differ: the same lines.
  const auto source = [](std::uint32_t noise) {
    std::vector<field_spec> fields{{"label", dtype::i64, {}}, {"work", dtype::u32, {8}, true, true}, {"note", dtype::u8, {4}, false, true}};
    return make_source(20, fields, [noise](sample& s) {
      s.as<std::int64_t>("label")[0] = static_cast<std::int64_t>(s.index());
      const auto w = s.claim<std::uint32_t>("work", 1 + (s.index() + noise) % 8);
      for (auto& x : w) x = noise;
      s.as<std::uint8_t>("note")[0] = static_cast<std::uint8_t>(noise);
    });
  };
  const auto lines = [](std::shared_ptr<pinfeed::source> src) {
    loader l(std::move(src), options(8, 1));
    std::vector<std::string> out;
    while (auto b = l.next()) out.push_back(checksum_line(*b));
    return out;
  };
  const auto a = lines(source(1));
  CHECK(a == lines(source(2)));
  CHECK(a[0].find(" label=") != std::string::npos);
  CHECK(a[0].find(" work=") == std::string::npos);
  CHECK(a[0].find(" note=") == std::string::npos);
}

TEST_CASE("variable_fields.bad_use_is_named") {
  CHECK_THROWS_WITH_AS(validate_fields(std::vector<field_spec>{{"t", dtype::u8, {4, 4}, true}}),
                       doctest::Contains("variable-size field 't' has 2 dimensions"), std::invalid_argument);
  std::vector<std::string> errors;
  std::vector<field_spec> fields{{"tokens", dtype::u32, {kMost}, true}, {"fit", dtype::u8, {}}};
  loader l(make_source(4, fields,
                       [&](sample& s) {
                         if (s.index() == 0) (void)s.bytes("tokens");
                         if (s.index() == 1) (void)s.claim(1, 1);
                         if (s.index() == 2) (void)s.claim<std::uint8_t>("tokens", 1);
                         if (s.index() == 3) (void)s.claimed(1);
                       }),
           options(1, 1));
  for (std::size_t k = 0; k < 4; ++k) {
    try {
      (void)l.next();
      FAIL("sample " << k << " should have failed");
    } catch (const sample_error& e) {
      errors.push_back(e.what());
    }
  }
  CHECK(errors[0].find("field 'tokens' is variable-size: claim() its bytes") != std::string::npos);
  CHECK(errors[1].find("field 'fit' is not variable-size") != std::string::npos);
  CHECK(errors[2].find("field 'tokens' has element type uint32, not one of 1 bytes") != std::string::npos);
  CHECK(errors[3].find("field 'fit' is not variable-size") != std::string::npos);
  // Outside a loader there is no arena to claim from.
  std::vector<std::byte*> buffers{nullptr, nullptr};
  std::uint8_t fit = 0;
  buffers[1] = reinterpret_cast<std::byte*>(&fit);
  sample alone(9, 0, 1, fields, buffers);
  CHECK_THROWS_WITH_AS((void)alone.claim(0, 1), doctest::Contains("sample 9: variable-size field 'tokens' has no arena"),
                       std::logic_error);
}

TEST_CASE("variable_fields.emptying_a_slots_arenas_writes_only_the_variable_fields_extents") {
  // Contract: before a fill the feeder empties the slot's arenas (loader_core::reset_arenas) by
  // zeroing each variable field's extents (16 bytes a sample) and nothing else. A fixed field holds
  // only bytes() a sample, so 16 a sample written from its offset would run over what follows it
  // (here "fit", 1 byte a sample at a batch of 512: 7.5 KiB past its end, into the arena), and in
  // a slot without variable fields, from a small last field, past the slot's end.
  std::vector<field_spec> fields{{"tokens", dtype::u32, {kMost}, true}, {"label", dtype::i64, {}}, {"fit", dtype::u8, {}}};
  auto src = make_source(1024, fields, [](sample&) {});
  const loader_options o = options(512, 1);
  auto plan = detail::plan_slots(o, src->fields(), /*cuda=*/false, *src);
  detail::loader_core core(o, src->fields(), device_choice{}, std::move(plan), std::nullopt);
  REQUIRE(core.allocated() >= 1);
  REQUIRE(core.field_offset[2] + 16 * 512 > core.arena_offset[0]);  // the overrun this would be
  std::byte* slot = core.host_slot(0);
  std::memset(slot, 0xAB, core.host_slot_bytes);
  core.meta[0].arena_used[0].store(77);
  core.reset_arenas(0);
  std::size_t zeroed = 0, changed_elsewhere = 0;
  for (std::size_t k = 0; k < core.host_slot_bytes; ++k) {
    const bool extents = k >= core.field_offset[0] && k < core.field_offset[0] + 16 * 512;
    if (extents) zeroed += slot[k] == std::byte{0};
    else changed_elsewhere += slot[k] != std::byte{0xAB};
  }
  CHECK(zeroed == 16 * 512);
  CHECK(changed_elsewhere == 0);
  // The arena itself is emptied and lent at its own offset; the fixed fields get none.
  CHECK(core.meta[0].arena_used[0].load() == 0);
  CHECK(core.meta[0].arenas[0].data == slot + core.arena_offset[0]);
  CHECK(core.meta[0].arenas[0].capacity == static_cast<std::uint64_t>(kMost) * 512);
  CHECK(core.meta[0].arenas[1].data == nullptr);
  CHECK(core.meta[0].arenas[2].data == nullptr);
}
