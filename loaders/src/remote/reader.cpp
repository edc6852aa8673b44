// The remote tar shard reader (make_remote_shard_reader): its shards indexed once (indexer), then
// each sample's bytes got by one of two strategies, whole shards into a cache (whole_shards) or a
// range request per sample (range_reads), over one transfer loop.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "remote/indexer.hpp"
#include "remote/range_reads.hpp"
#include "remote/retry.hpp"
#include "remote/s3.hpp"
#include "remote/whole_shards.hpp"

namespace pinfeed::loaders {
namespace remote {
namespace {

std::vector<std::string> shown_names(const indexed_shards& ix) {
  std::vector<std::string> out;
  for (const auto& sh : ix.shards) out.push_back(sh.where.shown);
  return out;
}

/// Whole shards with no window given: as many shards as a third of the cache holds (the window
/// read, and the look-ahead's one to two more), from 1 to kMaxDefaultWindow.
std::uint32_t default_window(const indexed_shards& ix, std::uint64_t cache_bytes) {
  std::uint64_t largest = 1;
  for (const auto& sh : ix.shards) largest = std::max(largest, sh.size);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(cache_bytes / (3 * largest), 1, kMaxDefaultWindow));
}

void make_cache_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw pinfeed::invalid_argument("remote shards: cache directory '" + dir + "' cannot be made: " + ec.message());
}

class remote_tar_reader final : public detail::tar_sample_reader {
 public:
  remote_tar_reader(std::vector<std::string> locations, std::unique_ptr<request_counters> counters,
                    std::unique_ptr<transfer_loop> loop, indexed_shards ix, const shard_options& so, const remote_options& ro,
                    std::uint32_t window)
      : tar_sample_reader(storage_kind::remote_tar_shards, shown_names(ix), std::move(ix.entries), so.decode, window),
        locations_(std::move(locations)),
        shard_options_(so),
        remote_options_(ro),
        shard_bytes_(ix.shard_bytes),
        counters_(std::move(counters)),
        loop_(std::move(loop)),
        set_(std::make_unique<shard_set>(std::move(ix.shards), entries(), *loop_, *counters_)) {
    if (window == 0) {
      strategy_ = std::make_unique<range_reads>(*set_, ro);
      return;
    }
    const std::uint64_t samples_max = *std::max_element(ix.samples.begin(), ix.samples.end());
    // Far enough ahead to see the next two windows of shards while this one is read.
    const std::uint64_t lookahead = std::max<std::uint64_t>(ro.read_ahead.value_or(2 * kMinRequestsInFlight),
                                                            2 * samples_max * window);
    strategy_ = std::make_unique<whole_shards>(*set_, ro, window, lookahead, std::move(ix.kept));
  }
  ~remote_tar_reader() override {
    set_->stop();       // failures from now on are the reader's going, not recorded
    strategy_->stop();  // reads waiting for a shard wake (none in a loader's life)
    loop_->shutdown();  // every request ends (callbacks run) before the members they use go
  }

  [[nodiscard]] std::vector<memory_use> memory() const override { return {strategy_->memory()}; }
  void limit_memory(std::uint64_t bytes) override { strategy_->limit_memory(bytes); }

  [[nodiscard]] std::shared_ptr<image_reader> with_remote(const remote_change& change) const override {
    remote_options ro = remote_options_;
    if (change.requests_in_flight) ro.requests_in_flight = *change.requests_in_flight;
    if (change.read_ahead) ro.read_ahead = *change.read_ahead;
    if (change.cache_bytes) ro.cache_bytes = *change.cache_bytes;
    return make_remote_shard_reader(locations_, shard_options_, ro);
  }

  [[nodiscard]] std::optional<remote_counters> fetch_counters() const override {
    const request_counters& n = *counters_;
    remote_counters c;
    c.requests = n.requests.load();
    c.retries = n.retries.load();
    c.bytes = n.bytes.load();
    c.wait_ms = static_cast<double>(n.wait_ns.load()) / 1e6;
    c.read_ahead = n.read_ahead.load();
    c.shards = n.shards.load();
    c.streamed = n.streamed.load();
    c.sidecars = n.sidecars.load();
    c.index_cached = n.index_cached.load();
    c.shard_bytes = shard_bytes_;
    c.requests_in_flight = loop_->cap();
    strategy_->add_counters(c);
    return c;
  }

 protected:
  std::span<const std::byte> bytes_of(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                      std::shared_ptr<const void>& held) override {
    return strategy_->fetch(s, e, storage, held);
  }

 private:
  std::vector<std::string> locations_;  ///< as given: what with_remote() reads anew
  shard_options shard_options_;
  remote_options remote_options_;
  std::uint64_t shard_bytes_;
  std::unique_ptr<request_counters> counters_;  ///< first: the loop counts into it until it stops
  std::unique_ptr<transfer_loop> loop_;
  std::unique_ptr<shard_set> set_;
  std::unique_ptr<fetch_strategy> strategy_;  ///< last: it goes first (its answers use the set)
};

}  // namespace
}  // namespace remote

std::shared_ptr<image_reader> make_remote_shard_reader(const std::vector<std::string>& locations, shard_options shard,
                                                       remote_options ro) {
  remote::check_options(ro);
  if (locations.empty()) throw pinfeed::invalid_argument("remote shards: no shard given");
  std::vector<remote::location> parsed;
  for (const auto& l : locations) parsed.push_back(remote::parse_location(l));
  const auto creds = std::make_shared<const remote::s3_credentials>(remote::s3_credentials::from_env());
  std::vector<remote::endpoint> where;  // (an s3:// location must name an object)
  for (const auto& l : parsed) where.push_back(remote::resolve(l, creds));
  const bool whole = shard.window_shards.value_or(1) > 0;
  if (whole && !ro.cache_dir.empty()) remote::make_cache_dir(ro.cache_dir);
  auto counters = std::make_unique<remote::request_counters>();
  auto loop = std::make_unique<remote::transfer_loop>(ro, *counters);
  remote::indexed_shards ix =
      remote::index_shards(*loop, parsed, std::move(where), creds, shard, ro, whole ? ro.cache_bytes : 0, *counters);
  const std::uint32_t window = !whole ? 0 : shard.window_shards ? *shard.window_shards : remote::default_window(ix, ro.cache_bytes);
  return std::make_shared<remote::remote_tar_reader>(locations, std::move(counters), std::move(loop), std::move(ix), shard, ro,
                                                     window);
}

}  // namespace pinfeed::loaders
