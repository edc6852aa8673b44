// Device side of sampler.hpp: the sync-free batched balanced sampler (a radix select of the
// num_pos-th and num_neg-th selection key of every row, built from CUB block primitives).
//
// Pipeline, all on one stream, no host synchronization (capturable in a CUDA graph). When several
// blocks share a row (few long rows), one kernel per pass:
//   count_hist      full read: P and Nn per row, histogram of key bits 31..21 per class
//   choose<0>       one block per row: counts -> num_pos/num_neg, bucket of the k-th key
//   filter          full read: keys below the bucket are taken, keys in it become candidates
//                   (kept in a small buffer when they fit) and feed the histogram of bits 20..10
//   choose<1>
//   refine          candidates only (labels again if they did not fit): histogram of bits 9..0
//   choose<2>       -> the exact threshold key T and how many items equal to T to take
//   finish          candidates: keys below T are taken, ties at T too when all of them are needed
//   tie_count       rare: more items tie at T than are needed -> each block counts its ties,
//   tie_take        and takes those whose rank in the row is below what is needed (lowest indices win)
// When a block has a row to itself (many rows, or short ones), row_kernel runs the same steps in
// one kernel with the histogram and the candidates in shared memory. Then, for every row:
//   order_keys      (ord(i), i) of every taken item
//   DeviceSegmentedRadixSort of those keys per row (one row: DeviceRadixSort of its k slots)
//   write           indices, -1 padding, valid counts, gathered labels and features
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "detail/sampler_hook.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {
namespace {

constexpr int kThreads = 256;
// Digits of the 32-bit key, most significant first: bits 31..21, 20..10, 9..0.
__host__ __device__ constexpr int digit_bits(int pass) { return pass < 2 ? 11 : 10; }
__host__ __device__ constexpr int digit_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
constexpr std::uint32_t kMaxBins = 2048;
constexpr std::uint32_t kCandidateCap = 8192;  // candidates per row and class kept after the first pass

enum class class_mode : std::uint32_t { none = 0, all = 1, select = 2 };

/// What a kernel found inconsistent (see report_fault). Encoded with the row, class and a value
/// into one 64-bit word: bit 63 set, kind in 62..60, class + 1 in 59..58, row in 57..32, value.
using fault_kind = sampler_fault_kind;  // (sampler.hpp; sampler_fault decodes the word on the host)

__host__ __device__ constexpr unsigned long long encode_fault(fault_kind kind, std::int64_t row, int c,
                                                              std::uint32_t value) {
  return (1ull << 63) | (static_cast<unsigned long long>(kind) << 60) |
         (static_cast<unsigned long long>(c + 1) << 58) | (static_cast<unsigned long long>(row & 0x3FFFFFF) << 32) |
         value;
}

/// The order key of an unused slot when one row is sorted device-wide: above every real key.
__host__ __device__ constexpr std::uint64_t padding_key(int index_bits) {
  return 32 + index_bits >= 64 ? ~0ull : 1ull << (32 + index_bits);
}
/// The bits the device-wide sort of one row looks at (the real keys and the padding key).
constexpr int padded_sort_bits(int index_bits) { return 32 + index_bits >= 64 ? 64 : 33 + index_bits; }

struct class_state {
  std::uint32_t mode;       // class_mode
  std::uint32_t want;       // items of this class to take
  std::uint32_t k_rem;      // items still to take inside the current bucket
  std::uint32_t prefix;     // digits chosen so far
  std::uint32_t bucket;     // items in the chosen bucket (after the last pass: items equal to T)
  std::uint32_t candidates; // items in the first bucket (candidate count)
  std::uint32_t cand_used;  // candidates written (capped at the capacity)
  std::uint32_t pad;
};

struct row_state {
  unsigned long long positives, negatives;
  std::uint32_t taken;        // items appended to the row's selection
  std::uint32_t tie_base;  // where the ties go (tie pass of several blocks per row)
  std::uint32_t pad[2];
  class_state cls[2];
};

struct params_dev {
  std::int64_t rows, n, k, target;
  std::int64_t negative_label, ignore_label;
  std::uint64_t seed;
  std::uint32_t offset;
  sampler_mode mode;
  std::uint32_t cand_cap;
  int blocks_per_row;
  std::int64_t chunk;  // items per block of a row, a multiple of 4
  int index_bits;      // bits needed for an index < n
  unsigned long long* fault;  // host-mapped fault word of this device (null: not reported)
};

/// Temp storage layout: every piece 256-byte aligned.
struct layout {
  std::size_t state, hist, cand, tie_counts, selected, keys_in, keys_out, begin_off, end_off, sort_temp, sort_bytes,
      total;
};

std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

__device__ __forceinline__ int item_class(std::int64_t label, std::int64_t neg, std::int64_t ign) {
  return label == ign ? -1 : (label == neg ? 1 : 0);
}

/// Records that the row's state is inconsistent (the labels changed between the kernels of one call,
/// or two calls shared one temp buffer): the kernels clamp every write to its row and the host turns
/// the word into an exception at its next call. A plain store: any one of racing faults is kept.
__device__ __forceinline__ void report_fault(const params_dev& p, fault_kind kind, std::int64_t row, int c,
                                             std::uint32_t value) {
  if (p.fault != nullptr)
    *reinterpret_cast<volatile unsigned long long*>(p.fault) = encode_fault(kind, row, c, value);
}

template <class L>
__device__ __forceinline__ std::int64_t load_label(const L* labels, std::int64_t i) {
  return static_cast<std::int64_t>(labels[i]);
}

// ---- the passes as block-level steps ---------------------------------------------------------------
// When several blocks share a row, each pass is a kernel of its own and the blocks' histograms
// meet in global memory. When a block has a row to itself (many rows, or short ones), one kernel
// runs every pass with the histogram and the candidates in shared memory: no per-row global
// histogram, no memset, one launch.

using block_reduce = cub::BlockReduce<unsigned long long, kThreads>;
using block_scan_int = cub::BlockScan<int, kThreads>;
using block_scan_u32 = cub::BlockScan<std::uint32_t, kThreads>;

/// The CUB storage a step needs at one time (steps run one after another and reuse it).
union block_storage {
  typename block_reduce::TempStorage reduce;
  typename block_scan_int::TempStorage scan_int;
  typename block_scan_u32::TempStorage scan_u32;
};

/// Values a block's threads share within a step.
struct block_vars {
  std::uint32_t base, bucket, below, seen;
};

/// Block-aggregated append of flagged items to a row's selection (one atomic per block and round).
__device__ __forceinline__ void append_selected(block_storage& storage, block_vars& vars, row_state* rs,
                                                std::uint32_t* selected_row, int count, const std::uint32_t (&items)[4],
                                                const params_dev& p, std::int64_t row) {
  int offset, total;
  block_scan_int(storage.scan_int).ExclusiveSum(count, offset, total);
  if (threadIdx.x == 0) vars.base = total > 0 ? atomicAdd(&rs->taken, static_cast<std::uint32_t>(total)) : 0u;
  __syncthreads();
  const std::uint32_t base = vars.base;
  for (int q = 0; q < count; ++q) {
    const std::uint32_t at = base + static_cast<std::uint32_t>(offset + q);
    if (at < p.k) selected_row[at] = items[q];
    else report_fault(p, fault_kind::selection_overflow, row, -1, at);
  }
  __syncthreads();  // vars.base and the scan storage are reused by the next round
}

/// Where the items of each selecting class's first bucket are kept: list[c][0, cap), or nowhere when
/// the class has more of them than cap (then the later passes read the row again).
struct candidate_lists {
  std::uint64_t* list[2];
  std::uint32_t cap;
};

using histogram = std::uint32_t[2][kMaxBins];

__device__ __forceinline__ bool selects(const class_state& cs) {
  return cs.mode == static_cast<std::uint32_t>(class_mode::select);
}
/// More items tie at the threshold T than are still needed: the lowest indices win (tie pass).
__device__ __forceinline__ bool needs_tie_pass(const class_state& cs) { return selects(cs) && cs.bucket != cs.k_rem; }

__device__ __forceinline__ void clear_histogram(histogram& h) {
  for (std::uint32_t b = threadIdx.x; b < 2 * kMaxBins; b += kThreads) (&h[0][0])[b] = 0;
}

/// Adds a block's shared histogram to the row's global one (after a barrier).
__device__ __forceinline__ void merge_histogram(const histogram& s_hist, std::uint32_t* row_hist) {
  for (std::uint32_t b = threadIdx.x; b < 2 * kMaxBins; b += kThreads) {
    const std::uint32_t v = (&s_hist[0][0])[b];
    if (v) atomicAdd(&row_hist[b], v);
  }
}

/// Counts the positives and negatives of items [begin, end) of a row (begin a multiple of 4) and
/// adds their top key digits to s_hist. The block's totals are returned in thread 0.
template <class L>
__device__ void count_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, std::int64_t begin,
                           std::int64_t end, histogram& s_hist, block_storage& storage, unsigned long long& positives,
                           unsigned long long& negatives) {
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  unsigned long long pos = 0, neg = 0;
  for (std::int64_t i0 = begin + 4 * threadIdx.x; i0 < end; i0 += 4 * kThreads) {
    const philox_block kb = keys.block_at(static_cast<std::uint32_t>(i0 >> 2));
    for (int q = 0; q < 4 && i0 + q < end; ++q) {
      const int c = item_class(load_label(row_labels, i0 + q), p.negative_label, p.ignore_label);
      if (c < 0) continue;
      (c == 0 ? pos : neg)++;
      atomicAdd(&s_hist[c][kb.v[q] >> digit_shift(0)], 1u);
    }
  }
  positives = block_reduce(storage.reduce).Sum(pos);
  __syncthreads();
  negatives = block_reduce(storage.reduce).Sum(neg);
  __syncthreads();  // the storage is reused, the histogram is complete
}

