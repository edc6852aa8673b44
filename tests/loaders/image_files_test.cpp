// Real image data built at test time: JPEG (colour, grey, CMYK), PNG, BMP in a folder and a list.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <new>
#include <type_traits>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <turbojpeg.h>
#include <unistd.h>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/error.hpp"
#include "codec_fixtures.hpp"
#include "image_fixtures.hpp"
#include "test_util.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::jpeg_class_folder;
using pinfeed::test::temp_dir;
using pinfeed::test::write_bytes;
using pinfeed::test::encode;
using pinfeed::test::picture;

namespace {

/// Under error_policy::skip: the first batch has `size` samples, and exactly one failure, naming
/// `file`, was counted and listed.
void check_one_skipped(const std::shared_ptr<pipeline_source>& src, const loader_options& o, std::size_t size,
                       const std::string& file) {
  loader l(src, o);
  auto b = l.next();
  REQUIRE(b);
  CHECK(b->size() == size);
  CHECK(src->failures() == 1);
  REQUIRE(src->failed().size() == 1);
  CHECK(src->failed()[0].find(file) != std::string::npos);
}

}  // namespace

TEST_CASE("image_files.folder_and_list_listing") {
  temp_dir d;
  for (const char* cls : {"dogs", "cats", ".hidden"}) fs::create_directories(d.path / cls);
  fs::create_directories(d.path / "cats" / "deeper");
  write_bytes(d.path / "cats" / "b.png", encode(picture(20, 20, 1), ".png"));
  write_bytes(d.path / "cats" / "deeper" / "a.JPG", encode(picture(20, 20, 2), ".jpg"));
  write_bytes(d.path / "cats" / "notes.txt", std::vector<std::byte>(3));
  write_bytes(d.path / "cats" / ".x.png", encode(picture(20, 20, 3), ".png"));
  write_bytes(d.path / "dogs" / "z.bmp", encode(picture(20, 20, 4), ".bmp"));
  write_bytes(d.path / ".hidden" / "h.png", encode(picture(20, 20, 5), ".png"));
  const auto listing = list_image_folder(d.path.string());
  CHECK(listing.classes == std::vector<std::string>{"cats", "dogs"});
  REQUIRE(listing.files.size() == 3);
  CHECK(listing.files[0].label == 0);
  CHECK(listing.files[2].label == 1);
  CHECK(listing.files[2].path.find("z.bmp") != std::string::npos);

  std::ofstream(d.path / "list.txt") << "# comment\n\ncats/b.png 3\n  dogs/z.bmp\t7  \n" << (d.path / "cats/deeper/a.JPG").string()
                                     << " 0\n";
  const auto list = read_file_list((d.path / "list.txt").string());
  REQUIRE(list.size() == 3);
  CHECK(list[0].path == (d.path / "cats/b.png").string());
  CHECK(list[0].label == 3);
  CHECK(list[1].label == 7);
  CHECK(list[2].path == (d.path / "cats/deeper/a.JPG").string());

  CHECK_THROWS_WITH_AS(list_image_folder((d.path / "missing").string()), doctest::Contains("does not exist"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(list_image_folder((d.path / "dogs").string()), doctest::Contains("no class sub-folders"),
                       std::invalid_argument);
  fs::create_directories(d.path / "empty" / "a");
  CHECK_THROWS_WITH_AS(list_image_folder((d.path / "empty").string()), doctest::Contains("no image files"),
                       std::invalid_argument);
  std::ofstream(d.path / "bad.txt") << "cats/b.png 1\ncats/b.png one\n";
  CHECK_THROWS_WITH_AS(read_file_list((d.path / "bad.txt").string()), doctest::Contains("line 2: label 'one'"),
                       std::invalid_argument);
  std::ofstream(d.path / "bad.txt") << "justapath\n";
  CHECK_THROWS_WITH_AS(read_file_list((d.path / "bad.txt").string()), doctest::Contains("line 1: expected"),
                       std::invalid_argument);
  std::ofstream(d.path / "bad.txt") << "# nothing\n";
  CHECK_THROWS_WITH_AS(read_file_list((d.path / "bad.txt").string()), doctest::Contains("lists no files"),
                       std::invalid_argument);
  CHECK_THROWS_AS(read_file_list((d.path / "none.txt").string()), std::invalid_argument);
}

TEST_CASE("image_files.listing_takes_torchvisions_extensions_and_reports_what_it_left_out") {
  temp_dir d;
  for (const char* cls : {"a", "b", "empty"}) fs::create_directories(d.path / cls);
  const auto jpg = encode(picture(8, 8, 1), ".jpg");
  // Every extension of torchvision's IMG_EXTENSIONS and .jfif, .jpe, in any case.
  const std::vector<std::string> taken = {"1.jpg", "2.JPEG", "3.png", "4.ppm", "5.bmp", "6.pgm", "7.tif", "8.TIFF",
                                          "9.webp", "10.jfif", "11.JPE"};
  for (const auto& n : taken) write_bytes(d.path / "a" / n, jpg);
  for (const char* n : {"x.gif", "y.GIF", "z.mpo", "noext", "w.pbm"}) write_bytes(d.path / "b" / n, jpg);
  write_bytes(d.path / "b" / "keep.jpg", jpg);
  fs::create_symlink(d.path / "b" / "gone.jpg", d.path / "b" / "link.jpg");  // dangling
  std::vector<std::pair<log_level, std::string>> logged;
  const auto previous = set_log_sink([&](log_level l, std::string_view m) { logged.emplace_back(l, std::string(m)); });
  const auto listing = list_image_folder(d.path.string());
  set_log_sink(previous);
  CHECK(listing.classes == std::vector<std::string>{"a", "b", "empty"});
  CHECK(listing.files.size() == taken.size() + 1);
  const auto& left = listing.left_out;
  CHECK(left.by_extension == std::vector<std::pair<std::string, std::uint64_t>>{{"", 1}, {".gif", 2}, {".mpo", 1}, {".pbm", 1}});
  CHECK(left.files() == 5);
  REQUIRE(left.dangling_links.size() == 1);
  CHECK(left.dangling_links[0] == (d.path / "b" / "link.jpg").string());
  CHECK(left.empty_classes == std::vector<std::string>{"empty"});
  CHECK(left.summary() == "left out: 5 files by extension (no extension 1, .gif 2, .mpo 1, .pbm 1), 1 dangling link (" +
                              (d.path / "b" / "link.jpg").string() + "), 1 empty class folder (empty)");
  // Logged once, as a warning: a label without samples.
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].first == log_level::warn);
  CHECK(logged[0].second.find("12 images in 3 classes, left out: 5 files") != std::string::npos);
  // Nothing left out: nothing logged.
  temp_dir clean;
  fs::create_directories(clean.path / "c");
  write_bytes(clean.path / "c" / "a.jpg", jpg);
  logged.clear();
  const auto prev2 = set_log_sink([&](log_level l, std::string_view m) { logged.emplace_back(l, std::string(m)); });
  const auto clean_listing = list_image_folder(clean.path.string());
  set_log_sink(prev2);
  CHECK(clean_listing.left_out.empty());
  CHECK(clean_listing.left_out.summary() == "left out: nothing");
  CHECK(logged.empty());
}

