#pragma once
// The CPU sampler's ordering of a row's selection: a sort of random-keyed items, and ties of the
// order key put in index order.

#include <cstdint>
#include <vector>

namespace pinfeed::ops::cpu_sampler {

/// Sorts distinct 64-bit items whose top bits are uniformly random in increasing order (scratch:
/// reused storage).
void sort_random_keyed(std::vector<std::uint64_t>& v, std::vector<std::uint64_t>& scratch);

/// Within runs of equal order keys (the high words of `order`, sorted), puts the items in
/// increasing index (sel[position]) order.
void order_ties_by_index(std::vector<std::uint64_t>& order, const std::vector<std::uint32_t>& sel);

}  // namespace pinfeed::ops::cpu_sampler
