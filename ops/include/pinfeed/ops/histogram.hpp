#pragma once
/// @file histogram.hpp
/// pinfeed's histogram ops on 8-bit images (rows of pixels, 1 or 3 samples a pixel, packed):
/// torchvision.transforms.v2.functional's autocontrast and equalize on a uint8 tensor on the CPU,
/// stated here (as colour.hpp states its ops: F(x) a sample as a float, f32 rounding to float32,
/// trunc toward zero after a clamp to [0, 255]).
///
/// - autocontrast: per channel, lo and hi its least and greatest sample; lo == hi: as it is; else
///   trunc(clamp(f32((F(x) - F(lo)) / f32(f32(F(hi - lo)) f32(1/255))), 0, 255)) (a float division:
///   the greatest sample becomes 254 for most ranges, as torchvision's does).
/// - equalize: per channel, hist its 256 counts, cum their running sums, top the greatest sample,
///   step = floor((N - hist[top]) / 255); step 0: as it is; else lut[0] = 0, lut[k] =
///   min(255, floor((cum[k - 1] + floor(step / 2)) / step)), out = lut[x] (integers: PIL's scheme).

#include <cstdint>

namespace pinfeed::ops {

/// Each takes `pixels` pixels of `channels` (1 or 3) samples at `in` and writes as many to `out`
/// (which may be `in`). Throws std::invalid_argument naming the value for channels other than 1
/// or 3, a negative count, or a null pointer with pixels > 0.
void autocontrast_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out);
void equalize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out);

}  // namespace pinfeed::ops
