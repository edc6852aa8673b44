#pragma once
// Internal: the argument checks that the host and the device versions of the encode ops share
// (defined in normalize.cpp). Each throws std::invalid_argument naming the bad value.

#include "pinfeed/ops/encode.hpp"

namespace pinfeed::ops::detail {

void validate_one_hot(const one_hot_args& a);
void validate_bits(const void* in, const void* out, bit_planes_args s, const char* what);
/// Both versions load and store whole elements: `p` (argument `name` of `what`) must be aligned to
/// `align` bytes, its element size.
void validate_alignment(const void* p, std::size_t align, const char* what, const char* name);

}  // namespace pinfeed::ops::detail
