#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <fstream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <unistd.h>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "test_util.hpp"
#include "pinfeed/runtime/loader.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::temp_dir;

namespace {

void write_image(const fs::path& p, int h, int w, int seed, const char* ext) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(x * 5 + seed), uchar(y * 3), uchar(seed * 30));
  std::vector<uchar> buf;
  REQUIRE(cv::imencode(ext, m, buf));
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
}

std::vector<std::byte> slurp(const fs::path& p) {
  std::vector<std::byte> b;
  read_file(p.string(), b);
  return b;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  ::pclose(f);
  return out;
}

std::vector<std::string> checksums(const std::shared_ptr<image_reader>& reader) {
  loader_options o;
  o.batch_size = 3;
  o.workers = 2;
  o.device = "cpu";
  o.seed = 5;
  loader l(std::make_shared<pipeline_source>(reader, parse_pipeline("center_crop(12),ycbcr,scale")), o);
  std::vector<std::string> lines;
  while (auto b = l.next()) lines.push_back(checksum_line(*b));
  return lines;
}

}  // namespace

TEST_CASE("shards.pack_then_read_equals_the_folder") {
  temp_dir d;
  for (int c = 0; c < 3; ++c) {
    fs::create_directories(d.path / "data" / ("c" + std::to_string(c)));
    for (int i = 0; i < 4; ++i)
      write_image(d.path / "data" / ("c" + std::to_string(c)) / ("i" + std::to_string(i) + (i % 2 ? ".png" : ".jpg")),
                  20 + i, 16 + c, c * 4 + i, i % 2 ? ".png" : ".jpg");
  }
  const auto listing = list_image_folder((d.path / "data").string());
  const auto shards = write_shards(listing.files, (d.path / "train").string(), 2000);  // small: several shards
  CHECK(shards.size() > 2);
  // GNU tar reads what we wrote.
  const std::string listed = run("tar -tf '" + shards[0] + "' 2>&1");
  CHECK(listed.find("000000.jpg") != std::string::npos);
  CHECK(listed.find("000000.cls") != std::string::npos);
  // And the shards give the very batches the folder gives.
  const auto pattern = (d.path / "train-*.tar").string();
  CHECK(expand_shard_pattern(pattern) == shards);
  const auto from_shards = checksums(make_shard_reader(shards));
  REQUIRE(listing.files.size() == 3 * 4);
  CHECK(from_shards.size() == (listing.files.size() + 2) / 3);  // batches of 3 (checksums())
  CHECK(from_shards == checksums(make_image_files_reader(listing.files)));
  // Each shard has its sidecar index: the shard's size, then each sample's image member where
  // index_tar finds it, with its label.
  for (const auto& shard : shards) {
    CAPTURE(shard);
    std::ifstream in(shard_index_path(shard));
    REQUIRE(in);
    std::string magic, keys, label_key;
    int version = 0;
    std::uint64_t bytes = 0, count = 0;
    in >> magic >> version >> bytes >> count >> keys >> label_key;
    CHECK(magic == "pinfeed-tar-index");
    CHECK(version == 1);
    CHECK(bytes == fs::file_size(shard));
    CHECK(keys == shard_options{}.image_keys);
    CHECK(label_key == "cls");
    std::ifstream tar(shard, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(tar)), std::istreambuf_iterator<char>());
    const auto members = index_tar(std::as_bytes(std::span<const char>(raw)), shard);
    CHECK(members.size() == 2 * count);  // an image and a label each
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t offset = 0, size = 0;
      long long label = -1;
      std::string name;
      in >> offset >> size >> label >> name;
      const auto& m = members[2 * i];
      CHECK(m.name == name);
      CHECK(m.offset == offset);
      CHECK(m.size == size);
      const auto& l = members[2 * i + 1];
      CHECK(std::string(raw.data() + l.offset, l.size) == std::to_string(label));
    }
  }
  CHECK_THROWS_WITH_AS(write_shard_index((d.path / "missing.tar").string()), doctest::Contains("missing.tar"),
                       std::invalid_argument);
}