TEST_CASE("image_files.loader_end_to_end_pixels_labels_and_bad_data") {
  temp_dir d;
  const int sizes[][2] = {{40, 50}, {64, 32}, {33, 77}, {48, 48}};
  std::vector<cv::Mat> rgb_refs;
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(d.path / ("class" + std::to_string(c)));
    for (int i = 0; i < 4; ++i) {
      const cv::Mat pic = picture(sizes[i][0], sizes[i][1], 10 * c + i);
      write_bytes(d.path / ("class" + std::to_string(c)) / ("img" + std::to_string(i) + ".png"), encode(pic, ".png"));
      cv::Mat rgb;
      cv::cvtColor(pic, rgb, cv::COLOR_BGR2RGB);
      rgb_refs.push_back(rgb);
    }
  }
  auto make = [&](error_policy policy) {
    pipeline_source_options po;
    po.on_error = policy;
    return std::make_shared<pipeline_source>(make_image_files_reader(list_image_folder(d.path.string()).files),
                                             parse_pipeline("center_crop(16)"), po);
  };
  loader_options o;
  o.batch_size = 4;
  o.workers = 2;
  o.device = "cpu";
  {
    loader l(make(error_policy::fail), o);
    std::size_t seen = 0;
    while (auto b = l.next()) {
      const auto* img = static_cast<const std::uint8_t*>(b->field("image").data);
      const auto* lab = static_cast<const std::int64_t*>(b->field("label").data);
      for (std::size_t j = 0; j < b->size(); ++j) {
        const std::uint64_t i = b->indices()[j];
        CHECK(lab[j] == static_cast<std::int64_t>(i / 4));
        const cv::Mat& ref = rgb_refs[i];
        const int y0 = (ref.rows - 16) / 2, x0 = (ref.cols - 16) / 2;
        for (int y = 0; y < 16; ++y)
          REQUIRE(std::memcmp(img + (j * 16 * 16 + y * 16) * 3, ref.ptr(y0 + y) + x0 * 3, 16 * 3) == 0);
        ++seen;
      }
    }
    CHECK(seen == 8);
  }
  // Now spoil three files: zero bytes, truncated, not an image under an image name.
  const auto c0 = d.path / "class0";
  write_bytes(c0 / "img1.png", {});
  const auto good = encode(picture(40, 40, 1), ".png");
  write_bytes(c0 / "img2.png", std::vector<std::byte>(good.begin(), good.begin() + 60));
  std::ofstream(c0 / "img3.png") << "this is text, not a picture";
  {
    loader l(make(error_policy::fail), o);
    try {
      (void)l.next();
      FAIL("batch 0 holds spoiled files");
    } catch (const sample_error& e) {
      CHECK(e.index() == 1);
      CHECK(e.stage() == "decode");
      CHECK(e.path().find("img1.png") != std::string::npos);
      CHECK(std::string(e.what()).find("empty file") != std::string::npos);
    }
    CHECK(l.next());  // the loader stays usable: batch 1 is fine
  }
  {
    auto src = make(error_policy::skip);
    loader l(src, o);
    std::size_t seen = 0;
    const std::set<std::uint64_t> bad{1, 2, 3};
    while (auto b = l.next()) {
      const auto* lab = static_cast<const std::int64_t*>(b->field("label").data);
      for (std::size_t j = 0; j < b->size(); ++j) {
        // A bad sample's slot shows its stand-in: the first good sample at stand_in_position().
        const std::uint64_t i = b->indices()[j];
        std::uint64_t served = i;
        for (std::uint64_t k = 1; bad.count(served) != 0; ++k)
          served = l.order().index_at(0, stand_in_position(o.seed, 0, i, k, l.order().size()));
        CHECK(lab[j] == static_cast<std::int64_t>(served / 4));
        ++seen;
      }
    }
    CHECK(seen == 8);
    // Each bad file was read once in the epoch, however many stand-in searches passed over it.
    CHECK(src->failures() == 3);
    CHECK(l.stats().errors == 3);
    CHECK(l.stats().bad_samples == 3);
    CHECK(src->replaced() == 3);
    CHECK(l.stats().replaced == 3);
    const auto failed = src->failed();
    CHECK(failed.size() == 3);
    CHECK(std::any_of(failed.begin(), failed.end(), [](const std::string& s) { return s.find("img2.png") != std::string::npos; }));
  }
  // JPEGs through RandomResizedCrop: decoded at a DCT scale where the window allows it.
  const auto big = d.path / "big";
  fs::create_directories(big / "a");
  for (int i = 0; i < 6; ++i) {
    std::string name = "p0.jpg";
    name[1] = static_cast<char>('0' + i);
    write_bytes(big / "a" / name, encode(picture(480, 640, i), ".jpg"));
  }
  {
    loader_options o3 = o;
    o3.batch_size = 3;
    loader l3(std::make_shared<pipeline_source>(make_image_files_reader(list_image_folder(big.string()).files),
                                                parse_pipeline("rrc(32),hflip")),
              o3);
    std::size_t n = 0;
    while (auto b = l3.next()) {
      CHECK(b->field("image").shape == std::vector<std::int64_t>{3, 32, 32, 3});
      n += b->size();
    }
    CHECK(n == 6);
  }
  // A list naming a missing file: stage read.
  std::ofstream(d.path / "list.txt") << "class1/img0.png 0\nclass1/missing.png 1\n";
  loader_options o2 = o;
  o2.batch_size = 2;
  loader l(std::make_shared<pipeline_source>(make_image_files_reader(read_file_list((d.path / "list.txt").string())),
                                             parse_pipeline("center_crop(16)")),
           o2);
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("'read'"), sample_error);
}

