#pragma once
// The index cache (remote_options::index_cache_dir): the index built by scanning a shard that has
// no sidecar, kept in a file of its own under a directory across runs, with the shard's ETag, so
// that the next reader asks for the size and ETag (one HEAD request) instead of scanning it again.
//
// A file: "pinfeed-remote-index 1", the location as shown, the ETag, each on a line, then the
// sidecar index's text (detail::format_shard_index). Its name: kHashDigits hex digits of the
// location's hash_bytes() (query included: locations that differ only there are other objects),
// then ".idx"; a file being written has ".XXXXXX" after that (mkostemp), renamed into place.

#include <filesystem>
#include <optional>
#include <string>

namespace pinfeed::loaders::remote {

class index_cache {
 public:
  /// Creates `dir` if missing (throws std::invalid_argument naming it when that fails) and removes
  /// temporaries an earlier process left there (untouched for an hour).
  explicit index_cache(std::string dir);

  struct entry {
    std::string etag;   ///< the shard's ETag when it was indexed (never empty)
    std::string index;  ///< the sidecar index's text
  };
  /// The entry kept for `location` (shown as `shown`), or nullopt when there is none, or the file
  /// is not one of these or is for another location.
  [[nodiscard]] std::optional<entry> load(const std::string& location, const std::string& shown) const;
  /// Keeps an entry for `location`; nothing for an ETag that is empty or spans lines. A file that
  /// cannot be written (a full disk, say) costs the next run a scan, nothing else.
  void store(const std::string& location, const std::string& shown, const std::string& etag,
             const std::string& index) const;
  /// The file of `location`.
  [[nodiscard]] std::filesystem::path file(const std::string& location) const;

 private:
  void remove_stale_temps() const noexcept;
  std::string dir_;
};

}  // namespace pinfeed::loaders::remote
