// One call per common source (sources.hpp): the reader of the location, then the pipeline source.
#include "pinfeed/loaders/sources.hpp"

#include <utility>

#include "pinfeed/loaders/image_files.hpp"

namespace pinfeed::loaders {
namespace {

std::shared_ptr<pipeline_source> through(std::shared_ptr<image_reader> reader, pipeline transforms,
                                         const image_source_options& o) {
  return std::make_shared<pipeline_source>(std::move(reader), std::move(transforms), o.source);
}

}  // namespace

std::shared_ptr<pipeline_source> make_image_folder_source(const std::string& root, pipeline transforms,
                                                          const image_source_options& options) {
  return through(make_image_files_reader(list_image_folder(root).files, options.decode), std::move(transforms), options);
}
std::shared_ptr<pipeline_source> make_image_folder_source(const std::string& root, std::string_view transforms,
                                                          const image_source_options& options) {
  return make_image_folder_source(root, parse_pipeline(transforms), options);
}

std::shared_ptr<pipeline_source> make_file_list_source(const std::string& list_file, pipeline transforms,
                                                       const image_source_options& options) {
  return through(make_image_files_reader(read_file_list(list_file), options.decode), std::move(transforms), options);
}
std::shared_ptr<pipeline_source> make_file_list_source(const std::string& list_file, std::string_view transforms,
                                                       const image_source_options& options) {
  return make_file_list_source(list_file, parse_pipeline(transforms), options);
}

std::shared_ptr<pipeline_source> make_shard_source(const std::string& pattern, pipeline transforms,
                                                   const image_source_options& options) {
  std::shared_ptr<image_reader> reader =
      is_remote_location(pattern)
          ? make_remote_shard_reader(expand_remote_pattern(pattern, options.remote), options.shard, options.remote)
          : make_shard_reader(expand_shard_pattern(pattern), options.shard);
  return through(std::move(reader), std::move(transforms), options);
}
std::shared_ptr<pipeline_source> make_shard_source(const std::string& pattern, std::string_view transforms,
                                                   const image_source_options& options) {
  return make_shard_source(pattern, parse_pipeline(transforms), options);
}

}  // namespace pinfeed::loaders