TEST_CASE("shards.read_gnu_tar_archives_with_long_names") {
  temp_dir d;
  const std::string dir = "a_directory_name_that_is_long_enough_to_need_more_than_one_hundred_characters_in_total/deeper";
  fs::create_directories(d.path / "src" / dir);
  write_image(d.path / "src" / dir / "sample01.png", 10, 12, 1, ".png");
  std::ofstream(d.path / "src" / dir / "sample01.cls") << "7\n";
  write_image(d.path / "src" / dir / "sample02.jpg", 14, 12, 2, ".jpg");
  std::ofstream(d.path / "src" / dir / "sample02.cls") << "3";
  for (const char* format : {"gnu", "posix", "ustar"}) {
    CAPTURE(format);
    const auto tar = d.path / (std::string(format) + ".tar");
    const std::string out = run("cd '" + (d.path / "src").string() + "' && tar --format=" + format + " -cf '" +
                                tar.string() + "' . 2>&1");
    if (std::string(format) == "ustar" && !out.empty()) continue;  // the long path does not fit ustar
    const auto bytes = slurp(tar);
    const auto members = index_tar(bytes, tar.string());
    std::set<std::string> names;
    for (const auto& m : members) names.insert(m.name);
    CHECK(names.count("./" + dir + "/sample01.png") == 1);
    auto reader = make_shard_reader({tar.string()});
    CHECK(reader->size() == 2);
    loader_options o;
    o.batch_size = 2;
    o.workers = 1;
    o.device = "cpu";
    loader l(std::make_shared<pipeline_source>(reader, parse_pipeline("center_crop(8)")), o);
    auto b = l.next();
    REQUIRE(b);
    const auto* labels = static_cast<const std::int64_t*>(b->field("label").data);
    CHECK(std::set<std::int64_t>{labels[0], labels[1]} == std::set<std::int64_t>{3, 7});  // archive order
  }
}

namespace {
/// Writes `value` into the tar header at `header` as a GNU base-256 size (the 12-byte field at
/// 124: 0x80, then the number big-endian over `bytes` of the 11 bytes, zeros before), and the
/// header's checksum again.
void write_checksum(std::byte* h);
void base256_size(std::vector<std::byte>& tar, std::size_t header, std::uint64_t value, std::uint8_t high = 0) {
  std::byte* h = tar.data() + header;
  h[124] = std::byte{0x80};
  for (int i = 11; i >= 1; --i, value >>= 8) h[124 + i] = static_cast<std::byte>(value & 0xFF);
  h[125] = static_cast<std::byte>(static_cast<std::uint8_t>(h[125]) | high);
  write_checksum(h);
}

/// The header's checksum made again after a change to it.
void write_checksum(std::byte* h) {
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<std::uint8_t>(h[i]);
  char text[8];
  std::snprintf(text, sizeof text, "%06o", sum);
  std::memcpy(h + 148, text, 7);  // six digits and a NUL; the eighth byte stays a space
}
}  // namespace

TEST_CASE("shards.gnu_base_256_sizes_are_read_and_an_oversized_one_is_refused") {
  // GNU tar writes a size past the 8 GiB of 11 octal digits in base 256 (the field's high bit set),
  // and some writers do so for every member: a member's size read that way is the octal one's.
  temp_dir d;
  fs::create_directories(d.path / "src");
  write_image(d.path / "src" / "a.png", 10, 12, 1, ".png");
  std::ofstream(d.path / "src" / "a.cls") << "7";
  const auto tar = d.path / "s.tar";
  REQUIRE(run("cd '" + (d.path / "src").string() + "' && tar --format=gnu -cf '" + tar.string() + "' a.png a.cls 2>&1").empty());
  const auto octal = slurp(tar);
  const auto want = index_tar(octal, "s.tar");
  REQUIRE(want.size() == 2);
  auto binary = octal;
  base256_size(binary, want[0].offset - 512, want[0].size);
  REQUIRE(binary != octal);
  const auto got = index_tar(binary, "s.tar");
  REQUIRE(got.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(got[i].name == want[i].name);
    CHECK(got[i].offset == want[i].offset);
    CHECK(got[i].size == want[i].size);
  }
  // A base-256 size past 64 bits is refused by name, not wrapped into a small one.
  auto huge = octal;
  base256_size(huge, want[0].offset - 512, want[0].size, 0x01);
  CHECK_THROWS_WITH_AS((void)index_tar(huge, "s.tar"), doctest::Contains("tar shard 's.tar': member size is not a number"),
                       std::invalid_argument);
  // An octal size ends in NULs or spaces: anything else after its digits makes it no number.
  for (const char junk : {'x', '8', '\x7f'}) {
    CAPTURE(static_cast<int>(junk));
    auto trailing = octal;
    std::byte* h = trailing.data() + (want[0].offset - 512);
    REQUIRE(h[135] == std::byte{0});  // the 12-byte field: 11 digits and a NUL
    h[135] = static_cast<std::byte>(junk);
    write_checksum(h);
    CHECK_THROWS_WITH_AS((void)index_tar(trailing, "s.tar"), doctest::Contains("tar shard 's.tar': member size is not a number"),
                         std::invalid_argument);
  }
}

