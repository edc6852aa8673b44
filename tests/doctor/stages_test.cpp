// The doctor's stage wrappers: caches at a stage, emulated slow storage, the copy throttle.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "image_fixtures.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::temp_dir;

namespace {

/// Every sample of the first batch of `src`: its image bytes and, when present, its label.
struct first_batch {
  std::vector<std::vector<std::byte>> images;
  std::vector<std::int64_t> labels;
  stats_snapshot stats;
};

first_batch take_first(const std::shared_ptr<source>& src, const loader_options& o) {
  loader l(src, o);
  auto b = l.next();
  REQUIRE(b);
  first_batch out;
  const auto img = b->field("image");
  const std::size_t per = img.bytes() / b->size();
  const auto* p = static_cast<const std::byte*>(img.data);
  for (std::size_t j = 0; j < b->size(); ++j) out.images.emplace_back(p + j * per, p + (j + 1) * per);
  for (std::size_t f = 0; f < b->field_count(); ++f)
    if (l.fields()[f].name == "label")
      for (std::size_t j = 0; j < b->size(); ++j) out.labels.push_back(static_cast<const std::int64_t*>(b->field(f).data)[j]);
  out.stats = l.stats();
  return out;
}

}  // namespace

TEST_CASE("stages.emulated_slow_storage") {
  // Lower bounds only: a sleep is never shorter than asked.
  auto base = make_reader_from_source(make_synthetic_source({12, 16, 16, 10}));
  const loader_options o = pinfeed::test::cpu_loader(4, 2, 1);
  auto slow = std::make_shared<pipeline_source>(make_slow_storage(base, {4.0, 0.0}), parse_pipeline("crop(8)"));
  CHECK(slow->name().find("storage emulated: 4 ms") != std::string::npos);
  loader l(slow, o);
  while (l.next()) {
  }
  const auto st = l.stats();
  CHECK(st[stage::read].count == 12);
  CHECK(st[stage::read].total_ns >= 12u * 4'000'000u);
  // 12 reads of 768 bytes through a shared 0.1 MB/s link: at least 92 ms in all.
  auto narrow = std::make_shared<pipeline_source>(make_slow_storage(base, {0.0, 0.1}), parse_pipeline("crop(8)"));
  const auto t0 = std::chrono::steady_clock::now();
  loader l2(narrow, o);
  while (l2.next()) {
  }
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(92));
  CHECK_THROWS_WITH_AS(make_slow_storage(base, {-1.0, 0.0}), doctest::Contains("latency_ms must be a finite number >= 0, got -1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_slow_storage(base, {0.0, std::nan("")}), doctest::Contains("bandwidth_mb_s"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_slow_storage(nullptr, {1.0, 0.0}), doctest::Contains("base reader is null"),
                       std::invalid_argument);
}