/// One block per row: finds, per selecting class, the bucket of hist (the row's 2 x kMaxBins
/// histogram, shared or global memory) that holds the k_rem-th smallest key, and clears hist for the
/// next pass. Pass 0 first turns the counts into num_pos and num_neg.
template <int Pass>
__device__ void choose_step(const params_dev& p, std::int64_t row, row_state& rs, std::uint32_t* hist,
                            block_storage& storage, block_vars& vars) {
  constexpr std::uint32_t kBins = 1u << digit_bits(Pass);
  constexpr std::uint32_t kPerThread = kBins / kThreads;
  constexpr std::uint32_t kNone = kBins;  // sentinel: no bin holds the k_rem-th key
  if (Pass == 0 && threadIdx.x == 0) {
    const auto positives = static_cast<std::int64_t>(rs.positives), negatives = static_cast<std::int64_t>(rs.negatives);
    const class_counts cc = balanced_counts(positives, negatives, p.k, p.target, p.mode);
    const std::int64_t want[2] = {cc.num_pos, cc.num_neg}, avail[2] = {positives, negatives};
    for (int c = 0; c < 2; ++c) {
      class_state& cs = rs.cls[c];
      cs.want = static_cast<std::uint32_t>(want[c]);
      cs.k_rem = cs.want;
      cs.prefix = 0;
      cs.mode = static_cast<std::uint32_t>(want[c] == 0 ? class_mode::none
                                           : want[c] == avail[c] ? class_mode::all : class_mode::select);
    }
  }
  __syncthreads();
  for (int c = 0; c < 2; ++c) {
    class_state& cs = rs.cls[c];
    std::uint32_t* h = hist + c * kMaxBins;
    if (selects(cs)) {
      if (threadIdx.x == 0) vars.bucket = kNone;
      __syncthreads();  // the sentinel is in place before any thread can find its bin
      std::uint32_t local[kPerThread], sum = 0;
      for (std::uint32_t j = 0; j < kPerThread; ++j) sum += local[j] = h[threadIdx.x * kPerThread + j];
      std::uint32_t running, total;
      block_scan_u32(storage.scan_u32).ExclusiveSum(sum, running, total);
      const std::uint32_t k_rem = cs.k_rem;
      for (std::uint32_t j = 0; j < kPerThread; ++j) {
        if (running < k_rem && running + local[j] >= k_rem) {  // at most one thread and bin match
          vars.bucket = threadIdx.x * kPerThread + j;
          vars.below = running;
        }
        running += local[j];
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        std::uint32_t bucket = vars.bucket, below = vars.below, rem;
        if (bucket == kNone) {
          // The histogram holds fewer than k_rem items: state from another call or changed labels.
          // Clamp to the last bin and take what is there; the host reports it.
          report_fault(p, fault_kind::histogram_short, row, c, total);
          bucket = kBins - 1;
          below = total - h[bucket];
          rem = h[bucket];
        } else {
          rem = k_rem - below;
        }
        cs.prefix = (cs.prefix << digit_bits(Pass)) | bucket;
        cs.k_rem = rem;
        cs.bucket = h[bucket];
        if (Pass == 0) cs.candidates = cs.bucket;
      }
      __syncthreads();
    }
    for (std::uint32_t b = threadIdx.x; b < kMaxBins; b += kThreads) h[b] = 0;  // ready for the next pass
  }
  __syncthreads();  // the state and the cleared histogram are seen by every thread
}

