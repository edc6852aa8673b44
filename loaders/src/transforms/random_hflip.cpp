// RandomHorizontalFlip.
#include <string>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

/// In place, uint8 RGB: swaps pixel x with pixel w - 1 - x.
void flip_rgb_in_place(std::byte* data, std::int64_t h, std::int64_t w) {
  for (std::int64_t y = 0; y < h; ++y) {
    std::byte* row = data + static_cast<std::size_t>(y * w) * 3;
    for (std::int64_t x = 0; x < w / 2; ++x) {
      std::byte* l = row + 3 * x;
      std::byte* r = row + 3 * (w - 1 - x);
      const std::byte l0 = l[0], l1 = l[1], l2 = l[2];
      l[0] = r[0];
      l[1] = r[1];
      l[2] = r[2];
      r[0] = l0;
      r[1] = l1;
      r[2] = l2;
    }
  }
}

/// In place, pixels of `px` bytes.
void flip_in_place(std::byte* data, std::int64_t h, std::int64_t w, std::size_t px) {
  std::byte tmp[64];
  for (std::int64_t y = 0; y < h; ++y) {
    std::byte* row = data + static_cast<std::size_t>(y * w) * px;
    for (std::int64_t x = 0; x < w / 2; ++x) {
      std::byte* l = row + static_cast<std::size_t>(x) * px;
      std::byte* r = row + static_cast<std::size_t>(w - 1 - x) * px;
      if (px <= sizeof tmp) {
        std::memcpy(tmp, l, px);
        std::memcpy(l, r, px);
        std::memcpy(r, tmp, px);
      } else {
        std::swap_ranges(l, l + px, r);
      }
    }
  }
}

/// uint8 RGB into another buffer: byte moves the compiler can keep in registers.
void flip_rgb(const std::byte* in, std::byte* out, std::int64_t h, std::int64_t w) {
  for (std::int64_t y = 0; y < h; ++y) {
    const std::byte* src = in + static_cast<std::size_t>(y * w) * 3;
    std::byte* dst = out + static_cast<std::size_t>(y * w) * 3;
    for (std::int64_t x = 0; x < w; ++x) {
      const std::byte* s = src + (w - 1 - x) * 3;
      dst[3 * x] = s[0];
      dst[3 * x + 1] = s[1];
      dst[3 * x + 2] = s[2];
    }
  }
}

/// Pixels of `px` bytes into another buffer.
void flip_any(const std::byte* in, std::byte* out, std::int64_t h, std::int64_t w, std::size_t px) {
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      std::memcpy(out + static_cast<std::size_t>(y * w + x) * px, in + static_cast<std::size_t>(y * w + (w - 1 - x)) * px, px);
}

class hflip_transform final : public transform {
 public:
  explicit hflip_transform(double p) : p_(p) {
    if (!(p >= 0.0 && p <= 1.0)) throw pinfeed::invalid_argument("hflip: probability must be in [0, 1], got " + format_number(p));
  }
  std::string name() const override { return "hflip(" + format_number(p_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return in;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const bool flip = *mirrors(rng);
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
    if (!flip) {
      if (in.data != out.data) std::memcpy(out.data, in.data, static_cast<std::size_t>(h * w) * px);
    } else if (in.data == out.data) {
      if (px == 3) flip_rgb_in_place(out.data, h, w);
      else flip_in_place(out.data, h, w, px);
    } else {
      if (px == 3) flip_rgb(in.data, out.data, h, w);
      else flip_any(in.data, out.data, h, w, px);
    }
  }
  bool in_place() const override { return true; }
  std::string explain(const image_spec&, philox_stream rng) const override { return *mirrors(rng) ? "hflip(1)" : ""; }
  std::optional<bool> mirrors(philox_stream rng) const override {
    return static_cast<double>(rng.next_u32()) < p_ * 4294967296.0;
  }

 private:
  double p_;
};


}  // namespace

std::shared_ptr<transform> make_random_hflip(double p) { return std::make_shared<hflip_transform>(p); }

void add_random_hflip_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"hflip", "random_hflip"}, 0, 1, "hflip[(P)]",
                   [](std::span<const double> a) { return make_random_hflip(a.empty() ? 0.5 : a[0]); }});
}

}  // namespace pinfeed::loaders
