#pragma once
// What the colour and histogram ops share on the host (internal): their argument checks and the
// float-to-sample conversion.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../augment/aug_math.hpp"
#include "pinfeed/runtime/detail/clones.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops::samples {

inline void check(const char* op, const std::uint8_t* in, std::int64_t pixels, int channels, const std::uint8_t* out) {
  if (channels != 1 && channels != 3)
    throw pinfeed::invalid_argument(std::string(op) + ": images of 1 or 3 channels, not " + std::to_string(channels));
  if (pixels < 0) throw pinfeed::invalid_argument(std::string(op) + ": a negative pixel count " + std::to_string(pixels));
  if (pixels > 0 && (in == nullptr || out == nullptr)) throw pinfeed::invalid_argument(std::string(op) + ": a null image");
}

inline void check_factor(const char* op, double factor) {
  if (!(factor >= 0.0) || !std::isfinite(factor))
    throw pinfeed::invalid_argument(std::string(op) + ": the factor must be finite and not negative, not " +
                                    std::to_string(factor));
}

/// A float in [0, 255] (or past it) to a sample: clamped, then truncated (aug_math.hpp's, as the device's).
using aug::to_u8;

}  // namespace pinfeed::ops::samples
