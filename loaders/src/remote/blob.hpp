#pragma once
// A shard's bytes held whole: in memory, or in a file of a cache directory that is unlinked as soon
// as it is made (its descriptor and then its mapping keep the blocks until the blob goes, and a
// process that is killed leaves nothing behind in the directory).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pinfeed::loaders::remote {

/// Writes all `n` bytes at `p` to `fd`; false (errno set) when that fails.
[[nodiscard]] bool write_all(int fd, const void* p, std::size_t n);

class blob {
 public:
  /// `dir` empty: `bytes` kept in memory. Else written to a new file of `dir` (named after
  /// `shard`) and mapped; throws std::runtime_error naming the file when that fails.
  blob(std::vector<std::byte> bytes, const std::string& dir, std::uint32_t shard);
  ~blob();
  blob(const blob&) = delete;
  blob& operator=(const blob&) = delete;
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return view_; }
  [[nodiscard]] bool mapped() const noexcept { return mapped_; }

 private:
  std::vector<std::byte> memory_;
  std::span<const std::byte> view_;
  bool mapped_ = false;
};

}  // namespace pinfeed::loaders::remote
