// pinfeed pack and pinfeed index: tar shards (WebDataset layout) and their sidecar indexes.
#include <cstdio>
#include <stdexcept>

#include "commands.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/epoch_order.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pipeline_options.hpp"

namespace pinfeed::tool {
namespace {

struct pack_args {
  std::string source, out;
  double shard_mb = 256;
  bool shuffle = false;
  std::uint64_t seed = 0;
};

int cmd_pack(const pack_args& a) {
  auto listed = image_files_of(a.source);
  if (!listed) throw pinfeed::invalid_argument("pack: --source must be folder:PATH or list:FILE, got '" + a.source + "'");
  std::vector<loaders::image_file> files = std::move(*listed);
  if (a.shuffle) {
    // The same keyed permutation the loader shuffles with: a pure function of the seed.
    const epoch_order order(files.size(), a.seed, {true, 0, 1, false});
    std::vector<loaders::image_file> shuffled(files.size());
    for (std::uint64_t i = 0; i < files.size(); ++i) shuffled[i] = files[order.index_at(0, i)];
    files = std::move(shuffled);
  }
  if (!(a.shard_mb > 0)) throw pinfeed::invalid_argument("pack: --shard-mb must be positive");
  const auto shards = loaders::write_shards(files, a.out, static_cast<std::uint64_t>(a.shard_mb * 1048576.0));
  std::printf("packed %zu samples into %zu shard(s) with their sidecar indexes: %s ... %s\n", files.size(),
              shards.size(), shards.front().c_str(), shards.back().c_str());
  return 0;
}

/// Writes the sidecar index of existing tar shards (made by other tools), so that remote readers
/// need not fetch them whole to index them.
int cmd_index(const std::string& pattern) {
  const auto shards = loaders::expand_shard_pattern(pattern);
  for (const auto& s : shards) {
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".idx") == 0) continue;  // a glob's own sidecars
    loaders::write_shard_index(s);
    std::printf("%s\n", loaders::shard_index_path(s).c_str());
  }
  return 0;
}


}  // namespace

void add_pack(CLI::App& app, command_list& out) {
  static pack_args pa;  // CLI11 binds the options to them: they outlive the parse
  static std::string index_pattern;
  auto* pack = app.add_subcommand("pack", "write tar shards (WebDataset layout) from an image folder or file list");
  pack->add_option("--source", pa.source, "folder:PATH or list:FILE")->required();
  pack->add_option("--out", pa.out, "shard path prefix: PREFIX-000000.tar, ...")->required();
  pack->add_option("--shard-mb", pa.shard_mb, "target shard size in MiB");
  pack->add_flag("--shuffle", pa.shuffle, "write the samples in a shuffled order");
  pack->add_option("--seed", pa.seed, "seed of the shuffle");
  out.push_back({pack, [] { return cmd_pack(pa); }, {}});
  auto* index = app.add_subcommand("index", "write the sidecar index of existing tar shards (<shard>.idx), for remote reads");
  index->add_option("--shards", index_pattern, "local shards: glob or train-{000..127}.tar")->required();
  out.push_back({index, [] { return cmd_index(index_pattern); }, {}});
}

}  // namespace pinfeed::tool
