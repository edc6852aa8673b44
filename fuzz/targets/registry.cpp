#include <cstdio>
#include <cstdlib>

#include "targets.hpp"

namespace pinfeed::fuzz {

namespace {
constexpr target kTargets[] = {
    {"jpeg", jpeg},
    {"image", image},
    {"jpeg_planes", jpeg_planes},
    {"tar_index", tar_index},
    {"shard_index", shard_index},
    {"file_list", file_list},
    {"shard_pattern", shard_pattern},
    {"pipeline", pipeline},
    {"config", config},
    {"loader_state", loader_state},
    {"npy", npy},
#if PINFEED_FUZZ_REMOTE
    {"s3_list", s3_list},
    {"http_headers", http_headers},
    {"location", location},
#endif
};
}  // namespace

std::span<const target> targets() { return kTargets; }

const target* find_target(std::string_view name) {
  for (const auto& t : kTargets)
    if (t.name == name) return &t;
  return nullptr;
}

void broken(std::string_view target, const std::string& why) {
  std::fprintf(stderr, "fuzz target %.*s: %s\n", static_cast<int>(target.size()), target.data(), why.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace pinfeed::fuzz
