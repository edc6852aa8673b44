#include "pinfeed/loaders/image_files.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <cctype>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace fs = std::filesystem;

namespace pinfeed::loaders {

const std::vector<std::string>& image_extensions() {
  static const std::vector<std::string> ext{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm",
                                            ".tif", ".tiff", ".webp", ".jfif", ".jpe"};
  return ext;
}

namespace {

/// A file name's extension, lower case, with the dot ("" for none).
std::string extension_of(const std::string& name) {
  std::string e = fs::path(name).extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}

bool is_image_extension(const std::string& e) {
  const auto& known = image_extensions();
  return std::find(known.begin(), known.end(), e) != known.end();
}

/// One entry of a folder: its name, and whether it is (or links to) a folder or a regular file,
/// or is a link that leads nowhere.
struct dir_entry {
  std::string name;
  bool folder = false, file = false, dangling = false;
};

/// The entries of `dir`, through opendir/readdir: std::filesystem's iterators of libstdc++ 12
/// allocate inside noexcept functions, so running out of memory there would end the process.
/// Throws std::invalid_argument naming `dir` when it cannot be read, std::bad_alloc for memory.
std::vector<dir_entry> read_folder(const std::string& dir) {
  const std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) {
    if (errno == ENOMEM) throw std::bad_alloc();
    throw pinfeed::invalid_argument("image folder '" + dir + "' cannot be read: " + std::strerror(errno));
  }
  std::vector<dir_entry> out;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d.get());
    if (e == nullptr) {
      if (errno != 0) throw pinfeed::invalid_argument("image folder '" + dir + "' cannot be read: " + std::strerror(errno));
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (e->d_type == DT_DIR || e->d_type == DT_REG) {  // the kind from the folder itself: no stat
      out.push_back({e->d_name, e->d_type == DT_DIR, e->d_type == DT_REG});
      continue;
    }
    struct stat st {};
    if (::fstatat(::dirfd(d.get()), e->d_name, &st, 0) != 0) {  // a link (followed), or a kind not told
      if (errno == ENOENT || errno == ELOOP) {                    // a dangling or looping link: neither
        out.push_back({e->d_name, false, false, true});
        continue;
      }
      if (errno == ENOMEM) throw std::bad_alloc();
      throw pinfeed::invalid_argument("image folder '" + dir + "': cannot tell what '" + e->d_name + "' is: " + std::strerror(errno));
    }
    out.push_back({e->d_name, S_ISDIR(st.st_mode), S_ISREG(st.st_mode)});
  }
  return out;
}

/// The image files under `dir` and its folders (links to folders followed, hidden ones skipped),
/// at most 64 levels down; other files counted by extension, dangling links listed.
void find_images(const std::string& dir, int depth, std::vector<std::string>& out, std::map<std::string, std::uint64_t>& others,
                 std::vector<std::string>& dangling) {
  if (depth > 64) throw pinfeed::invalid_argument("image folder '" + dir + "' is more than 64 levels deep (a link loop?)");
  for (const auto& e : read_folder(dir)) {
    if (e.name[0] == '.') continue;
    std::string path = dir + "/" + e.name;
    if (e.dangling) {
      dangling.push_back(std::move(path));
    } else if (e.folder) {
      find_images(path, depth + 1, out, others, dangling);
    } else if (e.file) {
      std::string ext = extension_of(e.name);
      if (is_image_extension(ext)) out.push_back(std::move(path));
      else ++others[std::move(ext)];
    }
  }
}

/// "a, b, c and 4 more" of the first few names.
std::string some_of(const std::vector<std::string>& names) {
  std::string out;
  constexpr std::size_t kShown = 5;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

class files_reader final : public image_reader {
 public:
  files_reader(std::vector<image_file> files, decode_options o) : files_(std::move(files)), options_(o) {
    if (files_.empty()) throw pinfeed::invalid_argument("image files: the dataset is empty");
  }
  std::uint64_t size() const override { return files_.size(); }
  image_spec image_shape() const override { return {-1, -1, 3, dtype::u8}; }
  std::vector<field_spec> extra_fields() const override { return {{"label", dtype::i64, {}}}; }
  /// The largest label + 1 (a folder's classes up to its last one with an image).
  std::int64_t classes() const override {
    std::int64_t top = -1;
    for (const auto& f : files_) top = std::max(top, f.label);
    return top + 1;
  }
  std::string name() const override { return std::to_string(files_.size()) + " image files"; }
  storage_kind storage() const override { return storage_kind::image_files; }
  std::string identity() const override {
    std::string id = "image files";
    for (const auto& f : files_) id += "\n" + f.path + "\t" + std::to_string(f.label);
    return id;
  }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    auto& bytes = pinfeed::detail::thread_scratch<std::vector<std::byte>, struct image_file_bytes>();
    return decode_stored(s, read_stored(s, bytes), image, plan);
  }
  bool stores_encoded() const override { return true; }
  decode_options decoding() const override { return options_; }
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) override {
    const image_file& f = files_.at(s.index());
    s.set_origin(f.path);
    try {
      read_file(f.path, storage);
    } catch (...) {
      rethrow_as_sample_error(s.index(), "read", f.path);
    }
    s.as<std::int64_t>(1)[0] = f.label;
    return storage;
  }
  read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                            const decode_planner& plan) override {
    return decode_sample(s, bytes, image, options_, plan, files_.at(s.index()).path);
  }

 private:
  std::vector<image_file> files_;
  decode_options options_;
};

}  // namespace

