#include "remote/indexer.hpp"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "pinfeed/runtime/error.hpp"
#include "remote/index_cache.hpp"
#include "remote/s3.hpp"

namespace pinfeed::loaders::remote {
namespace {

using samples_t = std::vector<detail::shard_sample>;

/// Bytes of scanned shards that may be kept whole, shared by the scans running at once.
class keep_budget {
 public:
  explicit keep_budget(std::uint64_t bytes) : left_(bytes) {}
  [[nodiscard]] bool take(std::uint64_t n) {
    std::lock_guard lock(m_);
    if (n > left_) return false;
    left_ -= n;
    return true;
  }
  void give_back(std::uint64_t n) {
    std::lock_guard lock(m_);
    left_ += n;
  }

 private:
  std::mutex m_;
  std::uint64_t left_;
};

/// A shard fetched whole to be indexed, scanned as it arrives (a request's sink); its bytes are
/// kept too when the budget has room for them as the body begins.
struct index_sink final : body_sink {
  index_sink(std::uint32_t shard, std::string shown, const shard_options& so, keep_budget& budget, bool keep)
      : shard_(shard), shown_(std::move(shown)), so_(so), budget_(budget), keep_(keep) {}
  void restart() override {
    scan.emplace(shard_, shown_, so_);
    body.clear();
    kept = false;
    first_ = true;
  }
  void data(std::span<const std::byte> bytes, const response& r) override {
    if (first_) {
      first_ = false;
      if (r.have_total) scan->limit(r.total);  // a member running past the shard fails at its header
      if (reserved == 0 && r.have_total && keep_ && budget_.take(r.total)) reserved = r.total;
      if (reserved > 0 && r.have_total && r.total == reserved) {
        kept = true;
        body.reserve(static_cast<std::size_t>(reserved));
      }
    }
    scan->feed(bytes);
    if (kept) body.insert(body.end(), bytes.begin(), bytes.end());
  }
  std::optional<detail::shard_scanner> scan;
  std::vector<std::byte> body;  ///< the shard's bytes, when kept
  bool kept = false;
  std::uint64_t reserved = 0;  ///< taken from the budget for this shard

 private:
  std::uint32_t shard_;
  std::string shown_;
  const shard_options& so_;
  keep_budget& budget_;
  bool keep_;
  bool first_ = true;
};

struct indexing {
  transfer_loop& loop;
  const std::vector<location>& locations;
  const std::shared_ptr<const s3_credentials>& creds;
  const shard_options& so;
  const remote_options& ro;
  request_counters& counters;
  indexed_shards out;
  std::vector<samples_t> groups;

  void take(std::uint32_t s, samples_t samples, std::uint64_t size, std::string etag) {
    out.shards[s].size = size;
    if (!etag.empty()) out.shards[s].etag = std::move(etag);
    out.shard_bytes += size;
    groups[s] = std::move(samples);
  }

  /// Shards indexed from their sidecars; returns the others.
  std::vector<std::uint32_t> from_sidecars() {
    std::vector<endpoint> sidecars;
    std::vector<std::future<response>> answers;
    request optional;
    optional.missing_ok = true;
    for (const auto& l : locations) {
      sidecars.push_back(resolve(parse_location(l.sidecar), creds));
      answers.push_back(loop.submit(sidecars.back(), optional));
    }
    std::vector<std::uint32_t> rest;
    for (std::uint32_t s = 0; s < locations.size(); ++s) {
      const response r = answers[s].get();
      std::optional<samples_t> samples;
      std::uint64_t size = 0;
      if (r.status >= 200 && r.status < 300) {
        const std::string_view text(reinterpret_cast<const char*>(r.body.data()), r.body.size());
        samples = detail::parse_shard_index(text, s, sidecars[s].shown, so, size);
      }
      if (!samples) {
        rest.push_back(s);
        continue;
      }
      counters.sidecars.fetch_add(1, std::memory_order_relaxed);
      take(s, std::move(*samples), size, {});
    }
    return rest;
  }

