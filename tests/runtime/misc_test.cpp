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

TEST_CASE("device.discovery_without_gpu_is_a_normal_state") {
  const auto& s = cuda_devices();
#if PINFEED_WITH_CUDA
  CHECK(s.runtime_version >= 12000);
#else
  // A CPU-only build: no device, and the reason says the build has no CUDA.
  CHECK_FALSE(s.usable);
  CHECK(s.reason.find("built without CUDA") != std::string::npos);
#endif
  if (!s.usable) {
    CHECK_FALSE(s.reason.empty());
    CHECK(s.devices.empty());
    CHECK_FALSE(resolve_device("auto").is_cuda());
    CHECK_THROWS_WITH_AS((void)resolve_device("cuda"), doctest::Contains("no CUDA device is usable"),
                         std::runtime_error);
  } else {
    CHECK(resolve_device("auto").is_cuda());
    CHECK_THROWS_WITH_AS((void)resolve_device("cuda:4096"), doctest::Contains("does not exist"), std::runtime_error);
  }
  CHECK(resolve_device("cpu").to_string() == "cpu");
  CHECK(&cuda_devices() == &s);  // discovered once
}

TEST_CASE("device.spelling_and_local_rank") {
  CHECK_THROWS_WITH_AS((void)resolve_device("tpu"), doctest::Contains("'tpu'"), std::invalid_argument);
  CHECK_THROWS_AS((void)resolve_device("cuda:"), std::invalid_argument);
  CHECK_THROWS_AS((void)resolve_device("cuda:-1"), std::invalid_argument);
  CHECK_THROWS_AS((void)resolve_device("cuda:1x"), std::invalid_argument);
  // The spelling is checked once, where the spec is made: an option assignment fails there.
  const device_spec three = "cuda:3";
  CHECK(three.which() == device_spec::kind::cuda);
  CHECK(three.index() == 3);
  CHECK(three.to_string() == "cuda:3");
  CHECK(three == device_spec::cuda(3));
  CHECK(device_spec("cuda").to_string() == "cuda:0");
  CHECK(device_spec().which() == device_spec::kind::automatic);
  CHECK(device_spec("local_rank").to_string() == "local_rank");
  CHECK_THROWS_WITH_AS((void)device_spec::cuda(-2), doctest::Contains("cuda:-2"), std::invalid_argument);
  loader_options o;
  CHECK(o.device.to_string() == "auto");
  CHECK_THROWS_WITH_AS(o.device = "gpu0", doctest::Contains("unknown device 'gpu0'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(o.device = "cuda:99999999999", doctest::Contains("expected cuda:N"), std::invalid_argument);
  CHECK(o.device.to_string() == "auto");  // a failed assignment leaves the option as it was
  CHECK_THROWS_AS(device_spec("cuda:+1"), std::invalid_argument);
  CHECK_THROWS_AS(device_spec("cuda: 1"), std::invalid_argument);
  const char* unset = nullptr;  // getenv of an unset variable, say
  CHECK_THROWS_WITH_AS(device_spec{unset}, doctest::Contains("(null)"), std::invalid_argument);
  {
    scoped_env a("LOCAL_RANK", "4294967297");  // would wrap to 1 as an int
    CHECK_THROWS_WITH_AS((void)local_rank_from_env(), doctest::Contains("at most 2147483647"), std::invalid_argument);
  }
  {
    scoped_env a("LOCAL_RANK", nullptr), b("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), c("SLURM_LOCALID", nullptr);
    CHECK(local_rank_from_env() == -1);
    CHECK_THROWS_WITH_AS((void)resolve_device("local_rank"), doctest::Contains("LOCAL_RANK"), std::runtime_error);
  }
  {
    scoped_env a("LOCAL_RANK", nullptr), b("OMPI_COMM_WORLD_LOCAL_RANK", "3"), c("SLURM_LOCALID", "5");
    CHECK(local_rank_from_env() == 3);
  }
  {
    scoped_env a("LOCAL_RANK", nullptr), b("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), c("SLURM_LOCALID", "5");
    CHECK(local_rank_from_env() == 5);
  }
  {
    scoped_env a("LOCAL_RANK", "two");
    CHECK_THROWS_WITH_AS((void)local_rank_from_env(), doctest::Contains("LOCAL_RANK='two'"), std::invalid_argument);
  }
}

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

TEST_CASE("error.cuda_error_carries_call_location_and_message") {
  try {
    PINFEED_CUDA_TRY(cudaErrorInvalidValue);
    FAIL("must throw");
  } catch (const cuda_error& e) {
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(e.call() == "cudaErrorInvalidValue");
    CHECK(e.line() > 0);
    const std::string w = e.what();
    CHECK(w.find("cudaErrorInvalidValue") != std::string::npos);
    CHECK(w.find("misc_test.cpp") != std::string::npos);
    CHECK(w.find(cudaGetErrorString(cudaErrorInvalidValue)) != std::string::npos);
  }
  // The nothrow variant only logs.
  CHECK_NOTHROW(PINFEED_CUDA_TRY_NOTHROW(cudaErrorInvalidValue));
  const sample_error se(12, "decode", "/data/x.jpg", "truncated");
  CHECK(std::string(se.what()) == "sample 12 (/data/x.jpg) failed in stage 'decode': truncated");
}

TEST_CASE("host_memory.pageable_is_page_aligned_and_pinned_needs_gpu") {
  host_buffer h(10000, false);
  CHECK(reinterpret_cast<std::uintptr_t>(h.data()) % page_size() == 0);
  CHECK(h.size() == 10000);
  std::memset(h.data(), 7, h.size());
  host_buffer moved(std::move(h));
  CHECK(moved.data() != nullptr);
  CHECK(h.data() == nullptr);  // NOLINT: moved-from state is specified
  if (!cuda_devices().usable) CHECK_THROWS_AS(host_buffer(4096, true), cuda_error);
  host_buffer empty(0, false);
  CHECK(empty.data() == nullptr);
}

TEST_CASE("checksum.hash_bytes") {
  const char a[] = "pinfeed keeps gpus fed";
  CHECK(hash_bytes(a, sizeof a) == hash_bytes(a, sizeof a));
  char b[sizeof a];
  std::memcpy(b, a, sizeof a);
  b[20] ^= 1;
  CHECK(hash_bytes(a, sizeof a) != hash_bytes(b, sizeof b));
  CHECK(hash_bytes(a, 8) != hash_bytes(a, 9));  // the tail counts
  CHECK(hash_bytes(a, 0) != hash_bytes(a, 0, 1));
}

TEST_CASE("stats.counters_and_fractions") {
  stage_stats s;
  s.add(stage::produce, 1000);
  s.add(stage::produce, 3000);
  s.add(stage::consumer_wait, 500);
  s.add_batch(4, 400);
  auto snap = s.snapshot();
  CHECK(snap[stage::produce].count == 2);
  CHECK(snap[stage::produce].total_ns == 4000);
  CHECK(snap[stage::produce].max_ns == 3000);
  snap.wall_ns = 1000;
  CHECK(snap.consumer_wait_fraction() == doctest::Approx(0.5));
  CHECK(snap.samples_per_s() == doctest::Approx(4e6));
  snap.wall_ns = 0;
  CHECK(snap.consumer_wait_fraction() == 0.0);
  trace_recorder t(2);
  t.record(stage::copy, 0, 10);
  t.record(stage::copy, 10, 10);
  t.record(stage::copy, 20, 10);
  CHECK(t.size() == 2);
  CHECK(t.dropped() == 1);
}

TEST_CASE("version.header_matches_the_project") {
  // pinfeed/version.hpp is generated from the project's version; the tool and the package agree.
  CHECK(PINFEED_VERSION == PINFEED_VERSION_MAJOR * 10000 + PINFEED_VERSION_MINOR * 100 + PINFEED_VERSION_PATCH);
  CHECK(std::string(PINFEED_VERSION_STRING) == std::to_string(PINFEED_VERSION_MAJOR) + "." +
                                                   std::to_string(PINFEED_VERSION_MINOR) + "." +
                                                   std::to_string(PINFEED_VERSION_PATCH));
}
