// Host side of sampler.hpp: the reference implementation, a row per task. Per row: class counts
// guessed from a sample of the labels give key thresholds, one pass (cpu_filter) counts the classes
// and keeps the candidates under them, the smallest keys of each class are selected, ordered
// (cpu_order) and written out with the gathered labels and features (cpu_gather).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_filter.hpp"
#include "cpu_gather.hpp"
#include "cpu_order.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/detail/parallel.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::ops {
namespace cpu_sampler {
namespace {

/// An append buffer whose storage is always constructed, so items can be written past `size`
/// before deciding whether to keep them.
struct append_buffer {
  std::vector<std::uint64_t> storage;
  std::size_t size = 0;
  void clear() noexcept { size = 0; }
  void make_room(std::size_t extra) {
    if (storage.size() < size + extra) storage.resize(std::max(storage.size() * 2, size + extra));
  }
  std::uint64_t* begin() noexcept { return storage.data(); }
  std::uint64_t* end() noexcept { return storage.data() + size; }
};

/// Per-thread scratch, reused across rows.
struct row_scratch {
  std::vector<std::uint32_t> keys;
  append_buffer cand[2];
  std::vector<std::uint64_t> tmp;
  std::vector<std::uint32_t> sel, ord;
  std::vector<std::uint64_t> order, sort_tmp;
  std::vector<std::uint32_t> pos;
};

template <class L>
struct row_sampler {
  const sampler_args& a;
  const sampler_params& p;
  std::int64_t target;

  std::uint32_t threshold(std::int64_t want, std::int64_t avail) const {
    if (want >= avail) return 0xFFFFFFFFu;
    // Expected fraction of keys needed plus a generous margin: if too few items pass, the class is
    // scanned again without a threshold, so the margin only trades speed, never the result.
    const double q = static_cast<double>(want) / static_cast<double>(avail);
    const double frac = q + 6.0 * std::sqrt(q * (1.0 - q) / static_cast<double>(avail)) + 32.0 / avail;
    if (frac >= 1.0) return 0xFFFFFFFFu;
    return static_cast<std::uint32_t>(std::ceil(frac * 4294967296.0));
  }

  /// Appends (key << 32 | i), in index order, of every item of class `only` (or of both classes
  /// when only < 0) whose key is <= thr[class] to cand[class]; counts every positive and negative
  /// into seen[].
  void scan(const L* labels, std::uint64_t row, const std::uint32_t thr[2], int only, row_scratch& s,
            std::int64_t seen[2]) const {
    const std::int64_t n = a.n;
    const philox_stream keys(p.seed, p.offset, row, 0);
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    const simd_level level = simd_level_in_use();
    s.keys.resize(kChunk);
    for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const std::size_t len = static_cast<std::size_t>(std::min<std::int64_t>(kChunk, n - i0));
      philox_words(keys, static_cast<std::uint32_t>(i0 / 4), (len + 3) / 4, s.keys.data());
      s.cand[0].make_room(kChunk + 4);  // a chunk's items and append_taken's three spare writes
      s.cand[1].make_room(kChunk + 4);
      std::uint64_t* out[2] = {s.cand[0].end(), s.cand[1].end()};
      std::size_t added[2] = {0, 0};
      filter_chunk(level, labels + i0, s.keys.data(), len, static_cast<std::uint64_t>(i0), neg, ign, thr, only, out,
                   added, seen);
      s.cand[0].size += added[0];
      s.cand[1].size += added[1];
    }
  }

  /// Appends the indices of the `m` smallest candidates of a class to `out`, in increasing index
  /// order (one spare slot past the end is written and then dropped).
  void select(append_buffer& cand, std::size_t m, std::vector<std::uint32_t>& out, row_scratch& s) const {
    if (m == 0) return;
    std::uint64_t cut = ~std::uint64_t{0};
    if (cand.size > m) cut = smallest_cut(cand, m, s);
    const std::size_t at = out.size();
    out.resize(at + m + 1);  // the branch-free loop writes one past the last kept item
    std::uint32_t* o = out.data() + at;
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c) {
      *o = static_cast<std::uint32_t>(*c);  // write always, advance when kept
      o += *c <= cut;
    }
    out.resize(at + m);
  }