TEST_CASE("image_files.oversized_image_under_both_policies") {
  temp_dir d;
  fs::create_directories(d.path / "c");
  write_bytes(d.path / "c" / "0.png", encode(picture(20, 20, 1), ".png"));
  write_bytes(d.path / "c" / "1.jpg", encode(picture(300, 400, 2), ".jpg"));  // 120000 pixels: over the limit
  write_bytes(d.path / "c" / "2.png", encode(picture(20, 20, 3), ".png"));
  decode_options limit;
  limit.max_pixels = 100000;
  loader_options o;
  o.batch_size = 3;
  o.workers = 2;
  o.device = "cpu";
  const auto files = list_image_folder(d.path.string()).files;
  {
    loader l(std::make_shared<pipeline_source>(make_image_files_reader(files, limit), parse_pipeline("center_crop(16)")), o);
    try {
      (void)l.next();
      FAIL("the oversized image must fail its batch");
    } catch (const sample_error& e) {
      CHECK(e.index() == 1);
      CHECK(e.stage() == "decode");
      CHECK(e.path().find("1.jpg") != std::string::npos);
      CHECK(e.message().find("exceeds the limit of 100000 pixels") != std::string::npos);
    }
  }
  pipeline_source_options skip;
  skip.on_error = error_policy::skip;
  check_one_skipped(std::make_shared<pipeline_source>(make_image_files_reader(files, limit), parse_pipeline("center_crop(16)"), skip),
                    o, 3, "1.jpg");
}

