// RandomMask: random pixels, dilated to their 4 neighbours, set to 0.
#include <string>
#include <vector>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
using namespace detail;
namespace {

class mask_transform final : public transform {
 public:
  explicit mask_transform(double ratio) : ratio_(ratio) {
    if (!(ratio >= 0.0 && ratio <= 1.0))
      throw pinfeed::invalid_argument("mask: ratio must be in [0, 1], got " + format_number(ratio));
    threshold_ = ratio >= 1.0 ? 0xFFFFFFFFull + 1 : static_cast<std::uint64_t>(std::floor(ratio * 4294967296.0));
  }
  std::string name() const override { return "mask(" + format_number(ratio_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return in;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const auto pixels = static_cast<std::size_t>(h * w);
    auto& words = pinfeed::detail::thread_scratch<std::vector<std::uint32_t>, struct mask_words>();
    auto& pick = pinfeed::detail::thread_scratch<std::vector<std::uint8_t>, struct mask_pick>();
    words.resize((pixels + 3) / 4 * 4);
    pick.resize(pixels);
    // Pixel p is picked when word p of the stream is below ratio * 2^32.
    philox_words(rng, 0, words.size() / 4, words.data());
    for (std::size_t p = 0; p < pixels; ++p) pick[p] = words[p] < threshold_;
    // 4-neighbour dilation, row by row, as byte ORs the compiler vectorizes.
    auto& dilated = pinfeed::detail::thread_scratch<std::vector<std::uint8_t>, struct mask_dilated>();
    dilated.resize(pixels);
    for (std::int64_t y = 0; y < h; ++y) {
      const std::uint8_t* row = pick.data() + y * w;
      const std::uint8_t* up = y > 0 ? row - w : row;
      const std::uint8_t* down = y + 1 < h ? row + w : row;
      std::uint8_t* d = dilated.data() + y * w;
      for (std::int64_t x = 0; x < w; ++x) d[x] = row[x] | up[x] | down[x];
      for (std::int64_t x = 1; x < w; ++x) d[x] |= row[x - 1];
      for (std::int64_t x = 0; x + 1 < w; ++x) d[x] |= row[x + 1];
    }
    if (in.spec.type == dtype::u8 && in.spec.channels == 3) {
      const auto* src = in.as<std::uint8_t>();
      auto* dst = out.as<std::uint8_t>();
      for (std::size_t p = 0; p < pixels; ++p) {
        const std::uint8_t keep = static_cast<std::uint8_t>(dilated[p] - 1);  // 0xFF kept, 0x00 masked
        dst[3 * p] = src[3 * p] & keep;
        dst[3 * p + 1] = src[3 * p + 1] & keep;
        dst[3 * p + 2] = src[3 * p + 2] & keep;
      }
      return;
    }
    const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
    if (in.data != out.data) std::memcpy(out.data, in.data, pixels * px);
    for (std::size_t p = 0; p < pixels; ++p)
      if (dilated[p]) std::memset(out.data + p * px, 0, px);
  }
  bool in_place() const override { return true; }  // every element is read before it is written

 private:
  double ratio_;
  std::uint64_t threshold_;
};

}  // namespace

std::shared_ptr<transform> make_random_mask(double ratio) { return std::make_shared<mask_transform>(ratio); }

void add_random_mask_kinds(std::vector<transform_kind>& kinds) {
  kinds.push_back({{"mask", "random_mask"}, 1, 1, "mask(R)", [](std::span<const double> a) { return make_random_mask(a[0]); }});
}

}  // namespace pinfeed::loaders
