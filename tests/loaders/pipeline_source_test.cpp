// pipeline_source: a reader and its transforms into slots, host and device tails.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>


#include "test_util.hpp"
#include "transform_fixtures.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

using test::owned_image;
using test::run_step;

TEST_CASE("pipeline_source.the_articles_pipeline_host_and_device_tail_agree") {
  constexpr std::uint64_t samples = 64;
  constexpr std::size_t batch = 16;
  constexpr std::size_t batches = (samples + batch - 1) / batch;  // drop_last is off
  auto base = make_synthetic_source({samples, 48, 40, 10});
  const auto steps = parse_pipeline("crop(32),mask(0.25),ycbcr,scale");
  auto host = std::make_shared<pipeline_source>(base, steps);
  pipeline_source_options on_device;
  on_device.device_tail = true;
  auto split = std::make_shared<pipeline_source>(base, steps, on_device);
  CHECK(host->fields()[0].type == dtype::f32);
  CHECK(host->fields()[0].shape == std::vector<std::int64_t>{3, 32, 32});
  CHECK(split->fields()[0].type == dtype::u8);
  CHECK(split->fields()[0].shape == std::vector<std::int64_t>{32, 32, 3});
  REQUIRE(split->tail_params().has_value());
  CHECK(split->tail_params()->ycbcr);
  CHECK(split->tail_params()->scale == 1.0f / 255.0f);

  loader_options o = pinfeed::test::cpu_loader(batch, 2, 3);
  loader lh(host, o), ls(split, o);
  std::vector<float> finished(batch * 3 * 32 * 32);
  std::size_t compared = 0;
  while (auto bh = lh.next()) {
    ++compared;
    auto bs = ls.next();
    REQUIRE(bs);
    CHECK(bh->indices()[0] == bs->indices()[0]);
    // Finishing the uint8 batch with the (host twin of the) device op gives the host pipeline's bits.
    ops::normalize_hwc_to_chw_host(
        {static_cast<const std::uint8_t*>(bs->field("image").data), finished.data(), {bs->size(), 32, 32}},
        *split->tail_params());
    CHECK(std::memcmp(finished.data(), bh->field("image").data, bs->size() * 3 * 32 * 32 * 4) == 0);
    CHECK(std::memcmp(bh->field("label").data, bs->field("label").data, bs->size() * 8) == 0);
  }
  CHECK(compared == batches);
  CHECK_FALSE(ls.next().has_value());  // the device-tail loader ends with the host one
  // Deterministic for any worker count.
  std::vector<std::string> one, two;
  for (std::size_t workers : {1, 2}) {
    o.workers = workers;
    loader l(host, o);
    while (auto b = l.next()) (workers == 1 ? one : two).push_back(checksum_line(*b));
  }
  CHECK(one.size() == batches);
  CHECK(one == two);
  const auto st = loader(host, o).stats();
  (void)st;
}

TEST_CASE("pipeline_source.bad_input") {
  auto base = make_synthetic_source({8, 16, 16, 10});
  CHECK_THROWS_WITH_AS(pipeline_source(base, parse_pipeline("crop(32)")), doctest::Contains("crop(32)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(pipeline_source(base, parse_pipeline("crop(8)"), {}, "picture"),
                       doctest::Contains("no field 'picture'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pipeline_source(base, parse_pipeline("crop(8)"), {}, "label"),
                       doctest::Contains("must be uint8 [H, W, C]"), std::invalid_argument);
  CHECK_THROWS_AS(pipeline_source(std::shared_ptr<source>(), parse_pipeline("crop(8)")), std::invalid_argument);
  // Steps after a tail are not fusable: every step runs on the host in HWC float.
  pipeline_source mixed(base, parse_pipeline("scale,crop(8)"));
  CHECK(mixed.fields()[0].shape == std::vector<std::int64_t>{8, 8, 3});
  CHECK(mixed.fields()[0].type == dtype::f32);
  CHECK_FALSE(mixed.tail_params().has_value());
}

TEST_CASE("pipeline_source.in_place_steps_give_the_step_by_step_result") {
  // Each sample's image is known; the pipeline's output must equal applying the steps one by one,
  // out of place, with the sample's streams - whatever runs in place or straight into the slot.
  const std::int64_t H = 20, W = 24;
  constexpr std::uint64_t samples = 40;
  auto base = make_source(
      samples, {{"image", dtype::u8, {H, W, 3}}},
      [](sample& s) { fill_random_bytes(philox_stream(77, 0, s.index()), s.bytes(0)); }, "known");
  for (const char* spec : {"crop(16),hflip", "crop(16),mask(0.3),hflip", "crop(16),hflip,mask(0.3)", "hflip,mask(0.5)",
                           "mask(0.2),hflip,crop(12)", "crop(16),hflip,ycbcr,scale", "rrc(10),hflip"}) {
    CAPTURE(spec);
    const auto steps = parse_pipeline(spec);
    auto src = std::make_shared<pipeline_source>(base, steps);
    const loader_options o = pinfeed::test::cpu_loader(8, 2, 5);
    loader l(src, o);
    const field_spec f = src->fields()[0];
    const std::size_t bytes = f.bytes();
    std::uint64_t compared = 0;
    while (auto b = l.next()) {
      compared += b->size();
      const auto* got = static_cast<const std::byte*>(b->field("image").data);
      for (std::size_t j = 0; j < b->size(); ++j) {
        const std::uint64_t i = b->indices()[j];
        owned_image cur{std::vector<std::byte>(static_cast<std::size_t>(H * W * 3)), {H, W, 3, dtype::u8}};
        fill_random_bytes(philox_stream(77, 0, i), cur.bytes);
        const auto host = src->host_steps().steps();
        for (std::size_t k = 0; k < host.size(); ++k)
          cur = run_step(*host[k], cur, philox_stream(5, 0, i, 100 + static_cast<std::uint32_t>(k)));
        std::vector<std::byte> expect(bytes);
        if (f.type == dtype::f32) {  // the fused host tail, CHW float
          const auto tail = fused_tail(steps);
          REQUIRE(tail.has_value());
          const ops::image_batch_shape one{1, static_cast<std::size_t>(cur.spec.height),
                                           static_cast<std::size_t>(cur.spec.width)};
          ops::normalize_hwc_to_chw_host({reinterpret_cast<const std::uint8_t*>(cur.bytes.data()), expect.data(), one},
                                         *tail);
        } else {
          REQUIRE(cur.bytes.size() == bytes);
          expect = cur.bytes;
        }
        CHECK(std::memcmp(got + j * bytes, expect.data(), bytes) == 0);
      }
    }
    CHECK(compared == samples);
  }
}
