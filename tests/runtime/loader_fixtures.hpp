#pragma once
// Sources and options the loader's test files share.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "test_util.hpp"

namespace pinfeed::test {

inline constexpr std::int64_t kFeatures = 37;  // odd size: fields do not line up by accident

/// Sample i: "data" = 37 Philox bytes of (seed, epoch, i), "id" = i, "noise" = one float from substream 1.
inline void produce_reference(sample& s) {
  fill_random_bytes(s.rng(), s.bytes("data"));
  s.as<std::int64_t>("id")[0] = static_cast<std::int64_t>(s.index());
  s.as<float>("noise")[0] = s.rng(1).uniform();
}

inline std::vector<field_spec> reference_fields() {
  return {{"data", dtype::u8, {kFeatures}}, {"id", dtype::i64, {}}, {"noise", dtype::f32, {}}};
}

/// Sample i: "pixels" = 6 Philox bytes of (seed, epoch, i) as [2, 3], "label" = i % 10.
inline std::shared_ptr<source> small_source(std::uint64_t n) {
  return make_source(n, {{"pixels", dtype::u8, {2, 3}}, {"label", dtype::i64, {}}}, [](sample& s) {
    fill_random_bytes(s.rng(), s.bytes("pixels"));
    s.as<std::int64_t>("label")[0] = static_cast<std::int64_t>(s.index() % 10);
  });
}

/// A shuffled CPU loader of small_source() batches (seed 99).
inline loader_options shuffled_small(std::size_t batch, std::size_t workers, std::size_t prefetch = 2) {
  loader_options o = cpu_loader(batch, workers, 99, prefetch);
  o.order.shuffle = true;
  return o;
}

/// Every batch of epochs [0, end) of an uninterrupted run over small_source(100), as checksum lines.
inline std::vector<std::string> uninterrupted_small(std::uint32_t end) {
  loader l(small_source(100), shuffled_small(8, 2));
  return epoch_checksums(l, 0, end - 1);
}

}  // namespace pinfeed::test