  /// Of `unindexed`, those whose cached index still holds (the shard has the size and ETag it had:
  /// a HEAD request each); returns the others.
  std::vector<std::uint32_t> from_index_cache(const index_cache& cache, const std::vector<std::uint32_t>& unindexed) {
    struct found {
      std::uint32_t shard;
      index_cache::entry entry;
      std::future<response> head;
    };
    std::vector<found> hits;
    std::vector<std::uint32_t> rest;
    request head;
    head.head = true;
    for (const std::uint32_t s : unindexed) {
      if (auto e = cache.load(locations[s].text, out.shards[s].where.shown))
        hits.push_back({s, std::move(*e), loop.submit(out.shards[s].where, head)});
      else rest.push_back(s);
    }
    for (auto& f : hits) {
      if (!still_holds(cache, f.shard, f.entry, f.head)) rest.push_back(f.shard);
    }
    std::sort(rest.begin(), rest.end());
    return rest;
  }

  bool still_holds(const index_cache& cache, std::uint32_t s, const index_cache::entry& e, std::future<response>& head) {
    response r;
    try {
      r = head.get();
    } catch (const fatal_error&) {  // no HEAD here (405, 501, a URL signed for GET alone): scanned
      return false;
    }
    if (!r.have_total || r.etag != e.etag) return false;
    std::uint64_t size = 0;
    std::optional<samples_t> samples;
    try {
      samples = detail::parse_shard_index(e.index, s, cache.file(locations[s].text).string(), so, size);
    } catch (const std::invalid_argument&) {  // a damaged cache file: the shard is scanned again
      return false;
    }
    if (!samples || size != r.total) return false;
    counters.index_cached.fetch_add(1, std::memory_order_relaxed);
    take(s, std::move(*samples), size, r.etag);
    return true;
  }

  /// Scans the shards `whole` as they arrive, `at_once` at a time (the copies kept for the cache
  /// are in memory until made blobs).
  void scan(const std::vector<std::uint32_t>& whole, std::uint64_t keep_bytes, const index_cache* cache) {
    keep_budget budget(keep_bytes);
    const std::size_t at_once = keep_bytes > 0 ? std::min<std::size_t>(16, loop.cap()) : loop.cap();
    for (std::size_t first = 0; first < whole.size(); first += at_once) {
      const std::size_t last = std::min(whole.size(), first + at_once);
      std::vector<std::future<response>> answers;
      std::vector<std::shared_ptr<index_sink>> sinks;
      for (std::size_t k = first; k < last; ++k) {
        request q;
        q.sink = sinks.emplace_back(std::make_shared<index_sink>(whole[k], out.shards[whole[k]].where.shown, so,
                                                                  budget, keep_bytes > 0));
        answers.push_back(loop.submit(out.shards[whole[k]].where, q));
      }
      for (std::size_t k = first; k < last; ++k) {
        const std::uint32_t s = whole[k];
        const response r = answers[k - first].get();
        index_sink& sink = *sinks[k - first];
        take(s, sink.scan->samples(), r.received, r.etag);
        if (cache != nullptr) cache->store(locations[s].text, out.shards[s].where.shown, out.shards[s].etag,
                                           detail::format_shard_index(groups[s], out.shards[s].size, so));
        if (sink.kept) out.kept[s] = std::make_shared<const blob>(std::move(sink.body), ro.cache_dir, s);
        else if (sink.reserved > 0) budget.give_back(sink.reserved);  // the size changed between attempts
        sinks[k - first].reset();
      }
    }
  }
};

}  // namespace

indexed_shards index_shards(transfer_loop& loop, const std::vector<location>& locations, std::vector<endpoint> where,
                            const std::shared_ptr<const s3_credentials>& creds, const shard_options& so,
                            const remote_options& ro, std::uint64_t keep_bytes, request_counters& counters) {
  indexing ix{loop, locations, creds, so, ro, counters, {}, std::vector<samples_t>(locations.size())};
  for (auto& e : where) ix.out.shards.push_back({std::move(e), 0, {}});
  ix.out.kept.resize(locations.size());
  std::vector<std::uint32_t> rest = ix.from_sidecars();
  std::optional<index_cache> cache;
  if (!ro.index_cache_dir.empty()) {
    cache.emplace(ro.index_cache_dir);
    rest = ix.from_index_cache(*cache, rest);
  }
  ix.scan(rest, keep_bytes, cache ? &*cache : nullptr);
  for (auto& g : ix.groups) {
    ix.out.samples.push_back(g.size());
    ix.out.entries.insert(ix.out.entries.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
  }
  if (ix.out.entries.empty())
    throw pinfeed::invalid_argument("remote shards: no samples in " + std::to_string(locations.size()) + " shard(s)");
  return std::move(ix.out);
}

}  // namespace pinfeed::loaders::remote
