// One call per common source (sources.hpp): the same batches as the parts composed by hand, the
// options passed through, and bad input named.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/sources.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "image_fixtures.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::jpeg_class_folder;
using pinfeed::test::temp_dir;

namespace {

std::vector<std::string> shuffled_checksums(const std::shared_ptr<source>& src, std::size_t workers = 2) {
  loader_options o = test::cpu_loader(5, workers, 11);
  o.order.shuffle = true;
  loader l(src, o);
  return test::epoch_checksums(l, 0, 1);
}

/// Two class folders: 7 JPEGs in "c" (label 0) and 5 in "d" (label 1), of varying sizes.
std::vector<image_file> two_classes(const fs::path& root) {
  (void)jpeg_class_folder(root, 7, 40, 3, 48);
  (void)jpeg_class_folder(root / "tmp", 5, 36, 2, 44);
  fs::rename(root / "tmp" / "c", root / "d");
  fs::remove(root / "tmp");
  return list_image_folder(root.string()).files;
}

}  // namespace

TEST_CASE("sources.image_folder_is_the_parts_composed_by_hand") {
  temp_dir d;
  const auto files = two_classes(d.path);
  REQUIRE(files.size() == 12);
  const auto made = make_image_folder_source(d.path.string(), "rrc(24),hflip");
  CHECK(made->size() == 12);
  CHECK(made->steps().to_string() == parse_pipeline("rrc(24),hflip").to_string());
  const auto by_hand = std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("rrc(24),hflip"));
  const auto expected = shuffled_checksums(by_hand);
  CHECK(shuffled_checksums(made) == expected);
  CHECK(shuffled_checksums(make_image_folder_source(d.path.string(), parse_pipeline("rrc(24),hflip")), 1) == expected);
  // Labels: the class folders in sorted order.
  loader l(made, test::cpu_loader(12, 1, 11));
  auto b = l.next();
  REQUIRE(b);
  const auto labels = b->field<std::int64_t>("label");
  int ones = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) ones += static_cast<int>(labels.sample(i)[0]);
  CHECK(ones == 5);
}

TEST_CASE("sources.file_list_and_local_shards_are_the_parts_composed_by_hand") {
  temp_dir d;
  const auto files = two_classes(d.path / "images");
  {
    std::ofstream list(d.path / "train.txt");
    list << "# path label\n";
    for (const auto& f : files) list << fs::relative(f.path, d.path).string() << " " << f.label << "\n";
  }
  const auto expected =
      shuffled_checksums(std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("center_crop(24)")));
  CHECK(shuffled_checksums(make_file_list_source((d.path / "train.txt").string(), "center_crop(24)")) == expected);

  const auto shards = write_shards(files, (d.path / "train").string(), 8192);
  REQUIRE(shards.size() >= 2);
  const std::string pattern = (d.path / "train-*.tar").string();
  const auto made = make_shard_source(pattern, "center_crop(24)");
  CHECK(made->size() == files.size());
  CHECK(shuffled_checksums(made) ==
        shuffled_checksums(std::make_shared<pipeline_source>(make_shard_reader(expand_shard_pattern(pattern)),
                                                             parse_pipeline("center_crop(24)"))));
}

TEST_CASE("sources.options_pass_through") {
  temp_dir d;
  const auto files = two_classes(d.path);
  { std::ofstream bad(d.path / "c" / "zz.jpg"); bad << "not a picture"; }
  // fail (the default): the batch holding the bad file names it.
  {
    loader l(make_image_folder_source(d.path.string(), "center_crop(16)"), test::cpu_loader(13, 1, 1));
    CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("zz.jpg"), sample_error);
  }
  // skip: delivered, counted.
  image_source_options o;
  o.source.on_error = error_policy::skip;
  const auto skipping = make_image_folder_source(d.path.string(), "center_crop(16)", o);
  loader l(skipping, test::cpu_loader(13, 1, 1));
  auto b = l.next();
  REQUIRE(b);
  CHECK(b->size() == 13);
  CHECK(skipping->failures() == 1);
  CHECK(skipping->options().on_error == error_policy::skip);
  // The device tail: the slot keeps uint8, the tail is the consumer's to run.
  image_source_options tail;
  tail.source.device_tail = true;
  const auto t = make_image_folder_source(d.path.string(), "center_crop(16),scale", tail);
  CHECK(t->tail_params().has_value());
  CHECK(t->fields()[0].type == dtype::u8);
  // The decoder's pixel cap.
  image_source_options tiny;
  tiny.decode.max_pixels = 10;
  loader capped(make_image_folder_source(d.path.string(), "center_crop(16)", tiny), test::cpu_loader(4, 1, 1));
  CHECK_THROWS_WITH_AS((void)capped.next(), doctest::Contains("pixels"), sample_error);
}

TEST_CASE("sources.bad_input_is_named") {
  temp_dir d;
  CHECK_THROWS_WITH_AS((void)make_image_folder_source((d.path / "missing").string(), "center_crop(8)"),
                       doctest::Contains("missing"), std::invalid_argument);
  (void)two_classes(d.path / "ok");
  CHECK_THROWS_WITH_AS((void)make_image_folder_source((d.path / "ok").string(), "center_crop(8),twirl(3)"),
                       doctest::Contains("twirl"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)make_image_folder_source((d.path / "ok").string(), "hflip"),
                       doctest::Contains("no fixed output shape"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)make_file_list_source((d.path / "nope.txt").string(), "center_crop(8)"),
                       doctest::Contains("nope.txt"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)make_shard_source((d.path / "none-*.tar").string(), "center_crop(8)"),
                       doctest::Contains("none-*.tar"), std::invalid_argument);
}
