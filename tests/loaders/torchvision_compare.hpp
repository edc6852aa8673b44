#pragma once
// One comparison against torchvision v2 for a family of steps (colour, blur, geometry): a script
// (tests/loaders/<family>/torchvision_<family>.py) writes inputs, torchvision's outputs and each
// case's pinfeed spelling; every case then runs through pinfeed's one-step pipeline and is held to
// the rule: at most 1 of 255 apart on every sample and, per op, identical on at least 99% of them.
// In CI both torchvision and the real photos must be there; elsewhere a Python without torchvision
// skips the case and says so (PINFEED_TORCH_PYTHON names another).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/npy.hpp"
#include "test_util.hpp"

namespace pinfeed::test {

/// Runs the one-step pipeline `spelling` over an HWC uint8 image (stream 0 of seed 0): the output's
/// samples, and its channel count in *out_channels.
inline std::vector<std::uint8_t> run_step(const std::string& spelling, std::vector<std::uint8_t> img, std::int64_t h,
                                          std::int64_t w, int c, int* out_channels = nullptr) {
  using namespace pinfeed::loaders;
  const pipeline p = parse_pipeline(spelling);
  REQUIRE(p.steps().size() == 1);
  const image_spec in{h, w, c, dtype::u8};
  const image_spec out_spec = p.steps()[0]->output_spec(in);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(out_spec.height * out_spec.width * out_spec.channels));
  p.steps()[0]->apply({reinterpret_cast<std::byte*>(img.data()), in}, {reinterpret_cast<std::byte*>(out.data()), out_spec},
                      philox_stream(0, 0, 0));
  if (out_channels != nullptr) *out_channels = out_spec.channels;
  return out;
}

/// Runs `script` into `dir` and reads its manifest; nullopt where torchvision is not importable
/// (outside CI: the case is skipped, saying so).
inline std::optional<nlohmann::json> torchvision_manifest(const std::string& script, const std::filesystem::path& dir) {
  const char* env = std::getenv("PINFEED_TORCH_PYTHON");
  const std::string python = env != nullptr && *env != '\0' ? env : std::string(PINFEED_TEST_VENV) + "/bin/python";
  const char* ci_env = std::getenv("CI");
  const bool ci = ci_env != nullptr && std::string(ci_env) == "true";
  const std::string cmd = python + " " + PINFEED_TEST_DIR + "/" + script + " " + dir.string() + " >" +
                          (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log_file(dir / "log.txt");
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  if (rc != 0) {
    REQUIRE_MESSAGE(log.find("torchvision is not importable") != std::string::npos, script << " failed: " << log);
    REQUIRE_MESSAGE(!ci, "in CI (scripts/install-test-env.sh installs torchvision): " << log);
    skip_case("torchvision is not importable by " + python + " (set PINFEED_TORCH_PYTHON)");
    return std::nullopt;
  }
  MESSAGE(log);
  auto manifest = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  CHECK_MESSAGE(!(ci && !manifest.value("photos", false)),
                "in CI the comparison cuts real photos (scripts/install-test-env.sh fetches them into .venv-test/photos)");
  return manifest;
}

/// Runs `script` and holds pinfeed to its cases. Per op: (samples, identical) into *per_op_out.
/// `exact`: the family states torchvision's arithmetic as PyTorch's AVX2 and AVX512 kernels compute
/// it, so with those kernels every sample must be identical (the 1-apart rule is for the others).
/// Returns false where the case was skipped.
inline bool compare_with_torchvision(const std::string& script, bool exact,
                                     std::map<std::string, std::pair<std::int64_t, std::int64_t>>* per_op_out = nullptr) {
  temp_dir d;
  const auto found = torchvision_manifest(script, d.path);
  if (!found) return false;
  const nlohmann::json& manifest = *found;
  const std::string capability = manifest["cpu_capability"].get<std::string>();
  const bool vectorised = capability == "AVX2" || capability == "AVX512";
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> per_op;  // op -> (samples, identical)
  for (const auto& e : manifest["entries"]) {
    const std::string steps = e["steps"];
    CAPTURE(steps);
    CAPTURE(e["image"].get<std::string>());
    const npy_array in = read_npy((d.path / e["image"].get<std::string>()).string());
    const npy_array want = read_npy((d.path / e["expected"].get<std::string>()).string());
    REQUIRE(in.shape.size() == 3);
    std::vector<std::uint8_t> img(in.as<std::uint8_t>(), in.as<std::uint8_t>() + in.elements());
    const auto got = run_step(steps, img, in.shape[0], in.shape[1], static_cast<int>(in.shape[2]));
    REQUIRE(got.size() == want.elements());
    std::int64_t same = 0;
    int worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const int diff = std::abs(static_cast<int>(got[i]) - static_cast<int>(want.as<std::uint8_t>()[i]));
      same += diff == 0;
      worst = std::max(worst, diff);
    }
    CHECK(worst <= 1);
    if (exact && vectorised) CHECK_MESSAGE(worst == 0, "with PyTorch's " << capability << " kernels every sample is identical");
    const std::string op = e.value("op", steps.substr(0, steps.find('(')));
    per_op[op].first += static_cast<std::int64_t>(got.size());
    per_op[op].second += same;
  }
  std::string table = "torchvision " + manifest["torchvision"].get<std::string>() + ", torch " +
                      manifest["torch"].get<std::string>() + " (" + manifest["cpu_capability"].get<std::string>() + "):\n";
  for (const auto& [op, counts] : per_op) {
    table += "  " + op + ": " + std::to_string(counts.second) + " of " + std::to_string(counts.first) + " samples identical\n";
    CHECK_MESSAGE(counts.second * 100 >= counts.first * 99, op << ": fewer than 99% of the samples identical");
  }
  MESSAGE(table);
  if (per_op_out != nullptr) *per_op_out = per_op;
  return true;
}

}  // namespace pinfeed::test