/// Full read of items [begin, end) of a row: keys below the first bucket are taken, keys in it
/// feed s_hist with their second digit and are kept as candidates where they fit.
template <class L>
__device__ void filter_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, std::int64_t begin,
                            std::int64_t end, row_state* rs, const candidate_lists& lists, histogram& s_hist,
                            std::uint32_t* selected_row, block_storage& storage, block_vars& vars) {
  // What the choice decided, without cand_used, which other blocks count up meanwhile.
  class_state cls[2];
  for (int c = 0; c < 2; ++c) {
    cls[c].mode = rs->cls[c].mode;
    cls[c].prefix = rs->cls[c].prefix;
    cls[c].candidates = rs->cls[c].candidates;
  }
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  // Every thread runs the same number of rounds so the block-wide scan stays in step.
  for (std::int64_t r0 = begin; r0 < end; r0 += 4 * kThreads) {
    const std::int64_t i0 = r0 + 4 * threadIdx.x;
    std::uint32_t take[4];
    int count = 0;
    if (i0 < end) {
      const philox_block kb = keys.block_at(static_cast<std::uint32_t>(i0 >> 2));
      for (int q = 0; q < 4 && i0 + q < end; ++q) {
        const int c = item_class(load_label(row_labels, i0 + q), p.negative_label, p.ignore_label);
        if (c < 0) continue;
        const class_state& cs = cls[c];
        const std::uint32_t key = kb.v[q], idx = static_cast<std::uint32_t>(i0 + q);
        if (cs.mode == static_cast<std::uint32_t>(class_mode::all)) {
          take[count++] = idx;
        } else if (selects(cs)) {
          const std::uint32_t d0 = key >> digit_shift(0);
          if (d0 < cs.prefix) {
            take[count++] = idx;
          } else if (d0 == cs.prefix) {
            atomicAdd(&s_hist[c][(key >> digit_shift(1)) & (kMaxBins - 1)], 1u);
            if (cs.candidates <= lists.cap) {
              const std::uint32_t slot = atomicAdd(&rs->cls[c].cand_used, 1u);
              if (slot < cs.candidates) lists.list[c][slot] = (static_cast<std::uint64_t>(key) << 32) | idx;
              else report_fault(p, fault_kind::candidate_overflow, row, c, slot);
            }
          }
        }
      }
    }
    append_selected(storage, vars, rs, selected_row, count, take, p, row);
  }
  __syncthreads();  // the histogram and the candidates are complete (also when there was no round)
}

/// Visits the items of the first bucket of every selecting class: from the candidate lists when
/// they fit, else by reading the row again; thread `tid` of `stride` visits every stride-th item.
/// fn(class, key, index).
template <class L, class Fn>
__device__ void for_each_candidate(const L* __restrict__ labels, const params_dev& p, std::int64_t row,
                                   const class_state (&cls)[2], const candidate_lists& lists, std::uint32_t tid,
                                   std::uint32_t stride, Fn&& fn) {
  bool reread = false;
  for (int c = 0; c < 2; ++c) {
    if (!selects(cls[c])) continue;
    if (cls[c].candidates > lists.cap) {
      reread = true;
      continue;
    }
    // Only entries the filter wrote (fewer than counted if the labels changed in between).
    const std::uint32_t listed = min(cls[c].candidates, cls[c].cand_used);
    for (std::uint32_t j = tid; j < listed; j += stride)
      fn(c, static_cast<std::uint32_t>(lists.list[c][j] >> 32), static_cast<std::uint32_t>(lists.list[c][j]));
  }
  if (!reread) return;
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  for (std::int64_t i0 = 4 * static_cast<std::int64_t>(tid); i0 < p.n; i0 += 4 * static_cast<std::int64_t>(stride)) {
    const philox_block kb = keys.block_at(static_cast<std::uint32_t>(i0 >> 2));
    for (int q = 0; q < 4 && i0 + q < p.n; ++q) {
      const int c = item_class(load_label(row_labels, i0 + q), p.negative_label, p.ignore_label);
      if (c < 0 || !selects(cls[c]) || cls[c].candidates <= lists.cap) continue;
      if ((kb.v[q] >> digit_shift(0)) == (cls[c].prefix >> (digit_bits(1) + digit_bits(2))))
        fn(c, kb.v[q], static_cast<std::uint32_t>(i0 + q));
    }
  }
}

/// Histogram (into hist, the row's 2 x kMaxBins) of the last digit among the items of the chosen
/// 22-bit bucket.
template <class L>
__device__ void refine_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, const row_state* rs,
                            const candidate_lists& lists, std::uint32_t* hist, std::uint32_t tid, std::uint32_t stride) {
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  // After choose<1>, prefix holds 22 bits; candidates were bucketed on the top 11.
  class_state top[2] = {cls[0], cls[1]};
  for (int c = 0; c < 2; ++c) top[c].prefix = cls[c].prefix << digit_bits(2);  // align to for_each_candidate
  for_each_candidate(labels, p, row, top, lists, tid, stride, [&](int c, std::uint32_t key, std::uint32_t) {
    if ((key >> digit_shift(1)) == cls[c].prefix) atomicAdd(&hist[c * kMaxBins + (key & ((1u << digit_bits(2)) - 1))], 1u);
  });
}

