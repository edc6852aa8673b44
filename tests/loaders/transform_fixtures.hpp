#pragma once
// Images the transform tests make and run steps on.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::test {

struct owned_image {
  std::vector<std::byte> bytes;
  loaders::image_spec spec;
  loaders::image_view view() { return {bytes.data(), spec}; }
};

/// An h x w RGB image of Philox bytes.
inline owned_image random_image(std::int64_t h, std::int64_t w, std::uint64_t seed) {
  owned_image im{std::vector<std::byte>(static_cast<std::size_t>(h * w * 3)), {h, w, 3, dtype::u8}};
  fill_random_bytes(philox_stream(seed, 0, 0), im.bytes);
  return im;
}

/// Transform t applied to `in` out of place.
inline owned_image run_step(const loaders::transform& t, const owned_image& in, philox_stream rng) {
  const loaders::image_spec out_spec = t.output_spec(in.spec);
  owned_image out{std::vector<std::byte>(out_spec.bytes()), out_spec};
  t.apply(loaders::image_view{const_cast<std::byte*>(in.bytes.data()), in.spec}, out.view(), rng);
  return out;
}

}  // namespace pinfeed::test
