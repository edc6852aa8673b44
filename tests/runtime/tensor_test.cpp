// tensor (runtime).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/stats.hpp"
#include "pinfeed/runtime/tensor.hpp"
#include "pinfeed/version.hpp"
#include "test_util.hpp"

using namespace pinfeed;

using test::scoped_env;

TEST_CASE("tensor.dtypes") {
  CHECK(dtype_size(dtype::u8) == 1);
  CHECK(dtype_size(dtype::bf16) == 2);
  CHECK(dtype_size(dtype::i64) == 8);
  for (auto t : {dtype::u8, dtype::i8, dtype::u16, dtype::i16, dtype::i32, dtype::u32, dtype::i64, dtype::u64,
                 dtype::f16, dtype::bf16, dtype::f32, dtype::f64})
    CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK(parse_dtype("f32") == dtype::f32);
  CHECK_THROWS_WITH_AS((void)parse_dtype("complex64"), doctest::Contains("complex64"), std::invalid_argument);
  field_spec f{"img", dtype::u16, {4, 5, 3}};
  CHECK(f.elements() == 60);
  CHECK(f.bytes() == 120);
  field_spec scalar{"label", dtype::i64, {}};
  CHECK(scalar.bytes() == 8);
}