/// Takes the candidates below the threshold T, and the ties at T when every one of them is needed.
template <class L>
__device__ void finish_step(const L* __restrict__ labels, const params_dev& p, std::int64_t row, row_state* rs,
                            const candidate_lists& lists, std::uint32_t* selected_row, std::uint32_t tid,
                            std::uint32_t stride) {
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  for_each_candidate(labels, p, row, cls, lists, tid, stride, [&](int c, std::uint32_t key, std::uint32_t idx) {
    const std::uint32_t threshold = cls[c].prefix;  // all 32 bits after choose<2>
    if (key < threshold || (key == threshold && cls[c].bucket == cls[c].k_rem)) {
      const std::uint32_t at = atomicAdd(&rs->taken, 1u);
      if (at < p.k) selected_row[at] = idx;
      else report_fault(p, fault_kind::selection_overflow, row, c, at);
    }
  });
}

/// Scans items [begin, end) of a row in index order for items of class c whose key is `threshold`.
/// The tie of rank r in the row (r = before + its rank in this range) is written to
/// selected_row[base + r] while r < want; with want > 0 the scan stops once `want` ties are seen.
/// Returns the ties seen in the range (in every thread). want == 0: only counts.
template <class L>
__device__ std::uint32_t scan_ties(const L* __restrict__ labels, const params_dev& p, std::int64_t row, int c,
                                   std::uint32_t threshold, std::int64_t begin, std::int64_t end, std::uint32_t before,
                                   std::uint32_t want, std::uint32_t base, std::uint32_t* selected_row,
                                   block_storage& storage, block_vars& vars) {
  const L* row_labels = labels + row * p.n;
  const philox_stream keys(p.seed, p.offset, static_cast<std::uint64_t>(row), 0);
  if (threadIdx.x == 0) vars.seen = 0;
  __syncthreads();
  for (std::int64_t r0 = begin; r0 < end; r0 += kThreads) {
    const std::int64_t i = r0 + threadIdx.x;
    std::uint32_t flag = 0;
    if (i < end)
      flag = item_class(load_label(row_labels, i), p.negative_label, p.ignore_label) == c &&
             keys.word_at(static_cast<std::uint64_t>(i)) == threshold;
    std::uint32_t rank, total;
    block_scan_u32(storage.scan_u32).ExclusiveSum(flag, rank, total);
    const std::uint32_t seen = vars.seen;
    const std::uint32_t r = before + seen + rank;
    if (flag && r < want) {
      const std::uint32_t at = base + r;
      if (at < p.k) selected_row[at] = static_cast<std::uint32_t>(i);
      else report_fault(p, fault_kind::selection_overflow, row, c, at);
    }
    __syncthreads();  // every thread has read vars.seen; the scan storage is free
    if (threadIdx.x == 0) vars.seen = seen + total;
    __syncthreads();
    if (want > 0 && before + vars.seen >= want) break;  // the same value in every thread
  }
  const std::uint32_t seen = vars.seen;
  __syncthreads();  // vars.seen is read before anyone resets it
  return seen;
}

// ---- several blocks per row: a kernel per pass ----------------------------------------------------

/// This block's part [begin, end) of its row: p.chunk items from blockIdx.x * p.chunk.
struct chunk_range {
  std::int64_t begin, end;
};
__device__ __forceinline__ chunk_range block_chunk(const params_dev& p) {
  const std::int64_t begin = blockIdx.x * p.chunk;
  return {begin, min(p.n, begin + p.chunk)};
}

template <class L>
__global__ void count_hist_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                  std::uint32_t* hist) {
  __shared__ histogram s_hist;
  __shared__ block_storage storage;
  const std::int64_t row = blockIdx.y;
  clear_histogram(s_hist);
  __syncthreads();
  const auto [begin, end] = block_chunk(p);
  unsigned long long bp, bn;
  count_step(labels, p, row, begin, end, s_hist, storage, bp, bn);
  if (threadIdx.x == 0) {
    if (bp) atomicAdd(&states[row].positives, bp);
    if (bn) atomicAdd(&states[row].negatives, bn);
  }
  merge_histogram(s_hist, hist + row * 2 * kMaxBins);
}

template <int Pass>
__global__ void choose_kernel(params_dev p, row_state* states, std::uint32_t* hist) {
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.x;
  choose_step<Pass>(p, row, states[row], hist + row * 2 * kMaxBins, storage, vars);
}

/// The global candidate lists of a row (several blocks per row).
__device__ __forceinline__ candidate_lists row_lists(std::uint64_t* cand, const params_dev& p, std::int64_t row) {
  return {{cand + (row * 2) * p.cand_cap, cand + (row * 2 + 1) * p.cand_cap}, p.cand_cap};
}

template <class L>
__global__ void filter_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint32_t* hist,
                              std::uint64_t* cand, std::uint32_t* selected) {
  __shared__ histogram s_hist;
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.y;
  clear_histogram(s_hist);
  __syncthreads();
  const auto [begin, end] = block_chunk(p);
  filter_step(labels, p, row, begin, end, states + row, row_lists(cand, p, row), s_hist, selected + row * p.k,
              storage, vars);
  merge_histogram(s_hist, hist + row * 2 * kMaxBins);
}

template <class L>
__global__ void refine_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint32_t* hist,
                              std::uint64_t* cand) {
  const std::int64_t row = blockIdx.y;
  refine_step(labels, p, row, states + row, row_lists(cand, p, row), hist + row * 2 * kMaxBins,
              blockIdx.x * kThreads + threadIdx.x, gridDim.x * kThreads);
}

template <class L>
__global__ void finish_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint64_t* cand,
                              std::uint32_t* selected) {
  const std::int64_t row = blockIdx.y;
  finish_step(labels, p, row, states + row, row_lists(cand, p, row), selected + row * p.k,
              blockIdx.x * kThreads + threadIdx.x, gridDim.x * kThreads);
}

/// Tie pass, first half: every block counts the ties at T in its part of the row (into
/// tie_counts[row][class][block]); block 0 notes where the ties go (after the items taken so far).
template <class L>
__global__ void tie_count_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                 std::uint32_t* tie_counts) {
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.y;
  row_state* rs = states + row;
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  if (!needs_tie_pass(cls[0]) && !needs_tie_pass(cls[1])) return;  // the whole block returns
  if (blockIdx.x == 0 && threadIdx.x == 0) rs->tie_base = rs->taken;  // no block of this kernel reads either
  const auto [begin, end] = block_chunk(p);
  for (int c = 0; c < 2; ++c) {
    if (!needs_tie_pass(cls[c])) continue;
    const std::uint32_t seen = scan_ties(labels, p, row, c, cls[c].prefix, begin, end, 0, 0, 0, nullptr, storage, vars);
    if (threadIdx.x == 0) tie_counts[(row * 2 + c) * gridDim.x + blockIdx.x] = seen;
  }
}