namespace {
/// A first step that records every size the decode planner asks it about (window(),
/// min_short_side()) and otherwise crops the image's top-left 4 x 4.
class size_recording_crop final : public transform {
 public:
  std::string name() const override { return "size_recording_crop"; }
  image_spec output_spec(const image_spec& in) const override { return {4, 4, in.channels, in.type}; }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
    for (std::int64_t y = 0; y < 4; ++y)
      std::memcpy(out.data + static_cast<std::size_t>(y) * 4 * px, in.data + static_cast<std::size_t>(y * in.spec.width) * px, 4 * px);
  }
  std::int64_t min_short_side(std::int64_t height, std::int64_t width, philox_stream) const override {
    record(height, width);
    return 0;
  }
  std::optional<window_plan> window(std::int64_t height, std::int64_t width, philox_stream) const override {
    record(height, width);
    return window_plan{{0, 0, 4, 4}, 4, 4};
  }
  void record(std::int64_t height, std::int64_t width) const {
    const std::lock_guard lock(m_);
    asked_.emplace_back(height, width);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> asked() const {
    const std::lock_guard lock(m_);
    return asked_;
  }

 private:
  mutable std::mutex m_;
  mutable std::vector<std::pair<std::int64_t, std::int64_t>> asked_;
};
}  // namespace

TEST_CASE("image_files.a_header_of_zero_width_or_height_is_the_decoders_to_refuse") {
  // Contract: a file whose header gives a size of 0 by either side has no window to plan (a random
  // crop of 0 pixels): it goes to the decoder whole, which refuses it naming the file, as without
  // a crop; a first step's window() and min_short_side() are asked about real sizes only.
  temp_dir d;
  fs::create_directories(d.path / "c");
  // A PNG whose IHDR says w x h (its CRC made again, so that the header itself reads as sound).
  const auto png = [](std::uint32_t w, std::uint32_t h) {
    auto bytes = encode(picture(10, 10, 4), ".png");
    for (int k = 0; k < 4; ++k) {
      bytes[16 + static_cast<std::size_t>(k)] = static_cast<std::byte>(w >> (24 - 8 * k));
      bytes[20 + static_cast<std::size_t>(k)] = static_cast<std::byte>(h >> (24 - 8 * k));
    }
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 12; i < 29; ++i) {  // "IHDR" and its 13 bytes
      crc ^= static_cast<std::uint32_t>(bytes[i]);
      for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    crc = ~crc;
    for (int k = 0; k < 4; ++k) bytes[29 + static_cast<std::size_t>(k)] = static_cast<std::byte>(crc >> (24 - 8 * k));
    return bytes;
  };
  REQUIRE(peek_size(png(0, 10)).width == 0);
  REQUIRE(peek_size(png(0, 10)).height == 10);
  write_bytes(d.path / "c" / "0.png", png(0, 10));
  write_bytes(d.path / "c" / "1.png", png(10, 0));
  const auto files = list_image_folder(d.path.string()).files;
  REQUIRE(files.size() == 2);
  loader_options o;
  o.batch_size = 1;
  o.workers = 1;
  o.device = "cpu";
  const auto recording = std::make_shared<size_recording_crop>();
  for (const char* steps : {"rrc(16)", "center_crop(16)", "recording"}) {
    CAPTURE(steps);
    const pipeline p = std::string(steps) == "recording" ? pipeline({recording}) : parse_pipeline(steps);
    loader l(std::make_shared<pipeline_source>(make_image_files_reader(files), p), o);
    for (std::uint64_t k = 0; k < 2; ++k) {
      CAPTURE(k);
      try {
        (void)l.next();
        FAIL("a zero-sized image must fail its batch");
      } catch (const sample_error& e) {
        CHECK(e.index() == k);
        CHECK(e.stage() == "decode");
        CHECK(e.path().find(std::to_string(k) + ".png") != std::string::npos);
        CHECK(e.message().find("a PNG image whose header gives no size") != std::string::npos);
      }
    }
  }
  for (const auto& [h, w] : recording->asked()) {  // (a probe of the step at a made-up size is no image's)
    CAPTURE(h);
    CAPTURE(w);
    CHECK(h > 0);
    CHECK(w > 0);
  }
}

