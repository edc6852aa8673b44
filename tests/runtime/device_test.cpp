// device (runtime).
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