/// The sum of counts[j] for j in [0, upto), in every thread of the block.
__device__ std::uint32_t block_sum(const std::uint32_t* counts, std::uint32_t upto, block_storage& storage,
                                   block_vars& vars) {
  unsigned long long mine = 0;
  for (std::uint32_t j = threadIdx.x; j < upto; j += kThreads) mine += counts[j];
  const unsigned long long sum = block_reduce(storage.reduce).Sum(mine);
  if (threadIdx.x == 0) vars.base = static_cast<std::uint32_t>(min(sum, 0xFFFFFFFFull));
  __syncthreads();
  const std::uint32_t out = vars.base;
  __syncthreads();  // vars.base and the storage are free again
  return out;
}

/// Tie pass, second half: every block takes, in index order, the ties of its part whose rank in
/// the row (the ties of the blocks before it plus their rank here) is below what is still needed.
/// A class takes min(k_rem, ties counted): its slots follow the previous class's, and block 0
/// moves taken past both.
template <class L>
__global__ void tie_take_kernel(const L* __restrict__ labels, params_dev p, row_state* states,
                                const std::uint32_t* tie_counts, std::uint32_t* selected) {
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.y;
  row_state* rs = states + row;
  const class_state cls[2] = {rs->cls[0], rs->cls[1]};
  if (!needs_tie_pass(cls[0]) && !needs_tie_pass(cls[1])) return;  // the whole block returns
  const auto [begin, end] = block_chunk(p);
  std::uint32_t base = rs->tie_base;  // no block of this kernel writes it
  for (int c = 0; c < 2; ++c) {
    const class_state& cs = cls[c];
    if (!needs_tie_pass(cs)) continue;
    const std::uint32_t* counts = tie_counts + (row * 2 + c) * gridDim.x;
    const std::uint32_t total = block_sum(counts, gridDim.x, storage, vars);
    const std::uint32_t before = block_sum(counts, blockIdx.x, storage, vars);
    const std::uint32_t want = min(cs.k_rem, total);
    if (before < want) {  // the same in every thread
      const std::uint32_t seen =
          scan_ties(labels, p, row, c, cs.prefix, begin, end, before, want, base, selected + row * p.k, storage, vars);
      // A part scanned to its end must hold the ties it counted (else the labels changed).
      if (threadIdx.x == 0 && before + seen < want && seen != counts[blockIdx.x])
        report_fault(p, fault_kind::ties_short, row, c, before + seen);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0 && total < cs.k_rem) report_fault(p, fault_kind::ties_short, row, c, total);
    base += want;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) rs->taken = base;  // the other blocks read tie_base only
}

// ---- one block per row: every pass in one kernel ---------------------------------------------------

constexpr std::uint32_t kRowCandidates = 512;  // candidates per class kept in shared memory

/// cand: global candidate lists (rows x 2 x p.cand_cap) when p.cand_cap > kRowCandidates (rows
/// longer than 128K items), else null: the lists are kept in shared memory.
template <class L>
__global__ void row_kernel(const L* __restrict__ labels, params_dev p, row_state* states, std::uint64_t* cand,
                           std::uint32_t* selected) {
  __shared__ histogram s_hist;
  __shared__ std::uint64_t s_cand[2][kRowCandidates];
  __shared__ block_storage storage;
  __shared__ block_vars vars;
  const std::int64_t row = blockIdx.y;
  row_state* rs = states + row;
  std::uint32_t* selected_row = selected + row * p.k;
  if (threadIdx.x == 0) *rs = row_state{};
  clear_histogram(s_hist);
  __syncthreads();
  unsigned long long positives, negatives;
  count_step(labels, p, row, 0, p.n, s_hist, storage, positives, negatives);
  if (threadIdx.x == 0) {
    rs->positives = positives;
    rs->negatives = negatives;
  }
  std::uint32_t* hist = &s_hist[0][0];
  choose_step<0>(p, row, *rs, hist, storage, vars);
  const candidate_lists lists = cand != nullptr ? row_lists(cand, p, row)
                                                : candidate_lists{{s_cand[0], s_cand[1]}, min(kRowCandidates, p.cand_cap)};
  filter_step(labels, p, row, 0, p.n, rs, lists, s_hist, selected_row, storage, vars);
  choose_step<1>(p, row, *rs, hist, storage, vars);
  refine_step(labels, p, row, rs, lists, hist, threadIdx.x, kThreads);
  __syncthreads();
  choose_step<2>(p, row, *rs, hist, storage, vars);
  finish_step(labels, p, row, rs, lists, selected_row, threadIdx.x, kThreads);
  __syncthreads();  // every item below T is appended: taken is final but for the ties
  for (int c = 0; c < 2; ++c) {
    const class_state cs = rs->cls[c];
    if (!needs_tie_pass(cs)) continue;
    const std::uint32_t base = rs->taken;
    const std::uint32_t seen = scan_ties(labels, p, row, c, cs.prefix, 0, p.n, 0, cs.k_rem, base, selected_row,
                                         storage, vars);  // ends with a barrier: base is read everywhere
    if (threadIdx.x == 0) {
      if (seen < cs.k_rem) report_fault(p, fault_kind::ties_short, row, c, seen);
      rs->taken = base + min(seen, cs.k_rem);
    }
    __syncthreads();
  }
}

// ---- order: composite (ord(i), i) keys, segment offsets ------------------------------------------

__global__ void order_keys_kernel(params_dev p, const row_state* states, const std::uint32_t* selected,
                                  std::uint64_t* keys_out, int* begin_off, int* end_off) {
  // One row (no segment offsets) is sorted whole over k slots: its unused slots get padding keys.
  const bool pad = begin_off == nullptr;
  const std::int64_t row = blockIdx.y;
  const std::uint32_t taken = min(states[row].taken, static_cast<std::uint32_t>(p.k));
  const philox_stream ord(p.seed, p.offset, static_cast<std::uint64_t>(row), 1);
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (j == 0 && begin_off != nullptr) {
    begin_off[row] = static_cast<int>(row * p.k);
    end_off[row] = static_cast<int>(row * p.k + taken);
  }
  if (j < taken) {
    const std::uint32_t idx = selected[row * p.k + j];
    keys_out[row * p.k + j] = (static_cast<std::uint64_t>(ord.word_at(idx)) << p.index_bits) | idx;
  } else if (pad && j < p.k) {
    keys_out[row * p.k + j] = padding_key(p.index_bits);  // sorts after every real key
  }
}

