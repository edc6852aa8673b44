// Replays the fuzz seed corpus and every input a fuzzer ever failed on (fuzz/regressions/) through
// the same entry points the libFuzzer binaries use (fuzz/targets.hpp, scripts/fuzz.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;
using pinfeed::fuzz::outcome;
using namespace std::literals;

namespace {
std::vector<std::uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::vector<fs::path> inputs(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != ".keep") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
bool remote_only(const std::string& name) {
  return std::find(std::begin(pinfeed::fuzz::remote_targets), std::end(pinfeed::fuzz::remote_targets), name) !=
         std::end(pinfeed::fuzz::remote_targets);
}
}  // namespace

TEST_CASE("fuzz.every_corpus_folder_is_a_target_and_every_target_has_seeds") {
  const fs::path corpus = fs::path(PINFEED_FUZZ_DIR) / "corpus";
  std::set<std::string> folders;
  for (const auto& e : fs::directory_iterator(corpus))
    if (e.is_directory()) folders.insert(e.path().filename().string());
  for (const auto& f : folders) {
    CAPTURE(f);
    CHECK((pinfeed::fuzz::find_target(f) != nullptr || (!PINFEED_FUZZ_REMOTE && remote_only(f))));
  }
  for (const auto& t : pinfeed::fuzz::targets()) {
    CAPTURE(t.name);
    CHECK(folders.count(std::string(t.name)) == 1);
  }
  CHECK(pinfeed::fuzz::targets().size() == (PINFEED_FUZZ_REMOTE ? 14u : 11u));
  for (const auto& f : fs::directory_iterator(fs::path(PINFEED_FUZZ_DIR) / "regressions")) {
    CAPTURE(f.path().string());
    CHECK(folders.count(f.path().filename().string()) == 1);
  }
}

TEST_CASE("fuzz.seeds_are_accepted_and_regressions_replay") {
  for (const auto& t : pinfeed::fuzz::targets()) {
    CAPTURE(t.name);
    // Seeds are valid inputs: each reaches the parser and passes its checks. A seed refused means
    // the target no longer reaches what it fuzzes.
    const auto seeds = inputs(fs::path(PINFEED_FUZZ_DIR) / "corpus" / std::string(t.name));
    CHECK(!seeds.empty());
    for (const auto& p : seeds) {
      CAPTURE(p.string());
      const auto bytes = read_all(p);
      CHECK(t.run(bytes) == outcome::accepted);
    }
    // Inputs a fuzzer once failed on: accepted or refused, every check holding (a broken one aborts).
    for (const auto& p : inputs(fs::path(PINFEED_FUZZ_DIR) / "regressions" / std::string(t.name))) {
      CAPTURE(p.string());
      const auto bytes = read_all(p);
      const auto o = t.run(bytes);
      CHECK((o == outcome::accepted || o == outcome::rejected));
    }
    // The empty input is refused by every parser but three: a tar archive of no members, a
    // pattern naming one (empty) name, a pipeline of no steps.
    const std::vector<std::uint8_t> none;
    const bool empty_ok = t.name == "tar_index" || t.name == "shard_pattern" || t.name == "pipeline";
    CHECK(t.run(none) == (empty_ok ? outcome::accepted : outcome::rejected));
  }
}

TEST_CASE("fuzz.targets_refuse_what_they_should") {
  auto run = [](std::string_view target, std::string_view text) {
    const auto* t = pinfeed::fuzz::find_target(target);
    REQUIRE(t != nullptr);
    return t->run({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  };
  CHECK(run("shard_pattern", "a-{0..1000000}-{0..9}.tar") == outcome::rejected);  // 10^7 names
  CHECK(run("shard_pattern", "{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}") == outcome::rejected);  // 9 ranges
  CHECK(run("shard_pattern", "{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}{0..1}") == outcome::accepted);
  CHECK(run("pipeline", "crop(") == outcome::rejected);
  CHECK(run("pipeline", "crop(5E59)") == outcome::rejected);  // once cast to an integer before its range was checked
  CHECK(run("config", R"({"schema": "pinfeed.config/1", "wokers": 2})") == outcome::rejected);
  CHECK(run("loader_state", R"({"version": 1})") == outcome::rejected);
  CHECK(run("npy", "\x93NUMPY\x01\x00") == outcome::rejected);
  CHECK(run("file_list", "a.jpg -1\n") == outcome::rejected);
  CHECK(run("shard_index", "pinfeed-tar-index 1 10 1 jpg cls\n") == outcome::rejected);
  const std::uint8_t zero[1024] = {};
  CHECK(pinfeed::fuzz::find_target("tar_index")->run(pinfeed::fuzz::bytes(zero, sizeof zero)) == outcome::accepted);  // two zero blocks: an empty archive
  CHECK(pinfeed::fuzz::find_target("jpeg")->run(pinfeed::fuzz::bytes(zero, sizeof zero)) == outcome::rejected);
#if PINFEED_FUZZ_REMOTE
  CHECK(run("s3_list", "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>") == outcome::rejected);
  // A server's Content-Length reserves a bounded buffer, however large the number.
  CHECK(run("http_headers", "\x00HTTP/1.1 200 OK\r\nContent-Length: 17179869184\r\n"sv) == outcome::accepted);
  CHECK(run("location", "ftp://x/y") == outcome::rejected);
#endif
}
