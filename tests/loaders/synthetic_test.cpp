#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <vector>

#include "test_util.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"

using namespace pinfeed;

TEST_CASE("synthetic.fields_and_deterministic_content") {
  auto src = loaders::make_synthetic_source({50, 32, 48, 10});
  const auto fields = src->fields();
  REQUIRE(fields.size() == 2);
  CHECK(fields[0].name == "image");
  CHECK(fields[0].shape == std::vector<std::int64_t>{32, 48, 3});
  CHECK(fields[1].type == dtype::i64);
  CHECK(src->size() == 50);

  const loader_options o = pinfeed::test::cpu_loader(16, 2, 5);
  loader l(src, o);
  std::set<std::int64_t> labels;
  std::vector<std::byte> expect(32 * 48 * 3);
  std::uint64_t seen = 0;
  while (auto b = l.next()) {
    seen += b->size();
    const auto img = b->field("image");
    const auto* lab = static_cast<const std::int64_t*>(b->field("label").data);
    for (std::size_t j = 0; j < b->size(); ++j) {
      fill_random_bytes(philox_stream(5, 0, b->indices()[j], 0), expect);
      REQUIRE(std::memcmp(static_cast<std::byte*>(img.data) + j * expect.size(), expect.data(), expect.size()) == 0);
      REQUIRE(lab[j] >= 0);
      REQUIRE(lab[j] < 10);
      labels.insert(lab[j]);
    }
  }
  CHECK(seen == src->size());
  CHECK(labels.size() > 5);  // 50 draws over 10 classes
}

TEST_CASE("synthetic.bad_options") {
  CHECK_THROWS_WITH_AS(loaders::make_synthetic_source({0, 8, 8, 10}), doctest::Contains("samples"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loaders::make_synthetic_source({10, -3, 8, 10}), doctest::Contains("height must be positive, got -3"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loaders::make_synthetic_source({10, 8, 8, 0}), doctest::Contains("classes"),
                       std::invalid_argument);
}
