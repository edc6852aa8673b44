#pragma once
// The samples of one WebDataset tar shard, shared by the local and the remote shard readers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
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

/// The samples of each shard (entries are in shard order) as the groups of a shard-aware shuffle
/// over windows of `window` shards; null for window 0 (the exact global shuffle).
[[nodiscard]] std::shared_ptr<const sample_groups> shard_groups(const std::vector<shard_sample>& entries,
                                                                std::size_t shards, std::uint32_t window);

/// The sidecar index of a shard (what shard_samples() finds, with the shard's size): a header
/// line "pinfeed-tar-index 1 <tar bytes> <samples> <image keys> <label key>", then one line per
/// sample, "<offset> <size> <label> <image member name>".
[[nodiscard]] std::string format_shard_index(const std::vector<shard_sample>& samples, std::uint64_t tar_bytes,
                                             const shard_options& options);
/// Reads an index written by format_shard_index() into the samples of shard number `shard`, and
/// the shard's size into `tar_bytes`. nullopt when it was made with other image or label keys than
/// `options` (the shard must then be indexed anew). Throws std::invalid_argument naming `what` and
/// the line for a malformed or truncated index.
[[nodiscard]] std::optional<std::vector<shard_sample>> parse_shard_index(std::string_view text, std::uint32_t shard,
                                                                         const std::string& what,
                                                                         const shard_options& options,
                                                                         std::uint64_t& tar_bytes);

/// What identifies a set of shards: their file names (the last path component of each location)
/// and sample counts, in order.
[[nodiscard]] std::string shards_identity(const std::vector<std::string>& locations,
                                          const std::vector<shard_sample>& entries);

/// "train-{000..127}.tar" as its 128 names (zero padding of the lower bound kept; several ranges
/// multiply). Throws std::invalid_argument for a malformed or non-numeric range.
[[nodiscard]] std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace pinfeed::loaders::detail