TEST_CASE("image_files.shuffled_skip_takes_a_drawn_stand_in_and_runs_are_deterministic") {
  temp_dir d;
  fs::create_directories(d.path / "c");
  for (int i = 0; i < 12; ++i)
    write_bytes(d.path / "c" / (std::string(1, static_cast<char>('a' + i)) + ".png"), encode(picture(20, 20, i), ".png"));
  std::ofstream(d.path / "c" / "e.png") << "broken";  // index 4
  const auto files = list_image_folder(d.path.string()).files;
  pipeline_source_options skip;
  skip.on_error = error_policy::skip;
  auto make = [&] {
    return std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("center_crop(8),hflip"), skip);
  };
  loader_options o;
  o.batch_size = 5;
  o.device = "cpu";
  o.seed = 21;
  o.order = {true, 0, 1, false};
  auto run = [&](std::size_t workers, std::uint32_t epoch) {
    o.workers = workers;
    loader l(make(), o);
    l.start_epoch(epoch);
    std::vector<std::vector<std::byte>> images;
    std::vector<std::uint64_t> indices;
    while (auto b = l.next()) {
      const auto* img = static_cast<const std::byte*>(b->field("image").data);
      for (std::size_t j = 0; j < b->size(); ++j) {
        images.emplace_back(img + j * 8 * 8 * 3, img + (j + 1) * 8 * 8 * 3);
        indices.push_back(b->indices()[j]);
      }
    }
    return std::make_pair(indices, images);
  };
  const auto [idx1, img1] = run(1, 3);
  const auto [idx2, img2] = run(2, 3);
  CHECK(idx1 == idx2);
  CHECK(img1 == img2);  // the same bits for 1 and 2 workers
  // The broken sample (index 4) shows its stand-in, the sample at stand_in_position() of the
  // epoch, as that position's own slot shows it (hflip draws come from the stand-in's stream).
  const epoch_order order(files.size(), 21, {true, 0, 1, false});
  const auto pos = static_cast<std::size_t>(std::find(idx1.begin(), idx1.end(), 4u) - idx1.begin());
  REQUIRE(pos < idx1.size());
  std::size_t at_stand_in = pos;
  for (std::uint64_t k = 1; order.index_at(3, at_stand_in) == 4; ++k)
    at_stand_in = static_cast<std::size_t>(stand_in_position(21, 3, 4, k, order.size()));
  CHECK(at_stand_in != pos);
  CHECK(img1[pos] == img1[at_stand_in]);
  // And a resumed loader continues with the same bits.
  o.workers = 2;
  loader first(make(), o);
  first.start_epoch(3);
  (void)first.next();
  loader second(make(), o);
  second.resume(first.state());
  std::size_t at = 5;
  while (auto b = second.next()) {
    const auto* img = static_cast<const std::byte*>(b->field("image").data);
    for (std::size_t j = 0; j < b->size(); ++j, ++at)
      CHECK(std::vector<std::byte>(img + j * 8 * 8 * 3, img + (j + 1) * 8 * 8 * 3) == img1[at]);
  }
  CHECK(at == 12);
}