TEST_CASE("shards.patterns") {
  temp_dir d;
  for (int i = 0; i < 12; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "s-%03d.tar", i);
    std::ofstream(d.path / name) << "";
  }
  const auto braces = expand_shard_pattern((d.path / "s-{003..010}.tar").string());
  REQUIRE(braces.size() == 8);
  CHECK(braces.front() == (d.path / "s-003.tar").string());
  CHECK(braces.back() == (d.path / "s-010.tar").string());
  CHECK(expand_shard_pattern((d.path / "s-00?.tar").string()).size() == 10);
  CHECK_THROWS_WITH_AS(expand_shard_pattern((d.path / "none-*.tar").string()), doctest::Contains("matches no file"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_shard_pattern("s-{9..1}.tar"), doctest::Contains("bad range"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_shard_pattern("s-{a..b}.tar"), doctest::Contains("not numeric"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_shard_pattern("s-{1.tar"), doctest::Contains("{first..last}"), std::invalid_argument);
}

namespace {
/// The samples of `bytes` fed to a shard_scanner in pieces of the sizes `pieces` gives, in turn
/// (without telling it the size: as a shard arriving over the network).
std::vector<loaders::detail::shard_sample> scanned(std::span<const std::byte> bytes, const std::vector<std::size_t>& pieces) {
  loaders::detail::shard_scanner scan(0, "s.tar", shard_options{});
  std::size_t at = 0;
  for (std::size_t k = 0; at < bytes.size(); ++k) {
    const std::size_t n = std::min(pieces[k % pieces.size()], bytes.size() - at);
    scan.feed(bytes.subspan(at, n));
    at += n;
  }
  CHECK(scan.bytes_fed() == bytes.size());
  return scan.samples();
}
}  // namespace

TEST_CASE("shards.a_shard_scanned_as_it_arrives_gives_the_samples_of_the_whole") {
  temp_dir d;
  fs::create_directories(d.path / "data" / "c");
  for (int i = 0; i < 9; ++i) write_image(d.path / "data" / "c" / (std::to_string(i) + "i.png"), 9 + i, 10, i, ".png");
  const auto shard = write_shards(list_image_folder((d.path / "data").string()).files, (d.path / "s").string(), 1 << 20);
  const auto bytes = slurp(shard.at(0));
  const auto whole = loaders::detail::shard_samples(bytes, 0, "s.tar", shard_options{});
  REQUIRE(whole.size() == 9);
  std::mt19937 rng(5);
  std::vector<std::size_t> random_pieces;
  for (int i = 0; i < 64; ++i) random_pieces.push_back(1 + rng() % 1500);
  for (const auto& pieces : std::vector<std::vector<std::size_t>>{{1}, {7}, {511}, {512}, {513}, {4096}, random_pieces}) {
    CAPTURE(pieces.front());
    const auto got = scanned(bytes, pieces);
    REQUIRE(got.size() == whole.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].key == whole[i].key);
      CHECK(got[i].image.name == whole[i].image.name);
      CHECK(got[i].image.offset == whole[i].image.offset);
      CHECK(got[i].image.size == whole[i].image.size);
      CHECK(got[i].label == whole[i].label);
    }
  }
  // Cut short anywhere, it fails as the archive in memory does: inside a header, inside a member's data.
  const std::span<const std::byte> all(bytes);
  const std::uint64_t second_header = whole[0].image.offset + (whole[0].image.size + 511) / 512 * 512;
  const std::string cut_header = "truncated: 188 bytes of a header at the end (header at byte " + std::to_string(second_header) + ")";
  CHECK_THROWS_WITH_AS(scanned(all.first(second_header + 188), {100}), doctest::Contains(cut_header.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loaders::detail::shard_samples(all.first(second_header + 188), 0, "s.tar", shard_options{}),
                       doctest::Contains(cut_header.c_str()), std::invalid_argument);
  // Cut inside a member's padding, the archive is whole up to there: the first sample lacks its label.
  CHECK_THROWS_WITH_AS(scanned(all.first(whole[0].image.offset + whole[0].image.size + 1), {64}),
                       doctest::Contains("has no .cls label member"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(scanned(all.first(520), {3}), doctest::Contains("runs past the end (header at byte 0)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(loaders::detail::shard_samples(all.first(520), 0, "s.tar", shard_options{}),
                       doctest::Contains("runs past the end (header at byte 0)"), std::invalid_argument);
  auto garbage = bytes;
  garbage[whole[1].image.offset - 512 + 10] = std::byte{'#'};  // the second image's header
  const std::string bad_header = "bad header checksum (not a tar file, or corrupt) (header at byte " +
                                 std::to_string(whole[1].image.offset - 512) + ")";
  CHECK_THROWS_WITH_AS(scanned(garbage, {333}), doctest::Contains(bad_header.c_str()), std::invalid_argument);
}

TEST_CASE("shards.malformed_shards_fail_at_construction") {
  temp_dir d;
  fs::create_directories(d.path / "data" / "c");
  write_image(d.path / "data" / "c" / "a.png", 10, 10, 1, ".png");
  write_image(d.path / "data" / "c" / "b.png", 10, 10, 2, ".png");
  const auto good = write_shards(list_image_folder((d.path / "data").string()).files, (d.path / "g").string(), 1 << 20);
  auto bytes = slurp(good[0]);
  auto write = [&](const std::string& name, const std::vector<std::byte>& b) {
    const auto p = d.path / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p.string();
  };
  auto expect = [&](const std::string& path, const char* needle) {
    CAPTURE(needle);
    CHECK_THROWS_WITH_AS((void)make_shard_reader({path}), doctest::Contains(needle), std::invalid_argument);
    CHECK_THROWS_WITH_AS((void)make_shard_reader({path}), doctest::Contains(path.c_str()), std::invalid_argument);
  };
  expect(write("truncated.tar", std::vector<std::byte>(bytes.begin(), bytes.begin() + 700)), "truncated");
  expect(write("cut.tar", std::vector<std::byte>(bytes.begin(), bytes.begin() + 520)), "runs past the end");
  auto garbage = bytes;
  garbage[10] = std::byte{'#'};
  expect(write("checksum.tar", garbage), "bad header checksum");
  expect(write("text.tar", std::vector<std::byte>(600, std::byte{'x'})), "checksum");
  expect((d.path / "missing.tar").string(), "cannot be opened");
  // A sample without its label: drop the .cls member of the last sample (it is the last member).
  const auto members = index_tar(bytes, "g");
  REQUIRE(members.size() == 4);
  std::vector<std::byte> no_label(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(members[3].offset - 512));
  no_label.resize(no_label.size() + 1024);
  expect(write("nolabel.tar", no_label), "has no .cls label member");
  // A label that is not a number: overwrite the first .cls payload ("0") with a letter.
  auto bad_label = bytes;
  bad_label[members[1].offset] = std::byte{'x'};
  expect(write("badlabel.tar", bad_label), "has label 'x', not an integer");
  CHECK_THROWS_WITH_AS((void)make_shard_reader({}), doctest::Contains("no shard"), std::invalid_argument);
}
