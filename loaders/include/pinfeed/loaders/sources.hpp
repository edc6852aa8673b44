#pragma once
/// @file sources.hpp
/// One call per common source: an image folder, a file list, tar shards (local or remote), each
/// read, decoded and transformed into the loader's slots. What they return is what a loader
/// (`pinfeed::loader(src, options)`) and the doctor (`pinfeed::doctor(src, options)`) both take.

#include <memory>
#include <string>
#include <string_view>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/transforms.hpp"

namespace pinfeed::loaders {

/// What every built-in image source takes besides its location and transforms.
struct image_source_options {
  /// Decoding (the most pixels an image may have, ...). For shards: shard.decode is used instead.
  decode_options decode = {};
  /// The pipeline source: fail or skip bad samples, leave the pointwise tail to the GPU, ...
  pipeline_source_options source = {};
  /// Tar shards: member keys, the shard window of a shuffle (see shard_options).
  shard_options shard = {};
  /// Remote shards (http://, https://, s3://): cache, requests in flight, retries, credentials.
  remote_options remote = {};
};

/// An ImageFolder dataset (torchvision layout: root/<class>/<image>; label = the class's index in
/// sorted order, list_image_folder) through `transforms`, e.g. "rrc(224),hflip" (parse_pipeline's
/// syntax). Throws std::invalid_argument naming the root for a missing, unreadable or empty
/// folder, and naming the step for a pipeline that cannot take the images.
[[nodiscard]] std::shared_ptr<pipeline_source> make_image_folder_source(const std::string& root,
                                                                        std::string_view transforms,
                                                                        const image_source_options& options = {});
[[nodiscard]] std::shared_ptr<pipeline_source> make_image_folder_source(const std::string& root, pipeline transforms,
                                                                        const image_source_options& options = {});

/// A file list ("path label" lines, read_file_list) through `transforms`. Throws
/// std::invalid_argument naming list:line for a malformed line.
[[nodiscard]] std::shared_ptr<pipeline_source> make_file_list_source(const std::string& list_file,
                                                                     std::string_view transforms,
                                                                     const image_source_options& options = {});
[[nodiscard]] std::shared_ptr<pipeline_source> make_file_list_source(const std::string& list_file, pipeline transforms,
                                                                     const image_source_options& options = {});

/// WebDataset tar shards through `transforms`: a local glob or brace pattern
/// ("/data/train-{000..127}.tar", expand_shard_pattern), or an http://, https:// or s3:// one
/// (expand_remote_pattern; read by make_remote_shard_reader with options.remote). Throws
/// std::invalid_argument for a pattern that matches nothing, naming it.
[[nodiscard]] std::shared_ptr<pipeline_source> make_shard_source(const std::string& pattern, std::string_view transforms,
                                                                 const image_source_options& options = {});
[[nodiscard]] std::shared_ptr<pipeline_source> make_shard_source(const std::string& pattern, pipeline transforms,
                                                                 const image_source_options& options = {});

}  // namespace pinfeed::loaders
