#pragma once
/// @file image_files.hpp
/// Image datasets on disk: an ImageFolder tree (one sub-folder per class, classes sorted, label =
/// class index) or a file list ("path label" per line), read and decoded per sample.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"

namespace pinfeed::loaders {

struct image_file {
  std::string path;
  std::int64_t label = 0;
};

/// What listing an image folder left out, so that a dataset's size surprises no one.
struct listing_left_out {
  /// Files without an image extension, counted by lower-case extension ("" for none), sorted.
  std::vector<std::pair<std::string, std::uint64_t>> by_extension;
  std::vector<std::string> dangling_links;  ///< links (and link loops) that lead to nothing
  std::vector<std::string> empty_classes;   ///< class folders without an image: labels with no sample
  [[nodiscard]] std::uint64_t files() const noexcept;  ///< the files of by_extension, all together
  [[nodiscard]] bool empty() const noexcept { return files() == 0 && dangling_links.empty() && empty_classes.empty(); }
  /// One line, e.g. "left out: 395 files by extension (.gif 200, .mpo 12, no extension 183), 1
  /// dangling link, 2 empty class folders (cat, dog)"; "left out: nothing".
  [[nodiscard]] std::string summary() const;
};

struct image_folder_listing {
  std::vector<image_file> files;    ///< sorted by class, then by path
  std::vector<std::string> classes;  ///< sorted folder names; label i is classes[i]
  listing_left_out left_out;
};

/// File name extensions counted as images (lower case, with the dot; matched case-insensitively):
/// torchvision's IMG_EXTENSIONS (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp) and .jfif, .jpe.
[[nodiscard]] const std::vector<std::string>& image_extensions();

/// Lists `root` in the torchvision ImageFolder layout (files found recursively under each class
/// folder, links followed; hidden files skipped). Throws std::invalid_argument naming the path for
/// a missing or unreadable root, a root without class folders, or a dataset without images. What
/// it leaves out is in `left_out`, and logged in one line: a warning naming them where there are
/// empty class folders or dangling links (torchvision's ImageFolder refuses a class without
/// images; here its label stays, with no sample), else at info level.
[[nodiscard]] image_folder_listing list_image_folder(const std::string& root);

/// Reads a file list: one "path label" per line (the label is the last whitespace-separated
/// token, so paths may contain spaces), '#' comments and blank lines skipped, relative paths taken
/// from the list's folder. Throws std::invalid_argument naming list:line for a malformed line, and
/// for an empty list.
[[nodiscard]] std::vector<image_file> read_file_list(const std::string& list_path);

/// Parses file-list text (as read_file_list does); `name` appears in errors, relative paths are
/// taken from `base_dir`.
[[nodiscard]] std::vector<image_file> parse_file_list(std::string_view text, const std::string& name,
                                                      const std::string& base_dir);

/// Reads and decodes the files; fields: image (varies) and "label" int64.
[[nodiscard]] std::shared_ptr<image_reader> make_image_files_reader(std::vector<image_file> files, decode_options options = {});

}  // namespace pinfeed::loaders
