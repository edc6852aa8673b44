// nvJPEG for decode device-inexact, loaded at run time (loaders/src/nvjpeg_library.cpp): a library
// that is missing or lacks an entry point is named; backends are tried in turn and every failure
// names nvJPEG's status; a batch the hardware backend refuses goes to the hybrid one; files are
// routed by what each backend takes; and a source asking for it keeps the device path's rules.
// Against a stand-in library (tests/loaders/fake_nvjpeg.cpp): a GPU runner checks the real one.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hybrid_fixtures.hpp"
#include "jpeg_scan.hpp"
#include "nvjpeg_library.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders::detail;

namespace {

/// The stand-in's controls, found in the library loaded.
struct fake {
  void (*set)(int, int);
  int (*calls)(int);
  int (*handles)();
  void (*reset)();
  explicit fake(const nvjpeg_library& lib)
      : set(reinterpret_cast<void (*)(int, int)>(dlsym(lib.so, "fake_nvjpeg_set"))),
        calls(reinterpret_cast<int (*)(int)>(dlsym(lib.so, "fake_nvjpeg_calls"))),
        handles(reinterpret_cast<int (*)()>(dlsym(lib.so, "fake_nvjpeg_handles"))),
        reset(reinterpret_cast<void (*)()>(dlsym(lib.so, "fake_nvjpeg_reset"))) {
    REQUIRE((set != nullptr && calls != nullptr && handles != nullptr && reset != nullptr));
    reset();
  }
};

std::unique_ptr<nvjpeg_library> fake_library() {
  std::string why;
  auto lib = load_nvjpeg_from({PINFEED_FAKE_NVJPEG}, why);
  REQUIRE_MESSAGE(lib != nullptr, why);
  return lib;
}

}  // namespace

TEST_CASE("nvjpeg.a_missing_library_or_entry_point_is_named") {
  std::string why;
  CHECK(load_nvjpeg_from({"/nonexistent/libnvjpeg.so.13", "libnvjpeg-none.so.1"}, why) == nullptr);
  CHECK(why.find("/nonexistent/libnvjpeg.so.13") != std::string::npos);
  CHECK(why.find("libnvjpeg-none.so.1") != std::string::npos);
  why.clear();
  CHECK(load_nvjpeg_from({PINFEED_FAKE_NVJPEG_PARTIAL}, why) == nullptr);
  CHECK(why == std::string(PINFEED_FAKE_NVJPEG_PARTIAL) + " lacks nvjpegDecodeBatched");
  // The first file that loads is taken.
  why.clear();
  const auto lib = load_nvjpeg_from({"/nonexistent/libnvjpeg.so.13", PINFEED_FAKE_NVJPEG}, why);
  REQUIRE(lib != nullptr);
  CHECK(lib->path == PINFEED_FAKE_NVJPEG);
}

TEST_CASE("nvjpeg.backends_are_tried_in_turn_and_failures_name_the_status") {
  const auto lib = fake_library();
  fake f(*lib);
  // No backend: both statuses named.
  f.set(0, 7);
  f.set(1, 6);
  CHECK_THROWS_WITH_AS((void)nvjpeg_decoder::open(-1, lib.get()),
                       doctest::Contains("hardware backend NVJPEG_STATUS_ARCH_MISMATCH (7), hybrid backend "
                                         "NVJPEG_STATUS_EXECUTION_FAILED (6)"),
                       pinfeed::runtime_error);
  // No JPEG engines: the hybrid backend.
  f.set(1, 0);
  {
    const auto d = nvjpeg_decoder::open(-1, lib.get());
    CHECK(std::string(d->backend()) == "hybrid");
    CHECK_FALSE(d->hardware());
    const auto s = d->make_state();
    const unsigned char* data[2] = {nullptr, nullptr};
    const std::size_t lengths[2] = {1, 1};
    nvjpeg::image out[2]{};
    d->decode(*s, data, lengths, out, 2, nullptr);
    d->decode(*s, data, lengths, out, 2, nullptr);  // the same batch size: initialized once
    CHECK(f.calls(3) == 1);
    d->decode(*s, data, lengths, out, 1, nullptr);  // another size: initialized again
    CHECK(f.calls(3) == 2);
    CHECK(f.calls(5) == 3);
    f.set(5, 3);
    CHECK_THROWS_WITH_AS(d->decode(*s, data, lengths, out, 2, nullptr),
                         doctest::Contains("nvjpegDecodeBatched (hybrid backend) failed on 2 images: NVJPEG_STATUS_BAD_JPEG (3)"),
                         pinfeed::runtime_error);
    f.set(5, 0);
    CHECK(f.calls(3) == 3);  // size 2 again after 1
    d->decode(*s, data, lengths, out, 2, nullptr);  // a failed batch resets the state: initialized again
    CHECK(f.calls(3) == 4);
  }
  CHECK(f.handles() == 0);
}

