#pragma once
// The samples of one WebDataset tar shard, shared by the local and the remote shard readers.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string_view>
#include <span>
#include <string>
#include <vector>

#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::detail {

/// Tar's unit: headers are one block, data is padded to whole blocks.
inline constexpr std::size_t kTarBlock = 512;

/// One sample of a shard: its image member and its label.
struct shard_sample {
  std::uint32_t shard = 0;
  std::string key;
  tar_member image;
  std::int64_t label = 0;
};

/// Walks a tar archive as its bytes arrive, in pieces of any size, never holding more than a
/// header and the data of the members asked for: the regular members' names, offsets and sizes
/// (as index_tar() finds them, which is this walk over an archive in memory), and the data of the
/// members `keep` accepts by name. Throws std::invalid_argument as index_tar() does, naming
/// `what` and the header's byte offset.
class tar_scanner {
 public:
  explicit tar_scanner(std::string what, std::function<bool(const std::string& name)> keep = {});
  /// The archive's size when known: a member running past it fails at its header.
  void limit(std::uint64_t bytes) noexcept { limit_ = bytes; }
  void feed(std::span<const std::byte> bytes);
  /// The archive is over: throws for a member or a header it cut short.
  void finish();
  [[nodiscard]] const std::vector<tar_member>& members() const noexcept { return members_; }
  /// The data of regular member i when `keep` asked for it (else empty).
  [[nodiscard]] std::span<const std::byte> data(std::size_t i) const { return data_.at(i); }
  [[nodiscard]] std::uint64_t bytes_fed() const noexcept { return at_; }

 private:
  static constexpr std::size_t kBlock = kTarBlock;
  void begin_member();
  void end_member();
  void end_member_skipping(std::uint64_t size);
  [[nodiscard]] pinfeed::invalid_argument fail(const std::string& why) const;

  std::string what_;
  std::function<bool(const std::string&)> keep_;
  std::uint64_t limit_ = ~std::uint64_t{0};
  std::uint64_t at_ = 0;         ///< bytes fed so far
  std::array<std::byte, kBlock> header_{};
  std::size_t header_fill_ = 0;  ///< bytes of the next header received
  std::uint64_t header_at_ = 0;  ///< where the member being read has its header
  std::uint64_t data_at_ = 0, size_ = 0;
  char type_ = 0;
  std::string name_, long_name_;
  std::uint64_t want_ = 0;  ///< data still to keep
  std::uint64_t skip_ = 0;  ///< bytes still to pass over (data not kept, padding)
  std::vector<std::byte> kept_;
  bool ended_ = false;
  std::vector<tar_member> members_;
  std::vector<std::vector<std::byte>> data_;
};

/// shard_samples() over a shard that arrives in pieces: feed() them in order, then samples().
class shard_scanner {
 public:
  shard_scanner(std::uint32_t shard, std::string what, const shard_options& options);
  void limit(std::uint64_t bytes) noexcept { scan_.limit(bytes); }
  void feed(std::span<const std::byte> bytes) { scan_.feed(bytes); }
  [[nodiscard]] std::uint64_t bytes_fed() const noexcept { return scan_.bytes_fed(); }
  /// Throws as shard_samples() does, and for an archive cut short.
  [[nodiscard]] std::vector<shard_sample> samples();

 private:
  std::uint32_t shard_;
  std::string what_;
  shard_options options_;
  tar_scanner scan_;
};

/// Groups the members of `archive` (shard number `shard`, named `what` in errors) into samples by
/// key, in the order of first appearance; labels are parsed from their members. Throws
/// std::invalid_argument naming the shard and the key for a sample without an image or a label
/// member, or a label that is not an integer.
[[nodiscard]] std::vector<shard_sample> shard_samples(std::span<const std::byte> archive, std::uint32_t shard,
                                                      const std::string& what, const shard_options& options);

/// Where a member name's sample key ends: at the first dot of its file name (npos: no dot).
[[nodiscard]] std::size_t key_end(const std::string& member_name);

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

/// A reader of the samples of tar shards, however their bytes are got (a local mapping, a remote
/// cache, a request per sample): the fields, the name, the identity and groups, and reading as
/// bytes_of() then decoding. Each sample's origin is "<shard name>:<image member>".
class tar_sample_reader : public image_reader {
 public:
  /// `kind`: "tar shard" or "remote tar shard", in the name; `shard_names`: each shard's path or
  /// location as shown; `window`: the groups' window (0: none, the exact global shuffle).
  tar_sample_reader(storage_kind kind, std::vector<std::string> shard_names, std::vector<shard_sample> entries,
                    decode_options decode, std::uint32_t window);

  [[nodiscard]] std::uint64_t size() const final { return entries_.size(); }
  [[nodiscard]] image_spec image_shape() const final { return {-1, -1, 3, dtype::u8}; }
  [[nodiscard]] std::vector<field_spec> extra_fields() const final { return {{"label", dtype::i64, {}}}; }
  [[nodiscard]] std::string name() const final;
  [[nodiscard]] std::string identity() const final { return shards_identity(names_, entries_); }
  [[nodiscard]] std::shared_ptr<const sample_groups> groups() const final {
    return shard_groups(entries_, names_.size(), window_);
  }
  [[nodiscard]] storage_kind storage() const final { return kind_; }
  [[nodiscard]] bool stores_encoded() const final { return true; }
  [[nodiscard]] decode_options decoding() const final { return decode_; }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) final;
  /// A view into the shard where it lives as long as the reader; else a copy in `storage`.
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) final;
  read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                            const decode_planner& plan) final;

 protected:
  /// Sample e's image bytes: a view into `storage`, into memory that `held` keeps, or (held left
  /// null) into memory that lives as long as the reader. Throws as read_stored() does.
  virtual std::span<const std::byte> bytes_of(sample& s, const shard_sample& e, std::vector<std::byte>& storage,
                                              std::shared_ptr<const void>& held) = 0;
  [[nodiscard]] const std::vector<shard_sample>& entries() const noexcept { return entries_; }
  [[nodiscard]] const std::vector<std::string>& shard_names() const noexcept { return names_; }
  [[nodiscard]] std::uint32_t window() const noexcept { return window_; }

 private:
  /// Sample s's entry, with its origin and label written into s.
  const shard_sample& entry(sample& s) const;

  storage_kind kind_;
  std::vector<std::string> names_;
  std::vector<shard_sample> entries_;
  decode_options decode_;
  std::uint32_t window_;
};

/// "train-{000..127}.tar" as its 128 names (zero padding of the lower bound kept; several ranges
/// multiply). Throws std::invalid_argument for a malformed or non-numeric range.
[[nodiscard]] std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace pinfeed::loaders::detail
