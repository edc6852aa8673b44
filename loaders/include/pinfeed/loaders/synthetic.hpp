#pragma once
/// @file synthetic.hpp
/// A synthetic image workload: a random RGB image (1024x1024 by default)
/// and a random class label per index, both drawn from the sample's Philox stream, so every run,
/// worker count and machine produces the same bytes. The whole image is materialized for every
/// sample: that cost is part of the workload.

#include <cstdint>
#include <memory>

#include "pinfeed/runtime/source.hpp"

namespace pinfeed::loaders {

struct synthetic_options {
  std::uint64_t samples = 10000;
  std::int64_t height = 1024;
  std::int64_t width = 1024;
  std::int64_t classes = 1000;
};

/// Fields: "image" uint8 [height, width, 3] (random bytes from substream 0) and "label" int64 []
/// (uniform in [0, classes) from substream 1). Throws std::invalid_argument naming a non-positive
/// option.
[[nodiscard]] std::shared_ptr<source> make_synthetic_source(const synthetic_options& options);

}  // namespace pinfeed::loaders