// ---- write: indices, padding, valid counts, gathers ---------------------------------------------

template <class L, class I>
__global__ void write_kernel(params_dev p, const row_state* states, const std::uint64_t* sorted, const L* labels,
                             I* indices, std::int32_t* valid, L* gathered_labels, const std::byte* features,
                             std::byte* gathered_features, std::size_t feature_bytes) {
  const std::int64_t row = blockIdx.y;
  const std::uint32_t taken = min(states[row].taken, static_cast<std::uint32_t>(p.k));
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (j == 0 && valid != nullptr) valid[row] = static_cast<std::int32_t>(taken);
  if (j >= p.k) return;
  std::int64_t idx = j < taken ? static_cast<std::int64_t>(sorted[row * p.k + j] & ((1ull << p.index_bits) - 1)) : -1;
  if (idx >= p.n) {  // a slot no kernel wrote (inconsistent state): never read past the row
    report_fault(p, fault_kind::bad_index, row, -1, static_cast<std::uint32_t>(j));
    idx = -1;
  }
  indices[row * p.k + j] = static_cast<I>(idx);
  if (gathered_labels != nullptr)
    gathered_labels[row * p.k + j] = idx >= 0 ? labels[row * p.n + idx] : static_cast<L>(p.ignore_label);
  if (gathered_features != nullptr) {
    std::byte* dst = gathered_features + (row * p.k + j) * feature_bytes;
    const std::byte* src = idx >= 0 ? features + (row * p.n + idx) * feature_bytes : nullptr;
    const bool words = feature_bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 4 == 0 &&
                       (src == nullptr || reinterpret_cast<std::uintptr_t>(src) % 4 == 0);
    if (words) {
      for (std::size_t b = 0; b < feature_bytes; b += 4)
        *reinterpret_cast<std::uint32_t*>(dst + b) = src ? *reinterpret_cast<const std::uint32_t*>(src + b) : 0u;
    } else {
      for (std::size_t b = 0; b < feature_bytes; ++b) dst[b] = src ? src[b] : std::byte{0};
    }
  }
}

// ---- host side -----------------------------------------------------------------------------------

int bits_for(std::int64_t n) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) < n) ++bits;
  return bits;
}

/// Candidates kept per row and class for the passes after the first: `knob` (a test's cap) or, by
/// default, about eight times the first bucket a class of n items expects (n / 2048 keys), between
/// 256 and kCandidateCap; at most n, at least 1.
std::uint32_t candidate_cap(std::int64_t n, std::uint32_t knob) {
  const std::int64_t cap = knob != 0 ? knob : std::clamp<std::int64_t>(n / 256, 256, kCandidateCap);
  return static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::min<std::int64_t>(n, cap)));
}

/// How a call splits its rows among blocks, from the shapes and the device's multiprocessor count,
/// never from the data: enough blocks in all to fill the device about four times over, at least
/// 16K items per block, one block per row for short rows or when the rows alone fill the device.
struct plan {
  int blocks_per_row;
  std::int64_t chunk;  // items per block of a row, a multiple of 4
};

plan make_plan(std::int64_t rows, std::int64_t n, int multiprocessors, int forced_blocks_per_row) {
  const std::int64_t target_blocks = 4 * static_cast<std::int64_t>(multiprocessors);
  const std::int64_t by_device = std::max<std::int64_t>(1, target_blocks / std::max<std::int64_t>(1, rows));
  const std::int64_t by_size = std::max<std::int64_t>(1, (n + 16383) / 16384);
  plan pl{};
  pl.blocks_per_row = static_cast<int>(std::min<std::int64_t>({by_device, by_size, 65535}));
  if (forced_blocks_per_row > 0) pl.blocks_per_row = std::min(forced_blocks_per_row, 65535);
  pl.chunk = ((n + pl.blocks_per_row - 1) / pl.blocks_per_row + 3) / 4 * 4;
  return pl;
}

/// The temp storage of a call: the row states, and the rows' selections with their sort keys and
/// CUB's sort storage (both grow with rows x k, like the output). Only when several blocks share a
/// row (at most 2 x multiprocessors rows then) also the global histograms (16 KiB a row), candidate
/// lists and tie counts.
layout make_layout(const sampler_args& a, const sampler_params& p, int index_bits, std::uint32_t cand_cap,
                   const plan& pl) {
  layout l{};
  const auto rows = static_cast<std::size_t>(a.rows), k = static_cast<std::size_t>(p.k);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.state = take(rows * sizeof(row_state));
  if (pl.blocks_per_row > 1) {
    l.hist = take(rows * 2 * kMaxBins * sizeof(std::uint32_t));  // right after the states: one memset
    l.cand = take(rows * 2 * cand_cap * sizeof(std::uint64_t));
    l.tie_counts = take(rows * 2 * static_cast<std::size_t>(pl.blocks_per_row) * sizeof(std::uint32_t));
  } else if (cand_cap > kRowCandidates) {
    // Rows of a block each, longer than shared memory's lists serve (n > 128K): global lists of
    // at most n / 256 keys a class (1/16 byte an item).
    l.cand = take(rows * 2 * cand_cap * sizeof(std::uint64_t));
  }
  // The sort runs on a double buffer (no copy of the keys inside CUB's storage), and the selection,
  // read only before the sort, lives in the buffer the keys are not ordered into first.
  l.keys_in = take(rows * k * sizeof(std::uint64_t));
  l.keys_out = take(rows * k * sizeof(std::uint64_t));
  l.selected = l.keys_out;
  l.begin_off = take(rows * sizeof(int));
  l.end_off = take(rows * sizeof(int));
  l.sort_bytes = 0;
  if (rows == 1 && k > 0) {
    // One row: a device-wide sort of all k slots (unused ones padded) instead of one block.
    cub::DoubleBuffer<std::uint64_t> keys(nullptr, nullptr);
    PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, l.sort_bytes, keys, static_cast<int>(k), 0,
                                                    padded_sort_bits(index_bits)));
  } else if (rows * k > 0) {
    cub::DoubleBuffer<std::uint64_t> keys(nullptr, nullptr);
    PINFEED_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(
        nullptr, l.sort_bytes, keys, static_cast<int>(rows * k), static_cast<int>(rows), static_cast<const int*>(nullptr),
        static_cast<const int*>(nullptr), 0, 32 + index_bits));
  }
  l.sort_temp = take(l.sort_bytes);
  l.total = std::max<std::size_t>(at, 256);
  return l;
}