  /// The m-th smallest of the candidates (composites are unique, so exactly m are <= it): a
  /// histogram of the top 11 bits of the keys finds its bucket, and only that bucket is searched.
  static std::uint64_t smallest_cut(append_buffer& cand, std::size_t m, row_scratch& s) {
    std::uint32_t max_key = 0;
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c)
      max_key = std::max(max_key, static_cast<std::uint32_t>(*c >> 32));
    const int width = max_key == 0 ? 0 : 32 - __builtin_clz(max_key);
    const int shift = 32 + std::max(0, width - 11);
    std::uint32_t count[2048] = {};
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c) ++count[*c >> shift];
    std::size_t below = 0;
    std::uint64_t bucket = 0;
    while (below + count[bucket] < m) below += count[bucket++];
    s.tmp.clear();
    for (const std::uint64_t* c = cand.begin(); c != cand.end(); ++c)
      if ((*c >> shift) == bucket) s.tmp.push_back(*c);
    const std::size_t rank = m - below - 1;
    std::nth_element(s.tmp.begin(), s.tmp.begin() + static_cast<std::ptrdiff_t>(rank), s.tmp.end());
    return s.tmp[rank];
  }

  /// Key thresholds per class for the pass that counts the classes and keeps candidates at the same
  /// time. They come from class counts guessed on a strided sample of the labels; a wrong guess only
  /// costs a second pass over the class it starved, never the result.
  void guess_thresholds(const L* labels, std::uint32_t thr[2]) const {
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    // The sample reads whole cache lines: 256 evenly spaced runs of 64 bytes of labels (every
    // label when the row is short), so it costs 256 line fetches, not one per label.
    constexpr std::int64_t kRun = 64 / static_cast<std::int64_t>(sizeof(L)), kRuns = 256;
    std::int64_t sample = 0;
    std::int64_t sampled[2] = {0, 0};
    const auto count_run = [&](std::int64_t from, std::int64_t len) {
      for (std::int64_t j = from; j < from + len; ++j) {
        const L l = labels[j];
        sampled[0] += l != neg && l != ign;
        sampled[1] += l == neg;
      }
      sample += len;
    };
    if (a.n <= kRun * kRuns) {
      count_run(0, a.n);
    } else {
      const std::int64_t stride = a.n / kRuns;  // >= kRun
      // Every line asked for first, so that the misses overlap instead of one waiting on another.
      for (std::int64_t r = 0; r < kRuns; ++r) {
        __builtin_prefetch(labels + r * stride);
        __builtin_prefetch(labels + r * stride + kRun - 1);
      }
      for (std::int64_t r = 0; r < kRuns; ++r) count_run(r * stride, kRun);
    }
    thresholds_from_sample(sampled, sample, thr);
  }

  /// The thresholds for class counts `sampled` among `sample` labels of the row.
  void thresholds_from_sample(const std::int64_t sampled[2], std::int64_t sample, std::uint32_t thr[2]) const {
    const double scale = sample ? static_cast<double>(a.n) / static_cast<double>(sample) : 0.0;
    const std::int64_t guess[2] = {std::llround(sampled[0] * scale), std::llround(sampled[1] * scale)};
    const class_counts gc = balanced_counts(guess[0], guess[1], p.k, target, p.mode);
    const std::int64_t want_guess[2] = {gc.num_pos, gc.num_neg};
    // Relative standard error of each guessed class count; four of the larger one (a top-up ties
    // one class's share to the other's count) widen the share of keys kept. Beyond that the
    // rescan takes over, about once in 30000 rows.
    double rel[2];
    for (int c = 0; c < 2; ++c)
      rel[c] = sampled[c] > 0 ? std::sqrt(static_cast<double>(sample - sampled[c]) /
                                          (static_cast<double>(sampled[c]) * static_cast<double>(sample)))
                              : 1.0;
    for (int c = 0; c < 2; ++c) {
      const double widen = 1.0 + 4.0 * std::max(rel[0], rel[1]);
      const auto want = static_cast<std::int64_t>(static_cast<double>(want_guess[c]) * widen) + 16;
      thr[c] = want_guess[c] == 0 ? 0u : threshold(want, std::max<std::int64_t>(1, guess[c]));
    }
  }

  /// The positives and negatives of the row into seen[], and (k > 0) the candidates under thr.
  void count_and_filter(const L* labels, std::int64_t row, const std::uint32_t thr[2], row_scratch& s,
                        std::int64_t seen[2]) const {
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    s.cand[0].clear();
    s.cand[1].clear();
    if (p.k > 0) {
      scan(labels, static_cast<std::uint64_t>(row), thr, -1, s, seen);
      return;
    }
    for (std::int64_t i = 0; i < a.n; ++i) {
      seen[1] += labels[i] == neg;
      seen[0] += labels[i] != neg && labels[i] != ign;
    }
  }

  /// The `want` smallest keys of class c into s.sel, after scanning the class again where the guessed
  /// threshold kept too few candidates (first with an exact threshold, then without one).
  void select_class(const L* labels, std::int64_t row, int c, std::int64_t want, const std::int64_t seen[2],
                    row_scratch& s) const {
    if (static_cast<std::int64_t>(s.cand[c].size) < want) {  // the guess starved this class
      s.cand[c].clear();
      std::uint32_t exact[2] = {0, 0};
      exact[c] = threshold(want, seen[c]);
      std::int64_t again[2] = {0, 0};
      scan(labels, static_cast<std::uint64_t>(row), exact, c, s, again);
      if (static_cast<std::int64_t>(s.cand[c].size) < want) {  // and so did the margin
        s.cand[c].clear();
        const std::uint32_t all[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
        scan(labels, static_cast<std::uint64_t>(row), all, c, s, again);
      }
    }
    select(s.cand[c], static_cast<std::size_t>(want), s.sel, s);
  }

  /// s.order: the output order of s.sel (the positives in index order, then the negatives).
  /// Output order: increasing (ord(i), i). Sorting (ord << 32 | position) gives that except where
  /// equal ord keys (about k^2 / 2^33 pairs per row) pair a positive with a negative of lower index:
  /// those runs are put in index order afterwards.
  void order_selection(std::int64_t row, row_scratch& s) const {
    s.ord.resize(s.sel.size());
    philox_element_words(philox_stream(p.seed, p.offset, static_cast<std::uint64_t>(row), 1), s.sel.data(),
                         s.sel.size(), s.ord.data());
    s.order.resize(s.sel.size());
    for (std::size_t j = 0; j < s.sel.size(); ++j) s.order[j] = (static_cast<std::uint64_t>(s.ord[j]) << 32) | j;
    sort_random_keyed(s.order, s.sort_tmp);
    order_ties_by_index(s.order, s.sel);
  }

  void run(std::int64_t row, row_scratch& s) const {
    const L* labels = static_cast<const L*>(a.labels) + row * a.n;
    std::uint32_t thr[2];
    guess_thresholds(labels, thr);
    std::int64_t seen[2] = {0, 0};
    count_and_filter(labels, row, thr, s, seen);
    const class_counts cc = balanced_counts(seen[0], seen[1], p.k, target, p.mode);
    const std::int64_t want[2] = {cc.num_pos, cc.num_neg};
    s.sel.clear();
    s.order.clear();
    if (cc.num_pos + cc.num_neg > 0) {
      for (int c = 0; c < 2; ++c) select_class(labels, row, c, want[c], seen, s);
      order_selection(row, s);
    }
    write(row, s, labels, cc.num_pos);
  }

  /// Writes indices, labels, padding and gathered features in output order; the first `positives`
  /// of s.sel are the positives.
  void write(std::int64_t row, row_scratch& s, const L* labels, std::int64_t positives) const {
    constexpr std::int64_t kPrefetch = 64;
    const std::int64_t k = p.k, valid = static_cast<std::int64_t>(s.order.size());
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t idx = j < valid ? static_cast<std::int64_t>(s.sel[s.order[j] & 0xFFFFFFFFu]) : -1;
      if (a.index_type == dtype::i64) static_cast<std::int64_t*>(a.indices)[row * k + j] = idx;
      else static_cast<std::int32_t*>(a.indices)[row * k + j] = static_cast<std::int32_t>(idx);
    }
    // pos[q]: the output slot of s.sel[q]. Labels and feature rows are read in s.sel order (forward
    // sweeps over the row, which the TLB and the prefetches follow) and written to their slots.
    if (a.gathered_labels != nullptr || a.features != nullptr) {
      s.pos.resize(static_cast<std::size_t>(valid));
      for (std::int64_t j = 0; j < valid; ++j) s.pos[s.order[j] & 0xFFFFFFFFu] = static_cast<std::uint32_t>(j);
    }
    if (a.gathered_labels != nullptr) {
      L* out = static_cast<L*>(a.gathered_labels) + row * k;
      // Only the positives' labels are read: a negative's is negative_label by definition.
      for (std::int64_t q = 0; q < positives; ++q) {
        if (q + kPrefetch < positives) __builtin_prefetch(labels + s.sel[q + kPrefetch]);
        out[s.pos[q]] = labels[s.sel[q]];
      }
      for (std::int64_t q = positives; q < valid; ++q) out[s.pos[q]] = static_cast<L>(p.negative_label);
      std::fill(out + valid, out + k, static_cast<L>(p.ignore_label));
    }
    if (a.gathered_features != nullptr) {  // (features may be null only when n = 0: nothing is read)
      const std::size_t fb = a.feature_bytes;
      const auto* in = static_cast<const std::byte*>(a.features) + row * a.n * fb;
      auto* out = static_cast<std::byte*>(a.gathered_features) + row * k * fb;
      gather_feature_rows(out, in, s.sel.data(), s.pos.data(), valid, fb);
      std::memset(out + valid * fb, 0, (k - valid) * fb);
    }
    if (a.valid != nullptr) a.valid[row] = static_cast<std::int32_t>(valid);
  }
};

template <class L>
void sample_all(const sampler_args& a, const sampler_params& p) {
  const row_sampler<L> rs{a, p, positive_target(p)};
  pinfeed::detail::parallel_for(0, static_cast<std::size_t>(a.rows), [&](std::size_t row) {
    auto& scratch = pinfeed::detail::thread_scratch<row_scratch, struct sampler_rows>();
    rs.run(static_cast<std::int64_t>(row), scratch);
  });
}

}  // namespace
}  // namespace cpu_sampler

void balanced_sample_host(const sampler_args& a, const sampler_params& p) {
  validate(a, p);
  if (a.status != nullptr) *a.status = 0;  // the host reads each label once: nothing can go wrong between passes
  if (a.rows == 0) return;
  if (a.label_type == dtype::i64) cpu_sampler::sample_all<std::int64_t>(a, p);
  else cpu_sampler::sample_all<std::int32_t>(a, p);
}

}  // namespace pinfeed::ops