TEST_CASE("stages.caching_at_a_stage_serves_a_pool_of_samples") {
  auto reader = make_reader_from_source(make_synthetic_source({40, 24, 24, 1000}));
  const auto steps = parse_pipeline("crop(16),hflip,ycbcr,scale");
  const loader_options o = pinfeed::test::cpu_loader(40, 2, 6);
  const auto full = std::make_shared<pipeline_source>(reader, steps);
  const auto run = [&](sample_cache c) { return take_first(make_cached_pipeline(full, c).source, o); };
  const auto plain = run({cache_stage::none, 0, 8});
  REQUIRE(plain.images.size() == 40);
  const auto finished = run({cache_stage::finished, 0, 8});
  for (std::size_t i = 0; i < 40; ++i) {
    CHECK(finished.images[i] == plain.images[i % 8]);  // the finished sample i mod 8
    CHECK(finished.labels[i] == plain.labels[i % 8]);
  }
  const auto decoded = run({cache_stage::decoded, 0, 8});
  std::size_t differs = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    CHECK(decoded.labels[i] == plain.labels[i % 8]);  // labels come with the cached read
    if (i < 8) CHECK(decoded.images[i] == plain.images[i]);
    differs += decoded.images[i] != decoded.images[i % 8];  // transforms still run with sample i's stream
  }
  CHECK(differs > 10);
  CHECK(decoded.stats[stage::transform].count == 40);
  // The crop cached (with entry p's own draw), the flip still drawn per sample with the pipeline
  // over the cache: the pool's images are the crops of the plain run, possibly mirrored.
  const auto after_crop = run({cache_stage::steps, 1, 8});
  std::size_t mirrored_or_same = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto& a = after_crop.images[i];
    const auto& b = plain.images[i];
    bool mirrored = true;  // float CHW [3, 16, 16] after the fused tail: a(c, y, x) == b(c, y, 15 - x)
    const auto at = [](std::size_t c, std::size_t y, std::size_t x) { return ((c * 16 + y) * 16 + x) * sizeof(float); };
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 16; ++y)
        for (std::size_t x = 0; x < 16; ++x) mirrored = mirrored && std::memcmp(a.data() + at(c, y, x), b.data() + at(c, y, 15 - x), 4) == 0;
    mirrored_or_same += a == b || mirrored;
  }
  CHECK(mirrored_or_same == 8);
  CHECK_THROWS_WITH_AS(run({cache_stage::steps, 9, 8}), doctest::Contains("cache after 9 steps, but the host pipeline has"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(run({cache_stage::decoded, 0, 0}), doctest::Contains("pool must be at least 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_cached_pipeline(nullptr, {}), doctest::Contains("the pipeline is null"), std::invalid_argument);
  const auto itself = make_cached_pipeline(full, {});  // no cache: the pipeline itself
  CHECK(itself.source == full);
  CHECK(itself.pipeline == full);
  auto base = make_synthetic_source({4, 8, 8, 10});
  CHECK_THROWS_WITH_AS(make_pooled_source(base, 0), doctest::Contains("pool must be at least 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_pooled_source(nullptr, 4), doctest::Contains("base source is null"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_cached_reader(reader, cache_stage::finished, 4), doctest::Contains("raw, decoded or steps"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_cached_reader(reader, cache_stage::raw, 4, parse_pipeline("crop(8)")),
                       doctest::Contains("need a cache of decoded images"), std::invalid_argument);
}

TEST_CASE("stages.cache_stages_over_encoded_files") {
  temp_dir d;
  const auto files = test::jpeg_class_folder(d.path, 8, 120, 8, 160);
  const loader_options o = pinfeed::test::cpu_loader(16, 2, 9);
  const auto steps = parse_pipeline("rrc(24),hflip");
  const auto piped = [&](pipeline_source_options po = {}) {
    return std::make_shared<pipeline_source>(make_image_files_reader(files), steps, po);
  };
  const auto run = [&](sample_cache c) { return take_first(make_cached_pipeline(piped(), c).source, o); };
  const auto plain = run({});
  const auto raw = run({cache_stage::raw, 0, 4});
  // The stored bytes of samples 0..3 are read once each; every sample still decodes (with its own
  // window) and transforms, so the pool's own samples equal the uncached ones.
  REQUIRE(raw.images.size() == 8);  // the whole dataset
  for (std::size_t i = 0; i < 4; ++i) CHECK(raw.images[i] == plain.images[i]);
  std::size_t differs = 0;
  for (std::size_t i = 4; i < 8; ++i) differs += raw.images[i] != plain.images[i % 4];
  CHECK(differs >= 2);  // sample i decodes file i mod 4 with sample i's window and flip
  CHECK(raw.stats[stage::decode].count >= 8);  // decoding: every sample (and one check per entry)

  // A pool entry whose sample does not decode: under fail the error names the file and the sample
  // it was cached from; under skip the batch is still full and every failure names it.
  test::write_bytes(d.path / "c" / "a.jpg", {std::byte{0xFF}, std::byte{0xD8}, std::byte{0x00}});
  for (auto stage_ : {cache_stage::raw, cache_stage::decoded, cache_stage::finished}) {
    CAPTURE(static_cast<int>(stage_));
    loader l(make_cached_pipeline(piped(), {stage_, 0, 4}).source, o);
    CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("a.jpg"), sample_error);
    pipeline_source_options skip;
    skip.on_error = error_policy::skip;
    const auto cached = make_cached_pipeline(piped(skip), {stage_, 0, 4});
    const auto b = take_first(cached.source, o);
    CHECK(b.images.size() == 8);
    CHECK(b.stats.bad_samples >= 1);
    REQUIRE(!cached.pipeline->failed().empty());  // the pipeline that ran counted them
    for (const auto& f : cached.pipeline->failed()) CHECK(f.find("a.jpg") != std::string::npos);
  }
}

TEST_CASE("stages.caches_of_a_pipeline_that_decodes_on_the_device") {
  // Where a cache keeps encoded bytes the device path stays (where a GPU is); where it keeps
  // images, they are decoded on the host once; finished samples are those of the host path.
  temp_dir d;
  const auto files = test::jpeg_class_folder(d.path, 8, 120, 8, 160);
  pipeline_source_options device;
  device.decode = decode_place::device;
  const auto full = std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("rrc(24),hflip"), device);
  REQUIRE(full->decode_path() == decode_place::device);
  const bool gpu = cuda_devices().usable;
  const auto raw = make_cached_pipeline(full, {cache_stage::raw, 0, 4});
  CHECK(raw.pipeline->decode_path() == (gpu ? decode_place::device : decode_place::host));
  const auto decoded = make_cached_pipeline(full, {cache_stage::decoded, 0, 4});
  CHECK(decoded.pipeline->decode_path() == decode_place::host);
  const auto finished = make_cached_pipeline(full, {cache_stage::finished, 0, 4});
  CHECK(finished.pipeline->decode_path() == decode_place::host);
  CHECK(finished.source->fields().size() == 2);  // image and label: no packed fields to pool
  const auto b = take_first(finished.source, pinfeed::test::cpu_loader(8, 2, 9));
  CHECK(b.images.size() == 8);
  // A cache of stored bytes under the device path: the packed fields are the pipeline's, never the
  // reader's, so the cache neither keeps nor copies them (here through a CPU loader, which a
  // forwarding source lets take the device path's host half).
  struct forward final : source {
    std::shared_ptr<pipeline_source> inner;
    std::uint64_t size() const override { return inner->size(); }
    std::vector<field_spec> fields() const override { return inner->fields(); }
    void produce(sample& s) override { inner->produce(s); }
  };
  auto via_raw = std::make_shared<forward>();
  via_raw->inner = std::make_shared<pipeline_source>(make_cached_reader(full->reader(), cache_stage::raw, 4),
                                                     parse_pipeline("rrc(24),hflip"), device);
  REQUIRE(via_raw->inner->decode_path() == decode_place::device);
  loader l(via_raw, pinfeed::test::cpu_loader(8, 2, 9));
  std::size_t n = 0;
  while (auto batch = l.next()) n += batch->size();
  CHECK(n == 8);
  CHECK(via_raw->inner->decoded().device + via_raw->inner->decoded().host == 8);
  // A source of the caller's own with a variable-size field is not pooled, and says so.
  auto own = make_source(4, {{"tokens", dtype::u32, {8}, true}}, [](sample&) {});
  CHECK_THROWS_WITH_AS((void)make_pooled_source(own, 2), doctest::Contains("field 'tokens' of 'callable' is variable-size"),
                       std::invalid_argument);
}

TEST_CASE("stages.a_cache_pool_over_its_memory_budget_fails_the_run_and_is_no_bad_sample") {
  // Known entry sizes fail up front: 64 finished samples of 32x32x3 + label against 10 KB.
  auto synthetic = make_reader_from_source(make_synthetic_source({64, 32, 32, 10}));
  auto full = std::make_shared<pipeline_source>(synthetic, parse_pipeline("crop(32)"));
  CHECK_THROWS_WITH_AS(make_pooled_source(full, 64, 10'000), doctest::Contains("a pool of 64 entries"), fatal_error);
  CHECK_THROWS_WITH_AS(make_cached_reader(synthetic, cache_stage::decoded, 64, {}, 10'000),
                       doctest::Contains("over its budget of"), fatal_error);
  CHECK_THROWS_WITH_AS(make_cached_pipeline(full, {cache_stage::finished, 0, 64, 10'000}),
                       doctest::Contains("--cache-pool"), fatal_error);
  CHECK_NOTHROW((void)make_pooled_source(full, 64, 64 * (32 * 32 * 3 + 8)));  // exactly fits

  // Stored bytes vary by file: the entry that passes the budget fails the run, under skip too,
  // and nothing is counted as a bad sample.
  temp_dir d;
  const auto files = test::jpeg_class_folder(d.path, 8, 120, 8, 160);
  const auto one_file = std::filesystem::file_size(files[0].path);
  pipeline_source_options skip;
  skip.on_error = error_policy::skip;
  const auto cached = make_cached_pipeline(
      std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("center_crop(16)"), skip),
      {cache_stage::raw, 0, 8, 3 * one_file});
  loader l(cached.source, pinfeed::test::cpu_loader(8, 1, 9));
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("of its 8 entries, over its budget of"), fatal_error);
  CHECK(cached.pipeline->failures() == 0);
  CHECK(l.stats().bad_samples == 0);
}

TEST_CASE("stages.copy_throttle_and_step_arguments") {
  CHECK_THROWS_WITH_AS(throttle_copy(0.0), doctest::Contains("MB/s > 0, got 0"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(throttle_copy(-5.0), doctest::Contains("got -5"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(throttle_copy(std::nan("")), doctest::Contains("MB/s > 0"), std::invalid_argument);
  CHECK(static_cast<bool>(throttle_copy(20.0)));
  const auto t0 = std::chrono::steady_clock::now();
  busy_wait_ms(20.0);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(20));
  busy_kernel_ms(0.0, nullptr);  // nothing to do: no launch, no error, with or without a GPU
}

TEST_CASE("stages.cache_pools_count_in_a_loader_memory_budget") {
  // A pool of known entries counts their bytes; stored bytes of varying size count the pool's cap.
  auto synthetic = make_reader_from_source(make_synthetic_source({64, 32, 32, 10}));
  auto full = std::make_shared<pipeline_source>(synthetic, parse_pipeline("crop(32)"));
  const auto pooled = make_pooled_source(full, 16, 0);
  REQUIRE(pooled->memory().size() == 1);
  CHECK(pooled->memory()[0].consumer == "sample cache (a pool of 16 finished samples)");
  CHECK(pooled->memory()[0].bytes == 16u * (32 * 32 * 3 + 8));
  const auto decoded = make_cached_reader(synthetic, cache_stage::decoded, 16);
  REQUIRE(decoded->memory().size() == 1);
  CHECK(decoded->memory()[0].consumer == "sample cache (a pool of 16 cached decoded images)");
  CHECK(decoded->memory()[0].bytes == 16u * 32 * 32 * 3);
  temp_dir d;
  const auto files = test::jpeg_class_folder(d.path, 4, 40, 0, 40);
  const auto raw = make_cached_reader(make_image_files_reader(files), cache_stage::raw, 4, {}, 1u << 20);
  REQUIRE(raw->memory().size() == 1);
  CHECK(raw->memory()[0].consumer == "sample cache (a pool of 4 cached stored bytes, at most its max_bytes)");
  CHECK(raw->memory()[0].bytes == (1u << 20));
  // A loader over the cached pipeline counts the pool with its slots.
  loader_options o = pinfeed::test::cpu_loader(8, 1, 9);
  o.memory_budget = 64u << 10;
  CHECK_THROWS_WITH_AS(loader(make_cached_pipeline(full, {cache_stage::finished, 0, 16}).source, o),
                       doctest::Contains("sample cache (a pool of 16 finished samples) 48.1 KiB"), std::invalid_argument);
}
