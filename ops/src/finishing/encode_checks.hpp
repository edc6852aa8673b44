#pragma once
// Internal: the argument checks that the host and the device versions of the encode ops and of
// normalize share (defined in finishing.cpp). Each throws std::invalid_argument naming the bad value.

#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/normalize.hpp"

namespace pinfeed::ops::detail {

void validate_one_hot(const one_hot_args& a);
void validate_bits(const void* in, const void* out, bit_planes_shape s, const char* what);
/// Both versions load and store whole elements: `p` (argument `name` of `what`) must be aligned to
/// `align` bytes, its element size.
void validate_alignment(const void* p, std::size_t align, const char* what, const char* name);
/// normalize's checks (params, pointers, the output's alignment) and its coefficients (out = a * x
/// + b per channel); false when the shape is empty: nothing to do.
bool validate_normalize(const void* in, const void* out, image_batch_shape shape, const normalize_params& params,
                        float a[3], float b[3]);

}  // namespace pinfeed::ops::detail
