// The index cache's files (loaders/src/remote/index_cache.hpp): no network.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/checksum.hpp"
#include "remote/blob.hpp"
#include "remote/index_cache.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pinfeed::loaders;

TEST_CASE("remote.index_cache.entries_are_kept_per_location") {
  pinfeed::test::temp_dir dir;
  const remote::index_cache cache((dir.path / "idx").string());
  const std::string a = "https://u:pw@h/a.tar?sig=1", b = "https://u:pw@h/a.tar?sig=2";
  CHECK_FALSE(cache.load(a, "https://h/a.tar"));
  cache.store(a, "https://h/a.tar", "\"e1\"", "pinfeed-tar-index 1 ...\nline\n");
  const auto e = cache.load(a, "https://h/a.tar");
  REQUIRE(e);
  CHECK(e->etag == "\"e1\"");
  CHECK(e->index == "pinfeed-tar-index 1 ...\nline\n");
  // Another query is another object; the same file for another shown name is not used.
  CHECK_FALSE(cache.load(b, "https://h/a.tar"));
  CHECK_FALSE(cache.load(a, "https://h/b.tar"));
  // Named by the project's hash of the whole location, credentials never in a name.
  const std::string name = cache.file(a).filename().string();
  CHECK(name.size() == 16 + 4);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(pinfeed::hash_bytes(a.data(), a.size())));
  CHECK(name == std::string(hex) + ".idx");
  // Without an ETag (or with one over lines) nothing could check the entry later: none is kept.
  cache.store(b, "https://h/a.tar", "", "x");
  cache.store(b, "https://h/a.tar", "a\nb", "x");
  CHECK_FALSE(fs::exists(cache.file(b)));
  // A damaged file is no entry.
  std::ofstream(cache.file(b)) << "not an index cache file\n";
  CHECK_FALSE(cache.load(b, "https://h/a.tar"));
}

TEST_CASE("remote.index_cache.stale_temporaries_go_and_bad_directories_are_named") {
  pinfeed::test::temp_dir dir;
  const fs::path idx = dir.path / "idx";
  fs::create_directories(idx);
  const fs::path stale = idx / "0123456789abcdef.idx.Ab3dE9", fresh = idx / "0123456789abcdef.idx.Zz9zZ9",
                 other = idx / "notes.txt.Ab3dE9";
  for (const auto& p : {stale, fresh, other}) std::ofstream(p) << "x";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(other, fs::file_time_type::clock::now() - std::chrono::hours(2));
  const remote::index_cache cache(idx.string());
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh));  // a writer in another process may be at it
  CHECK(fs::exists(other));  // not one of the cache's
  std::ofstream(dir.path / "file") << "x";
  const std::string bad = (dir.path / "file" / "idx").string();
  const std::string expected = "index cache directory '" + bad + "' cannot be made";
  CHECK_THROWS_WITH_AS(remote::index_cache{bad}, doctest::Contains(expected.c_str()), std::invalid_argument);
}

TEST_CASE("remote.blob.in_memory_or_in_an_unlinked_mapped_file") {
  std::vector<std::byte> bytes(10000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7);
  const remote::blob memory(bytes, "", 3);
  CHECK_FALSE(memory.mapped());
  CHECK(std::equal(memory.bytes().begin(), memory.bytes().end(), bytes.begin(), bytes.end()));
  pinfeed::test::temp_dir dir;
  {
    const remote::blob file(bytes, dir.path.string(), 3);
    CHECK(file.mapped());
    CHECK(std::equal(file.bytes().begin(), file.bytes().end(), bytes.begin(), bytes.end()));
    CHECK(fs::is_empty(dir.path));  // unlinked as soon as made: nothing to clean up, ever
  }
  const remote::blob empty(std::vector<std::byte>{}, dir.path.string(), 4);
  CHECK(empty.bytes().empty());
  CHECK_THROWS_WITH_AS(remote::blob(bytes, (dir.path / "missing" / "dir").string(), 5),
                       doctest::Contains("cannot make a cache file in"), std::runtime_error);
}