std::uint64_t listing_left_out::files() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [ext, count] : by_extension) n += count;
  return n;
}

std::string listing_left_out::summary() const {
  if (empty()) return "left out: nothing";
  std::vector<std::string> parts;
  if (files() > 0) {
    std::string counts;
    for (const auto& [ext, count] : by_extension)
      counts += (counts.empty() ? "" : ", ") + (ext.empty() ? std::string("no extension") : ext) + " " + std::to_string(count);
    parts.push_back(std::to_string(files()) + (files() == 1 ? " file" : " files") + " by extension (" + counts + ")");
  }
  if (!dangling_links.empty())
    parts.push_back(std::to_string(dangling_links.size()) + (dangling_links.size() == 1 ? " dangling link (" : " dangling links (") +
                    some_of(dangling_links) + ")");
  if (!empty_classes.empty())
    parts.push_back(std::to_string(empty_classes.size()) +
                    (empty_classes.size() == 1 ? " empty class folder (" : " empty class folders (") + some_of(empty_classes) + ")");
  std::string out = "left out: ";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

image_folder_listing list_image_folder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw pinfeed::invalid_argument("image folder '" + root + "' does not exist or is not a directory");
  image_folder_listing out;
  for (const auto& e : read_folder(root))
    if (e.folder && e.name[0] != '.') out.classes.push_back(e.name);
  std::sort(out.classes.begin(), out.classes.end());
  if (out.classes.empty()) throw pinfeed::invalid_argument("image folder '" + root + "' has no class sub-folders");
  std::map<std::string, std::uint64_t> others;
  for (std::size_t label = 0; label < out.classes.size(); ++label) {
    std::vector<std::string> paths;
    find_images((fs::path(root) / out.classes[label]).string(), 0, paths, others, out.left_out.dangling_links);
    if (paths.empty()) out.left_out.empty_classes.push_back(out.classes[label]);
    std::sort(paths.begin(), paths.end());
    for (auto& p : paths) out.files.push_back({std::move(p), static_cast<std::int64_t>(label)});
  }
  out.left_out.by_extension.assign(others.begin(), others.end());
  std::sort(out.left_out.dangling_links.begin(), out.left_out.dangling_links.end());
  if (out.files.empty())
    throw pinfeed::invalid_argument("image folder '" + root + "' has " + std::to_string(out.classes.size()) +
                                " class folders but no image files (" + out.left_out.summary() + ")");
  // One line for all of it: a warning where a label has no sample or a link leads nowhere.
  if (!out.left_out.empty())
    log(out.left_out.empty_classes.empty() && out.left_out.dangling_links.empty() ? log_level::info : log_level::warn,
        "image folder '" + root + "': " + std::to_string(out.files.size()) + " images in " +
            std::to_string(out.classes.size()) + " classes, " + out.left_out.summary());
  return out;
}

std::vector<image_file> read_file_list(const std::string& list_path) {
  const auto text = pinfeed::detail::read_whole_file(list_path);
  if (!text) throw pinfeed::invalid_argument("file list '" + list_path + "' cannot be opened");
  return parse_file_list(*text, list_path, fs::path(list_path).parent_path().string());
}

std::vector<image_file> parse_file_list(std::string_view text_all, const std::string& name, const std::string& base_dir) {
  const fs::path base = base_dir;
  std::vector<image_file> files;
  std::size_t number = 0, at = 0;
  while (at < text_all.size()) {
    ++number;
    std::size_t end = text_all.find('\n', at);
    if (end == std::string_view::npos) end = text_all.size();
    const std::string line(text_all.substr(at, end - at));
    at = end + 1;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    const std::string text = line.substr(first, last - first + 1);
    const auto split = text.find_last_of(" \t");
    auto fail = [&](const std::string& what) -> pinfeed::invalid_argument {
      return pinfeed::invalid_argument("file list '" + name + "', line " + std::to_string(number) + ": " + what + " (\"" +
                                   text.substr(0, 200) + "\")");
    };
    if (split == std::string::npos) throw fail("expected \"path label\"");
    const std::string label_text = text.substr(split + 1);
    std::size_t used = 0;
    long long label = 0;
    try {
      label = std::stoll(label_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != label_text.size() || label < 0)
      throw fail("label '" + label_text.substr(0, 40) + "' is not a non-negative integer");
    std::string path = text.substr(0, text.find_last_not_of(" \t", split) + 1);
    if (path.find('\0') != std::string::npos) throw fail("path contains a NUL byte");
    if (fs::path(path).is_relative()) path = (base / path).string();
    files.push_back({path, label});
  }
  if (files.empty()) throw pinfeed::invalid_argument("file list '" + name + "' lists no files");
  return files;
}

std::shared_ptr<image_reader> make_image_files_reader(std::vector<image_file> files, decode_options options) {
  return std::make_shared<files_reader>(std::move(files), options);
}

}  // namespace pinfeed::loaders
