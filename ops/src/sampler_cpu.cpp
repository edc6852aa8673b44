// Host side of sampler.hpp: validation, the reference implementation and the naive baseline.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/parallel.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::ops {

std::int64_t positive_target(const sampler_params& p) noexcept {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(p.k) * p.positive_fraction));
}

namespace detail {
void validate_shapes(const sampler_args& a, const sampler_params& p) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("balanced sampler: " + what); };
  if (p.k < 0) fail("k must be >= 0, got " + std::to_string(p.k));
  if (!(p.positive_fraction >= 0.0 && p.positive_fraction <= 1.0))
    fail("positive_fraction must be in [0, 1], got " + std::to_string(p.positive_fraction));
  if (p.negative_label == p.ignore_label)
    fail("negative_label and ignore_label are both " + std::to_string(p.negative_label));
  if (a.rows < 0) fail("rows must be >= 0, got " + std::to_string(a.rows));
  if (a.n < 0) fail("n must be >= 0, got " + std::to_string(a.n));
  if (a.n > 0xFFFFFFFFll) fail("n must be below 2^32, got " + std::to_string(a.n));
  if (a.label_type != dtype::i32 && a.label_type != dtype::i64)
    fail("labels must be int32 or int64, got " + std::string(dtype_name(a.label_type)));
  if (a.index_type != dtype::i32 && a.index_type != dtype::i64)
    fail("indices must be int32 or int64, got " + std::string(dtype_name(a.index_type)));
  if (a.index_type == dtype::i32 && a.n > 0x7FFFFFFFll)
    fail("int32 indices cannot address n = " + std::to_string(a.n) + " items");
  if (a.label_type == dtype::i32) {
    const auto fits = [](std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
    if (!fits(p.negative_label) || !fits(p.ignore_label))
      fail("negative_label/ignore_label do not fit int32 labels");
  }
  if (a.features != nullptr && a.feature_bytes == 0) fail("features given with feature_bytes = 0");
}
}  // namespace detail

void validate(const sampler_args& a, const sampler_params& p) {
  detail::validate_shapes(a, p);
  auto fail = [](const std::string& what) { throw std::invalid_argument("balanced sampler: " + what); };
  const bool work = a.rows > 0;
  if (work && a.n > 0 && a.labels == nullptr) fail("labels is a null pointer");
  if (work && p.k > 0 && a.indices == nullptr) fail("indices is a null pointer");
  if (work && p.k > 0 && a.features != nullptr && a.gathered_features == nullptr)
    fail("features given but gathered_features is a null pointer");
  if (a.features == nullptr && a.gathered_features != nullptr) fail("gathered_features given without features");
}

namespace {

/// LSD radix sort of unique 64-bit keys (11-bit digits; passes where every key shares the digit
/// are skipped). `scratch` is resized as needed.
void radix_sort(std::vector<std::uint64_t>& v, std::vector<std::uint64_t>& scratch) {
  if (v.size() < 256) {
    std::sort(v.begin(), v.end());
    return;
  }
  scratch.resize(v.size());
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = 1u << kBits;
  std::vector<std::size_t> count(kBuckets);
  for (int shift = 0; shift < 64; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (auto x : v) ++count[(x >> shift) & (kBuckets - 1)];
    if (count[(v[0] >> shift) & (kBuckets - 1)] == v.size()) continue;  // nothing to reorder
    std::size_t sum = 0;
    for (auto& c : count) {
      const std::size_t t = c;
      c = sum;
      sum += t;
    }
    for (auto x : v) scratch[count[(x >> shift) & (kBuckets - 1)]++] = x;
    v.swap(scratch);
  }
}

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
  std::vector<std::uint32_t> sel, ord;
  std::vector<std::uint64_t> order, sort_tmp;
};