/// Runs `fn` with this thread's capture mode relaxed, so that a driver query or a one-time
/// allocation does not invalidate a capture another thread runs in global mode.
template <class Fn>
void with_relaxed_capture(Fn&& fn) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  PINFEED_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
  try {
    fn();
  } catch (...) {
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    throw;
  }
  PINFEED_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
}


// ---- fault words: one host-mapped word per device, written by the kernels, read by the host -------

std::mutex g_fault_mutex;
/// Per device index, any index: kept for the process's life (kernels may still write them).
std::map<int, unsigned long long*>& fault_words() {
  static auto* words = new std::map<int, unsigned long long*>();  // never destroyed: read at exit too
  return *words;
}

/// The fault word of `device`, allocated on first use (mapped pinned memory, one per process and
/// device). Allocation is allowed while another stream of this thread is being captured: the
/// thread's capture mode is relaxed for that one call.
unsigned long long* fault_word(int device) {
  std::lock_guard lock(g_fault_mutex);
  auto& words = fault_words();
  if (const auto it = words.find(device); it != words.end()) return it->second;
  void* word = nullptr;
  with_relaxed_capture([&] {
    PINFEED_CUDA_TRY(cudaHostAlloc(&word, sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable));
  });
  *static_cast<volatile unsigned long long*>(word) = 0;
  words.emplace(device, static_cast<unsigned long long*>(word));
  return static_cast<unsigned long long*>(word);
}

/// Throws (once) what the kernels reported in `word` since the last check. Reads host memory only.
void rethrow_fault(unsigned long long* word) {
  if (word == nullptr) return;
  const unsigned long long w = __atomic_exchange_n(word, 0ull, __ATOMIC_ACQ_REL);
  if (w != 0) throw sampler_fault(w, true);
}

int current_device() {
  int device = 0;
  PINFEED_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

/// CUB's two-phase temp storage: with no storage, reports the bytes needed and returns true (the
/// call was a query); otherwise checks the storage is large enough.

template <class L, class I>
void run_pipeline(std::byte* temp, const layout& l, const sampler_args& a, const params_dev& p, cudaStream_t stream,
                  detail::sampler_stage_hook hook, void* hook_ctx) {
  auto* states = reinterpret_cast<row_state*>(temp + l.state);
  auto* hist = reinterpret_cast<std::uint32_t*>(temp + l.hist);
  auto* cand = reinterpret_cast<std::uint64_t*>(temp + l.cand);
  auto* tie_counts = reinterpret_cast<std::uint32_t*>(temp + l.tie_counts);
  auto* selected = reinterpret_cast<std::uint32_t*>(temp + l.selected);
  auto* keys_in = reinterpret_cast<std::uint64_t*>(temp + l.keys_in);
  auto* keys_out = reinterpret_cast<std::uint64_t*>(temp + l.keys_out);
  auto* begin_off = reinterpret_cast<int*>(temp + l.begin_off);
  auto* end_off = reinterpret_cast<int*>(temp + l.end_off);
  const auto* labels = static_cast<const L*>(a.labels);
  const auto rows = static_cast<unsigned>(a.rows);

  if (p.blocks_per_row == 1) {
    // Every pass in one kernel, which also resets the row states (even when n is 0).
    row_kernel<L><<<dim3(1, rows), kThreads, 0, stream>>>(labels, p, states,
                                                           p.cand_cap > kRowCandidates ? cand : nullptr, selected);
    PINFEED_CHECK_LAUNCH();
    if (hook != nullptr) hook(hook_ctx, stream);
  } else {
    PINFEED_CUDA_TRY(cudaMemsetAsync(temp + l.state, 0, l.hist + rows * 2 * kMaxBins * sizeof(std::uint32_t) - l.state,
                                     stream));
    const dim3 grid(static_cast<unsigned>(p.blocks_per_row), rows);
    count_hist_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist);
    PINFEED_CHECK_LAUNCH();
    if (hook != nullptr) hook(hook_ctx, stream);
    choose_kernel<0><<<rows, kThreads, 0, stream>>>(p, states, hist);
    PINFEED_CHECK_LAUNCH();
    filter_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist, cand, selected);
    PINFEED_CHECK_LAUNCH();
    choose_kernel<1><<<rows, kThreads, 0, stream>>>(p, states, hist);
    PINFEED_CHECK_LAUNCH();
    refine_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, hist, cand);
    PINFEED_CHECK_LAUNCH();
    choose_kernel<2><<<rows, kThreads, 0, stream>>>(p, states, hist);
    PINFEED_CHECK_LAUNCH();
    finish_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, cand, selected);
    PINFEED_CHECK_LAUNCH();
    tie_count_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, tie_counts);
    PINFEED_CHECK_LAUNCH();
    tie_take_kernel<L><<<grid, kThreads, 0, stream>>>(labels, p, states, tie_counts, selected);
    PINFEED_CHECK_LAUNCH();
  }
  if (p.k == 0) {
    if (a.valid != nullptr) PINFEED_CUDA_TRY(cudaMemsetAsync(a.valid, 0, rows * sizeof(std::int32_t), stream));
    return;
  }
  const dim3 kgrid(static_cast<unsigned>((p.k + kThreads - 1) / kThreads), rows);
  const bool one_row = rows == 1;
  order_keys_kernel<<<kgrid, kThreads, 0, stream>>>(p, states, selected, keys_in, one_row ? nullptr : begin_off,
                                                    end_off);
  PINFEED_CHECK_LAUNCH();
  std::size_t sort_bytes = l.sort_bytes;
  // Which buffer ends up holding the order is known on the host when the sort is queued.
  cub::DoubleBuffer<std::uint64_t> keys(keys_in, keys_out);
  if (one_row)
    PINFEED_CUDA_TRY(cub::DeviceRadixSort::SortKeys(temp + l.sort_temp, sort_bytes, keys, static_cast<int>(p.k), 0,
                                                    padded_sort_bits(p.index_bits), stream));
  else
    PINFEED_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(temp + l.sort_temp, sort_bytes, keys,
                                                             static_cast<int>(a.rows * p.k), static_cast<int>(rows),
                                                             begin_off, end_off, 0, 32 + p.index_bits, stream));
  write_kernel<L, I><<<kgrid, kThreads, 0, stream>>>(
      p, states, keys.Current(), labels, static_cast<I*>(a.indices), a.valid, static_cast<L*>(a.gathered_labels),
      static_cast<const std::byte*>(a.features), static_cast<std::byte*>(a.gathered_features), a.feature_bytes);
  PINFEED_CHECK_LAUNCH();
}

