// The sampler's argument checks (sampler.hpp, detail/sampler_checks.hpp), shared by the host and
// device versions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

std::int64_t positive_target(const sampler_params& p) noexcept {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(p.k) * p.positive_fraction));
}

namespace detail {
void validate_shapes(const sampler_args& a, const sampler_params& p) {
  auto fail = [](const std::string& what) { throw pinfeed::invalid_argument("balanced sampler: " + what); };
  if (p.k < 0) fail("k must be >= 0, got " + std::to_string(p.k));
  if (!(p.positive_fraction >= 0.0 && p.positive_fraction <= 1.0))
    fail("positive_fraction must be in [0, 1], got " + std::to_string(p.positive_fraction));
  if (p.negative_label == p.ignore_label)
    fail("negative_label and ignore_label are both " + std::to_string(p.negative_label));
  if (a.rows < 0) fail("rows must be >= 0, got " + std::to_string(a.rows));
  if (a.n < 0) fail("n must be >= 0, got " + std::to_string(a.n));
  if (a.n > 0xFFFFFFFFll) fail("n must be below 2^32, got " + std::to_string(a.n));
  if (a.label_type != dtype::i32 && a.label_type != dtype::i64)
    fail("labels must be int32 or int64, got " + std::string(dtype_name(a.label_type)));
  if (a.index_type != dtype::i32 && a.index_type != dtype::i64)
    fail("indices must be int32 or int64, got " + std::string(dtype_name(a.index_type)));
  if (a.index_type == dtype::i32 && a.n > 0x7FFFFFFFll)
    fail("int32 indices cannot address n = " + std::to_string(a.n) + " items");
  if (a.label_type == dtype::i32) {
    const auto fits = [](std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
    if (!fits(p.negative_label) || !fits(p.ignore_label))
      fail("negative_label/ignore_label do not fit int32 labels");
  }
  if (a.features != nullptr && a.feature_bytes == 0) fail("features given with feature_bytes = 0");
}

void validate_gpu_shapes(const sampler_args& a, const sampler_params& p, bool running) {
  validate_shapes(a, p);
  if (running) validate(a, p);
  if (p.k > 0x7FFFFFFFll)
    throw pinfeed::invalid_argument("balanced sampler (GPU): k = " + std::to_string(p.k) + " exceeds 2^31 - 1");
  if (a.rows * std::max<std::int64_t>(p.k, 1) > 0x7FFFFFFFll)
    throw pinfeed::invalid_argument("balanced sampler (GPU): rows * k = " + std::to_string(a.rows * p.k) +
                                " exceeds 2^31 - 1");
  if (a.rows > 65535)
    throw pinfeed::invalid_argument("balanced sampler (GPU): rows = " + std::to_string(a.rows) +
                                " exceeds 65535 per call; split the batch");
}

}  // namespace detail

void validate(const sampler_args& a, const sampler_params& p) {
  detail::validate_shapes(a, p);
  auto fail = [](const std::string& what) { throw pinfeed::invalid_argument("balanced sampler: " + what); };
  const bool work = a.rows > 0;
  if (work && a.n > 0 && a.labels == nullptr) fail("labels is a null pointer");
  if (work && p.k > 0 && a.indices == nullptr) fail("indices is a null pointer");
  if (a.status != nullptr && reinterpret_cast<std::uintptr_t>(a.status) % alignof(std::uint64_t) != 0)
    fail("status is not aligned to 8 bytes");
  if (work && p.k > 0 && a.features != nullptr && a.gathered_features == nullptr)
    fail("features given but gathered_features is a null pointer");
  // With n = 0 there is nothing to gather from: an empty feature array may well be a null pointer.
  if (a.features == nullptr && a.gathered_features != nullptr && a.n > 0)
    fail("gathered_features given without features");
}

}  // namespace pinfeed::ops