TEST_CASE("nvjpeg.a_batch_the_hardware_backend_refuses_goes_to_the_hybrid_one") {
  const auto lib = fake_library();
  fake f(*lib);
  {
    const auto d = nvjpeg_decoder::open(-1, lib.get());
    CHECK(std::string(d->backend()) == "hardware");
    CHECK(d->hardware());
    const auto s = d->make_state();
    const unsigned char* data[1] = {nullptr};
    const std::size_t lengths[1] = {1};
    nvjpeg::image out[1]{};
    d->decode(*s, data, lengths, out, 1, nullptr);
    CHECK(f.calls(4) == 1);
    CHECK(f.calls(1) == 0);  // no hybrid handle until one is needed
    f.set(4, 4);             // NVJPEG_STATUS_JPEG_NOT_SUPPORTED
    d->decode(*s, data, lengths, out, 1, nullptr);
    CHECK(f.calls(1) == 1);
    CHECK(f.calls(5) == 1);
    CHECK(f.handles() == 2);
    f.set(5, 6);
    CHECK_THROWS_WITH_AS(d->decode(*s, data, lengths, out, 1, nullptr),
                         doctest::Contains("hardware backend NVJPEG_STATUS_JPEG_NOT_SUPPORTED (4), hybrid backend "
                                           "NVJPEG_STATUS_EXECUTION_FAILED (6)"),
                         pinfeed::runtime_error);
  }
  CHECK(f.handles() == 0);
  CHECK(nvjpeg::status_name(42) == "NVJPEG_STATUS_an unknown status (42)");
}

TEST_CASE("nvjpeg.files_go_where_each_backend_takes_them") {
  const auto& l = test::jpeg_layouts();
  loaders::jpeg_encode_options progressive, arithmetic;
  progressive.progressive = true;
  arithmetic.arithmetic = true;
  const auto baseline = test::jpeg_file(40, 30, 1, l[2], {});       // 4:2:0
  const auto p420 = test::jpeg_file(40, 30, 2, l[2], progressive);  // the engines take one baseline scan only
  const auto s411 = test::jpeg_file(40, 30, 3, l[4], {});           // 4:1:1: not the engines'
  const auto grey = test::jpeg_file(40, 30, 4, l[5], {});
  const auto arith = test::jpeg_file(40, 30, 5, l[2], arithmetic);
  CHECK(nvjpeg_takes(baseline, true));
  CHECK(nvjpeg_takes(grey, true));
  CHECK_FALSE(nvjpeg_takes(p420, true));
  CHECK(nvjpeg_takes(p420, false));
  CHECK_FALSE(nvjpeg_takes(s411, true));
  CHECK(nvjpeg_takes(s411, false));
  CHECK_FALSE(nvjpeg_takes(arith, false));
  const std::vector<std::byte> png{std::byte{0x89}, std::byte{'P'}, std::byte{'N'}, std::byte{'G'}};
  CHECK_FALSE(nvjpeg_takes(png, false));
  CHECK_FALSE(nvjpeg_takes(std::span<const std::byte>(baseline).first(40), false));  // headers cut short
}

TEST_CASE("nvjpeg.device_inexact_keeps_the_device_paths_rules") {
  const test::hybrid_folder f;
  loaders::pipeline_source_options o;
  o.decode = loaders::decode_place::device_inexact;
  const auto src = std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(f.files),
                                                              loaders::parse_pipeline("random_resized_crop(16),hflip"), o);
  CHECK(src->decode_path() == loaders::decode_place::device_inexact);
  const auto fields = src->fields();
  REQUIRE(fields.back().name == "jpeg_files");  // after the device path's four
  CHECK(fields[fields.size() - 5].name == "jpeg_plan");
  CHECK(fields.back().variable);
  CHECK(fields.back().scratch);
  CHECK(src->decoded().nvjpeg.empty());  // no loader yet
  CHECK_THROWS_WITH_AS(loader(src, test::cpu_loader(4, 1, 3)), doctest::Contains("use decode host"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loaders::pipeline_source(loaders::make_image_files_reader(f.files), loaders::parse_pipeline("center_crop(16),mask(0.25)"), o),
                       doctest::Contains("JPEGs cannot be decoded on the device"), std::invalid_argument);
  // A tail the host would fuse runs on the device after nvJPEG's decode, as after the exact one's.
  CHECK(loaders::pipeline_source(loaders::make_image_files_reader(f.files), loaders::parse_pipeline("center_crop(16),normalize(0.5,0.5,0.5,0.2,0.2,0.2)"), o)
            .finishes_on_device());
}

TEST_CASE("nvjpeg.the_real_library_loads_and_says_why_it_cannot_start") {
  // NVIDIA's libnvjpeg from PyPI (scripts/fetch-nvjpeg.sh, which the GPU bundle's step runs first):
  // every entry point pinfeed calls is there, and without a GPU nvjpegCreateEx fails, named.
  const std::string path = PINFEED_REAL_NVJPEG;
#if !defined(__x86_64__)
  test::skip_case("the fetched libnvjpeg is x86_64's");
  return;
#endif
  if (!std::filesystem::exists(path)) {
    test::skip_case("no " + path + " (scripts/fetch-nvjpeg.sh fetches it)");
    return;
  }
  std::string why;
  const auto lib = load_nvjpeg_from({path}, why);
  REQUIRE_MESSAGE(lib != nullptr, why);
  if (cuda_devices().usable) {
    const auto d = nvjpeg_decoder::open(0, lib.get());
    MESSAGE("nvJPEG's backend here: " << d->backend());
    CHECK((std::string(d->backend()) == "hardware" || std::string(d->backend()) == "hybrid"));
  } else {
    CHECK_THROWS_WITH_AS((void)nvjpeg_decoder::open(-1, lib.get()),
                         doctest::Contains("hardware backend NVJPEG_STATUS_"), pinfeed::runtime_error);
  }
}