params_dev make_params(const sampler_args& a, const sampler_params& p, std::uint32_t candidate_knob) {
  params_dev d{};
  d.rows = a.rows;
  d.n = a.n;
  d.k = p.k;
  d.target = positive_target(p);
  d.negative_label = p.negative_label;
  d.ignore_label = p.ignore_label;
  d.seed = p.seed;
  d.offset = p.offset;
  d.mode = p.mode;
  d.cand_cap = candidate_cap(a.n, candidate_knob);
  d.index_bits = bits_for(a.n);
  return d;
}

}  // namespace

namespace detail {

/// True while `stream` is being captured into a graph (also when it is the legacy default stream
/// and a blocking stream of the device is being captured): then nothing that is not capturable may run.
bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  PINFEED_CUDA_TRY(err);
  return status != cudaStreamCaptureStatusNone;
}

/// Every pointer is visible to the device. Not called while the caller's stream is capturing, and
/// run in relaxed capture mode so that another thread's global-mode capture is not disturbed.
void check_device_pointers(const sampler_args& a, const char* who) {
  auto device_visible = [who](const void* ptr, const char* name) {
    if (ptr == nullptr) return;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      (void)cudaGetLastError();
      throw pinfeed::invalid_argument(std::string(who) + ": cannot query pointer " + name);
    }
    if (attr.type == cudaMemoryTypeUnregistered)
      throw pinfeed::invalid_argument(std::string(who) + ": " + name +
                                  " is pageable host memory, not visible to the device");
  };
  with_relaxed_capture([&] {
    device_visible(a.labels, "labels");
    device_visible(a.indices, "indices");
    device_visible(a.valid, "valid");
    device_visible(a.features, "features");
    device_visible(a.gathered_features, "gathered_features");
    device_visible(a.gathered_labels, "gathered_labels");
    device_visible(a.status, "status");
  });
}

bool answer_temp_query(const void* d_temp, std::size_t& temp_bytes, std::size_t needed, const char* who) {
  if (d_temp == nullptr) {
    temp_bytes = needed;
    return true;
  }
  if (temp_bytes < needed)
    throw pinfeed::invalid_argument(std::string(who) + ": temp storage of " + std::to_string(temp_bytes) +
                                " bytes is smaller than the " + std::to_string(needed) + " bytes queried");
  return false;
}

}  // namespace detail

void check_sampler_faults() {
  const int device = current_device();
  unsigned long long* word = nullptr;
  {
    std::lock_guard lock(g_fault_mutex);
    const auto& words = fault_words();
    if (const auto it = words.find(device); it != words.end()) word = it->second;  // none yet: nothing ran
  }
  rethrow_fault(word);
}

void balanced_sample_device(void* d_temp, std::size_t& temp_bytes, const sampler_args& a, const sampler_params& p,
                         cudaStream_t stream) {
  detail::balanced_sample_device_with(d_temp, temp_bytes, a, p, stream, {});
}

void detail::balanced_sample_device_with(void* d_temp, std::size_t& temp_bytes, const sampler_args& a,
                                      const sampler_params& p, cudaStream_t stream, const sampler_knobs& knobs) {
  const bool running = d_temp != nullptr;
  detail::validate_gpu_shapes(a, p, running);
  params_dev d = make_params(a, p, knobs.candidate_cap);
  // The plan, and with it the temp size, depends on the device's multiprocessor count: query on
  // the device the call runs on.
  const int device = current_device();
  const plan pl = make_plan(a.rows, a.n, multiprocessor_count(device), knobs.blocks_per_row);
  d.blocks_per_row = pl.blocks_per_row;
  d.chunk = pl.chunk;
  const layout l = make_layout(a, p, d.index_bits, d.cand_cap, pl);
  if (detail::answer_temp_query(d_temp, temp_bytes, l.total, "balanced sampler (GPU)")) return;
  // A running call: not a size query, which no earlier fault could affect.
  if (!detail::stream_capturing(stream)) detail::check_device_pointers(a, "balanced sampler (GPU)");
  if (a.status != nullptr) {
    // The call's own word: reset on the stream first (a captured graph does so on every replay);
    // the per-device word is left to calls without one.
    PINFEED_CUDA_TRY(cudaMemsetAsync(a.status, 0, sizeof(std::uint64_t), stream));
    d.fault = reinterpret_cast<unsigned long long*>(a.status);
  } else {
    d.fault = fault_word(device);
    rethrow_fault(d.fault);
  }
  if (a.rows == 0) return;
  auto* temp = static_cast<std::byte*>(d_temp);
  const bool l64 = a.label_type == dtype::i64, i64 = a.index_type == dtype::i64;
  if (l64 && i64) run_pipeline<std::int64_t, std::int64_t>(temp, l, a, d, stream, knobs.hook, knobs.hook_ctx);
  else if (l64) run_pipeline<std::int64_t, std::int32_t>(temp, l, a, d, stream, knobs.hook, knobs.hook_ctx);
  else if (i64) run_pipeline<std::int32_t, std::int64_t>(temp, l, a, d, stream, knobs.hook, knobs.hook_ctx);
  else run_pipeline<std::int32_t, std::int32_t>(temp, l, a, d, stream, knobs.hook, knobs.hook_ctx);
}

}  // namespace pinfeed::ops
