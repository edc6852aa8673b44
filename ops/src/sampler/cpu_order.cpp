// The CPU sampler's ordering of a row's selection (cpu_order.hpp).
#include "cpu_order.hpp"

#include <algorithm>
#include <array>

namespace pinfeed::ops::cpu_sampler {

/// Sorts distinct 64-bit items whose top bits are uniformly random (a Philox key above a position)
/// in increasing order: two stable radix passes order them by their top 2b bits, and one
/// insertion pass orders what shares those (about n^2 / 2^(2b+1) pairs, so it rarely moves
/// anything). b is 8 up to 2^15 items: the 256 write positions of a pass stay in L1, where 2048
/// spread over 128 KiB and each write waited on L2 (a quarter faster at 10^4 items). Past that,
/// b = 11, so that the insertion pass stays short.
void sort_random_keyed(std::vector<std::uint64_t>& v, std::vector<std::uint64_t>& scratch) {
  const std::size_t n = v.size();
  if (n < 256) {
    std::sort(v.begin(), v.end());
    return;
  }
  const int bits = n <= (std::size_t{1} << 15) ? 8 : 11;
  const std::size_t buckets = std::size_t{1} << bits;
  const std::uint64_t mask = buckets - 1;
  const int shifts[2] = {64 - 2 * bits, 64 - bits};
  std::array<std::uint32_t, 2 * 2048> count{};  // both histograms in one read
  for (const std::uint64_t x : v) {
    ++count[(x >> shifts[0]) & mask];
    ++count[buckets + (x >> shifts[1])];
  }
  scratch.resize(n);
  for (int pass = 0; pass < 2; ++pass) {
    std::uint32_t* c = count.data() + pass * buckets;
    const int shift = shifts[pass];
    std::uint32_t sum = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::uint32_t t = c[b];
      c[b] = sum;
      sum += t;
    }
    for (const std::uint64_t x : v) scratch[c[(x >> shift) & mask]++] = x;
    v.swap(scratch);
  }
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint64_t x = v[i];
    if (v[i - 1] <= x) continue;
    std::size_t j = i;
    do {
      v[j] = v[j - 1];
      --j;
    } while (j > 0 && v[j - 1] > x);
    v[j] = x;
  }
}

/// Within runs of equal order keys (the high words of `order`, sorted), puts the items in
/// increasing index (sel[position]) order.
void order_ties_by_index(std::vector<std::uint64_t>& order, const std::vector<std::uint32_t>& sel) {
  const std::size_t n = order.size();
  for (std::size_t j = 1; j < n; ++j) {
    if ((order[j] >> 32) != (order[j - 1] >> 32)) continue;
    std::size_t end = j + 1;
    while (end < n && (order[end] >> 32) == (order[j] >> 32)) ++end;
    std::sort(order.begin() + static_cast<std::ptrdiff_t>(j - 1), order.begin() + static_cast<std::ptrdiff_t>(end),
              [&](std::uint64_t x, std::uint64_t y) { return sel[x & 0xFFFFFFFFu] < sel[y & 0xFFFFFFFFu]; });
    j = end - 1;
  }
}

}  // namespace pinfeed::ops::cpu_sampler
