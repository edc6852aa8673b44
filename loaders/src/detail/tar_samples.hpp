#pragma once
// The samples of one WebDataset tar shard, shared by the local and the remote shard readers.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/shards.hpp"

namespace pinfeed::loaders::detail {

/// One sample of a shard: its image member and its label.
struct shard_sample {
  std::uint32_t shard = 0;
  std::string key;
  tar_member image;
  std::int64_t label = 0;
};

/// Groups the members of `archive` (shard number `shard`, named `what` in errors) into samples by
/// key, in the order of first appearance; labels are parsed from their members. Throws
/// std::invalid_argument naming the shard and the key for a sample without an image or a label
/// member, or a label that is not an integer.
[[nodiscard]] std::vector<shard_sample> shard_samples(std::span<const std::byte> archive, std::uint32_t shard,
                                                      const std::string& what, const shard_options& options);

/// "train-{000..127}.tar" as its 128 names (zero padding of the lower bound kept; several ranges
/// multiply). Throws std::invalid_argument for a malformed or non-numeric range.
[[nodiscard]] std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace pinfeed::loaders::detail
