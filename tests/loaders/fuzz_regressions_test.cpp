// Replays the fuzz seed corpus and every input a fuzzer ever crashed on (fuzz/regressions/) through
// the same entry points the libFuzzer binaries use (scripts/fuzz.sh).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;

namespace {
std::size_t replay(const std::string& target, int (*entry)(const std::uint8_t*, std::size_t)) {
  std::size_t count = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(PINFEED_FUZZ_DIR) / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry_path : fs::directory_iterator(dir)) {
      if (!entry_path.is_regular_file() || entry_path.path().filename() == ".keep") continue;
      std::ifstream in(entry_path.path(), std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CAPTURE(entry_path.path().string());
      CHECK(entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()) == 0);
      ++count;
    }
  }
  return count;
}
}  // namespace

TEST_CASE("fuzz.replay_corpus_and_regressions") {
  CHECK(replay("tar_index", pinfeed::fuzz::tar_index) >= 2);
  CHECK(replay("file_list", pinfeed::fuzz::file_list) >= 1);
  CHECK(replay("decode", pinfeed::fuzz::decode) >= 4);
  // Degenerate inputs straight away.
  const std::uint8_t zero[1024] = {};
  CHECK(pinfeed::fuzz::tar_index(zero, sizeof zero) == 0);
  CHECK(pinfeed::fuzz::file_list(zero, 0) == 0);
  CHECK(pinfeed::fuzz::decode(zero, 0) == 0);
}