TEST_CASE("image_files.skip_reads_each_bad_file_once_per_epoch_and_spreads_stand_ins") {
  // 12 pictures; bad ones in a cluster at the start, and the last one.
  temp_dir d;
  fs::create_directories(d.path / "c");
  for (int i = 0; i < 12; ++i)
    write_bytes(d.path / "c" / (std::string(1, static_cast<char>('a' + i)) + ".png"), encode(picture(12, 12, i), ".png"));
  const auto files = list_image_folder(d.path.string()).files;
  auto spoil = [&](std::initializer_list<std::uint64_t> which) {
    for (auto i : which) std::ofstream(files[i].path, std::ios::trunc) << "not a picture";
  };
  auto make = [&](double max_bad_fraction = 0.0) {
    pipeline_source_options skip;
    skip.on_error = error_policy::skip;
    skip.max_bad_fraction = max_bad_fraction;
    return std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("center_crop(8)"), skip);
  };
  loader_options o = test::cpu_loader(4, 2, 9);
  o.order = {true, 0, 1, false};
  SUBCASE("a cluster, the first and the last") {
    spoil({0, 1, 2, 3, 11});
    auto src = make();
    loader l(src, o);
    std::map<std::vector<std::byte>, int> served;  // how many slots show each picture
    for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
      l.start_epoch(epoch);
      std::size_t seen = 0;
      while (auto b = l.next()) {
        CHECK(b->size() == 4);  // every batch full
        const auto* img = static_cast<const std::byte*>(b->field("image").data);
        for (std::size_t j = 0; j < b->size(); ++j, ++seen)
          if (epoch == 0) ++served[std::vector<std::byte>(img + j * 8 * 8 * 3, img + (j + 1) * 8 * 8 * 3)];
      }
      CHECK(seen == 12);
    }
    CHECK(src->failures() == 5);       // distinct bad samples
    CHECK(l.stats().errors == 10);     // each read once per epoch: 5 x 2 epochs
    CHECK(l.stats().bad_samples == 10);
    CHECK(src->replaced() == 10);
    // The five stand-ins of the epoch do not all pile onto one sample (the old "next sample" rule
    // put the cluster's four onto the sample after it).
    int most = 0;
    for (const auto& [pixels, count] : served) most = std::max(most, count);
    CHECK(most <= 3);
    CHECK(served.size() == 7);  // the seven good pictures, nothing else
  }
  SUBCASE("all but one bad: every slot shows the good one") {
    spoil({0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11});
    auto src = make();
    loader l(src, o);
    std::set<std::vector<std::byte>> shown;
    while (auto b = l.next()) {
      const auto* img = static_cast<const std::byte*>(b->field("image").data);
      for (std::size_t j = 0; j < b->size(); ++j) shown.emplace(img + j * 8 * 8 * 3, img + (j + 1) * 8 * 8 * 3);
    }
    CHECK(shown.size() == 1);
    CHECK(l.stats().errors == 11);
    CHECK(src->replaced() == 11);
  }
  SUBCASE("max_bad_fraction stops a run that is mostly bad") {
    spoil({2, 5, 7});  // 3 of 12 = 25%
    {
      loader l(make(0.2), o);
      bool failed = false;
      try {
        while (auto b = l.next()) {
        }
      } catch (const sample_error& e) {
        failed = true;
        CHECK(std::string(e.what()).find("max_bad_fraction") != std::string::npos);
      }
      CHECK(failed);
    }
    loader ok(make(0.3), o);
    std::size_t seen = 0;
    while (auto b = ok.next()) seen += b->size();
    CHECK(seen == 12);
    CHECK_THROWS_WITH_AS(make(1.5), doctest::Contains("max_bad_fraction must be in [0, 1]"), std::invalid_argument);
    CHECK_THROWS_AS(make(-0.1), std::invalid_argument);
  }
}

namespace {
/// A transform that fails every sample with an exception that is not the sample's fault.
template <class Error>
class failing_transform final : public transform {
 public:
  std::string name() const override { return "failing"; }
  image_spec output_spec(const image_spec& in) const override { return in; }
  void apply(const image_view&, const image_view&, philox_stream) const override {
    if constexpr (std::is_same_v<Error, std::bad_alloc>) throw std::bad_alloc();
    else throw Error("budget exceeded");
  }
};
}  // namespace