constexpr std::size_t kChunk = 1024;  // items per key-generation chunk (a multiple of 4)

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

  /// Appends (key << 32 | i) of every item of class `only` (or of both classes when only < 0) whose
  /// key is <= thr[class] to cand[class].
  void scan(const L* labels, std::uint64_t row, const std::uint32_t thr[2], int only, row_scratch& s) const {
    const std::int64_t n = a.n;
    const philox_stream keys(p.seed, p.offset, row, 0);
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    s.keys.resize(kChunk);
    for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const std::size_t len = static_cast<std::size_t>(std::min<std::int64_t>(kChunk, n - i0));
      philox_words(keys, static_cast<std::uint32_t>(i0 / 4), (len + 3) / 4, s.keys.data());
      s.cand[0].make_room(kChunk);
      s.cand[1].make_room(kChunk);
      std::uint64_t* out[2] = {s.cand[0].end(), s.cand[1].end()};
      std::size_t added[2] = {0, 0};
      for (std::size_t j = 0; j < len; ++j) {
        const L l = labels[i0 + static_cast<std::int64_t>(j)];
        const std::uint32_t key = s.keys[j];
        const int c = l == neg ? 1 : 0;
        const bool take = l != ign && key <= thr[c] && (only < 0 || only == c);
        // Branch-free append: always write, advance only when taken.
        out[c][added[c]] = (static_cast<std::uint64_t>(key) << 32) | static_cast<std::uint64_t>(i0 + static_cast<std::int64_t>(j));
        added[c] += take;
      }
      s.cand[0].size += added[0];
      s.cand[1].size += added[1];
    }
  }

  void run(std::int64_t row, row_scratch& s) const {
    const L* labels = static_cast<const L*>(a.labels) + row * a.n;
    const L neg = static_cast<L>(p.negative_label), ign = static_cast<L>(p.ignore_label);
    std::int64_t positives = 0, negatives = 0;
    for (std::int64_t i = 0; i < a.n; ++i) {
      negatives += labels[i] == neg;
      positives += labels[i] != neg && labels[i] != ign;
    }
    const class_counts cc = balanced_counts(positives, negatives, p.k, target, p.mode);
    const std::int64_t want[2] = {cc.num_pos, cc.num_neg}, avail[2] = {positives, negatives};
    const std::int64_t total = cc.num_pos + cc.num_neg;
    s.sel.clear();
    if (total > 0) {
      std::uint32_t thr[2];
      for (int c = 0; c < 2; ++c) {
        s.cand[c].clear();
        thr[c] = threshold(want[c], avail[c]);
      }
      scan(labels, static_cast<std::uint64_t>(row), thr, -1, s);
      for (int c = 0; c < 2; ++c) {
        if (static_cast<std::int64_t>(s.cand[c].size) < want[c]) {  // the margin was too tight
          s.cand[c].clear();
          const std::uint32_t all[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
          scan(labels, static_cast<std::uint64_t>(row), all, c, s);
        }
        auto& v = s.cand[c];
        const auto m = static_cast<std::size_t>(want[c]);
        if (v.size > m) std::nth_element(v.begin(), v.begin() + m, v.end());
        for (std::size_t j = 0; j < m; ++j) s.sel.push_back(static_cast<std::uint32_t>(v.storage[j]));
      }
      // Output order: increasing (ord(i), i).
      s.ord.resize(s.sel.size());
      philox_element_words(philox_stream(p.seed, p.offset, static_cast<std::uint64_t>(row), 1), s.sel.data(),
                           s.sel.size(), s.ord.data());
      s.order.resize(s.sel.size());
      for (std::size_t j = 0; j < s.sel.size(); ++j)
        s.order[j] = (static_cast<std::uint64_t>(s.ord[j]) << 32) | s.sel[j];
      radix_sort(s.order, s.sort_tmp);
    } else {
      s.order.clear();
    }
    write(row, s.order, static_cast<const L*>(a.labels) + row * a.n);
  }

  void write(std::int64_t row, const std::vector<std::uint64_t>& order, const L* labels) const {
    const std::int64_t k = p.k, valid = static_cast<std::int64_t>(order.size());
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t idx = j < valid ? static_cast<std::int64_t>(order[j] & 0xFFFFFFFFu) : -1;
      if (a.index_type == dtype::i64) static_cast<std::int64_t*>(a.indices)[row * k + j] = idx;
      else static_cast<std::int32_t*>(a.indices)[row * k + j] = static_cast<std::int32_t>(idx);
      if (a.gathered_labels != nullptr)
        static_cast<L*>(a.gathered_labels)[row * k + j] = idx >= 0 ? labels[idx] : static_cast<L>(p.ignore_label);
      if (a.features != nullptr) {
        auto* dst = static_cast<std::byte*>(a.gathered_features) + (row * k + j) * a.feature_bytes;
        if (idx >= 0)
          std::memcpy(dst, static_cast<const std::byte*>(a.features) + (row * a.n + idx) * a.feature_bytes,
                      a.feature_bytes);
        else
          std::memset(dst, 0, a.feature_bytes);
      }
    }
    if (a.valid != nullptr) a.valid[row] = static_cast<std::int32_t>(valid);
  }
};

template <class L>
void sample_all(const sampler_args& a, const sampler_params& p) {
  const row_sampler<L> rs{a, p, positive_target(p)};
  parallel_for(0, static_cast<std::size_t>(a.rows), [&](std::size_t row) {
    thread_local row_scratch scratch;
    rs.run(static_cast<std::int64_t>(row), scratch);
  });
}

}  // namespace

void balanced_sample_cpu(const sampler_args& a, const sampler_params& p) {
  validate(a, p);
  if (a.rows == 0) return;
  if (a.label_type == dtype::i64) sample_all<std::int64_t>(a, p);
  else sample_all<std::int32_t>(a, p);
}

namespace {

template <class L>
void naive_all(const sampler_args& a, const sampler_params& p) {
  const std::int64_t target = positive_target(p);
  std::vector<std::int64_t> pos, negs, sampled;
  for (std::int64_t row = 0; row < a.rows; ++row) {
    const L* labels = static_cast<const L*>(a.labels) + row * a.n;
    pos.clear();
    negs.clear();
    for (std::int64_t i = 0; i < a.n; ++i) {  // nonzero(labels == positive), nonzero(labels == negative)
      if (labels[i] == static_cast<L>(p.negative_label)) negs.push_back(i);
      else if (labels[i] != static_cast<L>(p.ignore_label)) pos.push_back(i);
    }
    const class_counts cc = balanced_counts(static_cast<std::int64_t>(pos.size()),
                                            static_cast<std::int64_t>(negs.size()), p.k, target, p.mode);
    philox_stream rng(p.seed, p.offset, static_cast<std::uint64_t>(row), 2);
    auto randperm = [&](std::vector<std::int64_t>& v) {  // Fisher-Yates, as torch.randperm
      for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(static_cast<std::uint32_t>(i))]);
    };
    randperm(pos);
    randperm(negs);
    sampled.assign(pos.begin(), pos.begin() + cc.num_pos);  // cat
    sampled.insert(sampled.end(), negs.begin(), negs.begin() + cc.num_neg);
    randperm(sampled);
    std::vector<std::uint64_t> order(sampled.begin(), sampled.end());
    row_sampler<L>{a, p, target}.write(row, order, labels);
  }
}

}  // namespace

void naive_sample_cpu(const sampler_args& a, const sampler_params& p) {
  validate(a, p);
  if (a.label_type == dtype::i64) naive_all<std::int64_t>(a, p);
  else naive_all<std::int32_t>(a, p);
}

}  // namespace pinfeed::ops
