#pragma once
/// @file shards.hpp
/// Tar shards in the WebDataset layout: the members of one sample share a key (the path up to the
/// first dot of the file name), e.g. "000123.jpg" + "000123.cls". Shards are memory-mapped and
/// indexed once (headers only); POSIX ustar, GNU tar (long names, base-256 sizes) and pax path
/// records are understood. `pinfeed pack` writes them.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"

namespace pinfeed::loaders {

/// One regular-file member of a tar archive.
struct tar_member {
  std::string name;
  std::uint64_t offset = 0;  ///< of the data, from the start of the archive
  std::uint64_t size = 0;
};

/// Lists the regular files of a tar archive held in memory. Throws std::invalid_argument naming
/// `what` and the byte offset for a bad header checksum, a size that is not a number, or a member
/// running past the end.
[[nodiscard]] std::vector<tar_member> index_tar(std::span<const std::byte> archive, const std::string& what);

/// Expands "train-{000..127}.tar" (zero padding kept) and shell globs ("shards/*.tar"); the result
/// is sorted within each glob. Throws std::invalid_argument for a pattern that matches nothing or
/// a malformed brace range.
[[nodiscard]] std::vector<std::string> expand_shard_pattern(const std::string& pattern);

struct shard_options {
  decode_options decode{};
  /// Member extensions taken as the image: those an image folder lists (image_extensions()).
  std::string image_keys = "jpg;jpeg;png;ppm;bmp;pgm;tif;tiff;webp;jfif;jpe";
  std::string label_key = "cls";                                  ///< member holding the label as text
  /// 0: a shuffling loader shuffles every sample with every other (the exact global shuffle).
  /// W >= 1: it shuffles shard-aware (epoch_order_options::groups): the shards in a new order each
  /// epoch, the samples within windows of W shards. Remote readers then fetch whole shards into a
  /// bounded cache instead of reading samples one by one. Unset (the default): the reader's own
  /// default: local shards 0; remote shards whole, W = remote_options::cache_bytes / (3 x the
  /// largest shard), from 1 to 4 (see make_remote_shard_reader).
  std::optional<std::uint32_t> window_shards{};
};

/// Reads the samples of tar shards: fields image (varies) and "label" int64. Every shard is
/// mapped and indexed at construction; a sample without an image or a label member, or a label
/// that is not an integer, is an error there, naming the shard and the key.
[[nodiscard]] std::shared_ptr<image_reader> make_shard_reader(const std::vector<std::string>& shards,
                                                         shard_options options = {});

/// Where the sidecar index of a shard is kept: "<shard>.idx".
[[nodiscard]] std::string shard_index_path(const std::string& shard);

/// Writes the sidecar index of a tar shard (its samples' offsets, sizes and labels, and its size)
/// to shard_index_path(shard), so that remote readers need not fetch the whole shard to index it.
/// Throws std::invalid_argument for a shard that does not index (see make_shard_reader) and
/// std::runtime_error naming the path that cannot be written.
void write_shard_index(const std::string& shard, const shard_options& options = {});

/// Writes tar shards of at most `shard_bytes` each (at least one sample per shard) from image
/// files, as "<prefix>-000000.tar", ...; keys are the sample numbers, zero-padded. Returns the
/// shard paths. The files are copied as they are (no re-encoding). Throws std::runtime_error naming
/// the path that cannot be read or written.
[[nodiscard]] std::vector<std::string> write_shards(const std::vector<image_file>& files, const std::string& prefix,
                                                    std::uint64_t shard_bytes);

}  // namespace pinfeed::loaders