TEST_CASE("image_files.out_of_memory_and_fatal_errors_are_no_bad_samples") {
  // Under skip, only a sample's own failure is skipped: running out of memory, or a fatal_error
  // (a budget, an option), ends the run with that exception and counts no bad sample.
  temp_dir d;
  const auto files = jpeg_class_folder(d.path, 6, 40, 0, 40);
  pipeline_source_options skip;
  skip.on_error = error_policy::skip;
  const auto run = [&](std::shared_ptr<transform> t) {
    auto src = std::make_shared<pipeline_source>(make_image_files_reader(files), pipeline({make_center_crop(8), t}), skip);
    return std::make_pair(src, std::make_shared<loader>(src, test::cpu_loader(3, 1, 9)));
  };
  {
    auto [src, l] = run(std::make_shared<failing_transform<std::bad_alloc>>());
    CHECK_THROWS_AS((void)l->next(), std::bad_alloc);
    CHECK(src->failures() == 0);
    CHECK(l->stats().bad_samples == 0);
  }
  {
    auto [src, l] = run(std::make_shared<failing_transform<fatal_error>>());
    CHECK_THROWS_WITH_AS((void)l->next(), doctest::Contains("budget exceeded"), fatal_error);
    CHECK(src->failures() == 0);
    CHECK(l->stats().bad_samples == 0);
  }
  {  // an ordinary exception is the sample's: skipped until none is left
    auto [src, l] = run(std::make_shared<failing_transform<std::runtime_error>>());
    CHECK_THROWS_WITH_AS((void)l->next(), doctest::Contains("every one of the 6 samples failed"), sample_error);
    CHECK(src->failures() == 6);
  }
}

TEST_CASE("image_files.jpeg_window_decoding_in_the_pipeline") {
  temp_dir d;
  const auto files = jpeg_class_folder(d.path, 6, 300, 10, 400);
  const loader_options o = pinfeed::test::cpu_loader(6, 2, 4);
  // rrc then hflip: the flip rides along in the window's resize (drawn from the flip's own stream).
  for (const char* spec : {"rrc(32)", "rrc(32),hflip", "rrc(32),hflip(1)", "center_crop(64)", "crop(48)"}) {
    CAPTURE(spec);
    const auto steps = parse_pipeline(spec);
    loader l(std::make_shared<pipeline_source>(make_image_files_reader(files), steps), o);
    auto b = l.next();
    REQUIRE(b);
    const auto img = b->field("image");
    const std::size_t px = static_cast<std::size_t>(img.shape[1] * img.shape[2] * 3);
    std::vector<std::byte> bytes, window, full, expect(px);
    for (std::size_t j = 0; j < b->size(); ++j) {
      const std::uint64_t i = b->indices()[j];
      read_file(files[i].path, bytes);
      const auto whole = decode_image(bytes, full, {}, "ref");
      const philox_stream rng(4, 0, i, 100);
      const auto plan = steps.steps()[0]->window(whole.height, whole.width, rng);
      REQUIRE(plan.has_value());
      if (std::string(spec).starts_with("rrc")) {
        // The window decoded alone (maybe at a DCT scale), resized, then the flip step on its own:
        // what the loader did in one pass.
        const auto ws = decode_image_region(bytes, window, {}, plan->window, 32, "ref");
        const image_view resized{expect.data(), {32, 32, 3, dtype::u8}};
        resize_into({window.data(), ws}, resized);
        if (steps.steps().size() > 1) steps.steps()[1]->apply(resized, resized, philox_stream(4, 0, i, 101));
      } else {
        // Crops: exactly the window of the full decode.
        for (std::int64_t y = 0; y < plan->out_height; ++y)
          std::memcpy(expect.data() + y * plan->out_width * 3,
                      full.data() + ((plan->window.y + y) * whole.width + plan->window.x) * 3,
                      static_cast<std::size_t>(plan->out_width) * 3);
      }
      CHECK(std::memcmp(static_cast<const std::byte*>(img.data) + j * px, expect.data(), px) == 0);
    }
  }
}


TEST_CASE("image_files.a_folder_of_many_files_lists_in_their_order") {
  // More files than letters: the names grow a letter (aa, ab, ...) and still sort in file order.
  temp_dir d;
  const auto files = jpeg_class_folder(d.path, 60, 8, 0, 8);
  REQUIRE(files.size() == 60);
  CHECK(fs::path(files.front().path).filename() == "aa.jpg");
  CHECK(fs::path(files[27].path).filename() == "bb.jpg");
  CHECK(fs::path(files.back().path).filename() == "ch.jpg");
  CHECK(pinfeed::test::letters_name(0, 26) == "a");
  CHECK(pinfeed::test::letters_name(25, 26) == "z");
  CHECK(pinfeed::test::letters_name(26, 27 * 26) == "aba");
}
