#pragma once
// Helpers shared by the transforms' files (internal).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::loaders::detail {

inline std::string shape_text(const image_spec& s) {
  return std::to_string(s.height) + "x" + std::to_string(s.width) + "x" + std::to_string(s.channels) + " " +
         std::string(dtype_name(s.type));
}

inline void require_type(const transform& t, const image_spec& in, bool allow_float) {
  if (in.type != dtype::u8 && !(allow_float && in.type == dtype::f32))
    throw pinfeed::invalid_argument(t.name() + ": unsupported input " + shape_text(in));
}

/// The checks of an augmentation step: uint8 (or, where `allow_float`, float) images of 1 or 3
/// channels, refused naming the step and the input otherwise.
inline void require_grey_or_rgb(const transform& t, const image_spec& in, bool allow_float = false) {
  require_type(t, in, allow_float);
  if (in.channels != 1 && in.channels != 3)
    throw pinfeed::invalid_argument(t.name() + ": needs 1 or 3 channels, input is " + shape_text(in));
}

/// The number `text` starts with (after spaces), as strtod reads it, and in `used` the characters
/// it took (0: no number). Unlike std::stod it does not throw for a value past the double's range:
/// below the least normal double it gives that value (or 0), past the largest an infinity.
inline double read_number(const std::string& text, std::size_t& used) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  used = static_cast<std::size_t>(end - text.c_str());
  return v;
}
/// read_number() where only the value counts.
inline double read_number(const std::string& text) {
  std::size_t used = 0;
  return read_number(text, used);
}

/// Shortest text that reads back as the same float (names must round-trip through the parser).
inline std::string format_number(double v) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    const double back = read_number(os.str());
    if (back == v || static_cast<float>(back) == static_cast<float>(v)) return os.str();
  }
  return std::to_string(v);
}

/// Shortest text that reads back as the same double (for values used in double, the warps').
inline std::string format_double(double v) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    if (read_number(os.str()) == v) return os.str();
  }
  return std::to_string(v);
}

/// A value drawn uniformly from [lo, hi) (torch's uniform_(lo, hi): 24 random bits).
inline double uniform_between(philox_stream& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng.uniform());
}

/// Copies the window [y0, y0 + h) x [x0, x0 + w) of `in` to `out`.
inline void copy_window(const image_view& in, const image_view& out, std::int64_t y0, std::int64_t x0) {
  const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
  for (std::int64_t y = 0; y < out.spec.height; ++y)
    std::memcpy(out.data + static_cast<std::size_t>(y * out.spec.width) * px,
                in.data + (static_cast<std::size_t>((y0 + y) * in.spec.width + x0)) * px,
                static_cast<std::size_t>(out.spec.width) * px);
}

/// Bilinear resize of an 8-bit (or float) HWC window of `in` to out's shape (uint8: pinfeed's
/// arithmetic, pinfeed/ops/resize.hpp; float: OpenCV), mirrored left to right where `flip`. In
/// resize.cpp.
void resize_window(const image_view& in, std::int64_t y0, std::int64_t x0, std::int64_t h, std::int64_t w,
                   const image_view& out, bool flip = false);

/// A size argument of the parser: a positive integer (up to 1e9), else std::invalid_argument.
inline std::int64_t size_argument(const std::string& name, double v) {
  if (!(v > 0 && v <= 1e9) || v != std::floor(v))  // the range first: a cast of 5e59 is undefined
    throw pinfeed::invalid_argument(name + " needs a positive integer size");
  return static_cast<std::int64_t>(v);
}

}  // namespace pinfeed::loaders::detail
