// The steps a pipeline_source runs on the GPU (augment_on), host side (loaders/src/device_augment.cpp):
// which steps move and which are refused, and why; and a CPU oracle of the whole path: the slot a
// CPU loader fills (the pixels before those steps, each sample's jobs) is put in rounds as before the
// copy, then run by augment_batch_host (what the kernels compute, bit for bit), and must equal the
// host pipeline's images byte for byte.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hybrid_fixtures.hpp"
#include "pinfeed/ops/augment.hpp"

using namespace pinfeed;
using loaders::augment_place;
using loaders::decode_place;

namespace {


std::string refusal_of(const test::hybrid_folder& f, decode_place d, const std::string& steps, augment_place a,
                       bool device_tail = true) {
  try {
    (void)f.source(d, steps, a, device_tail);
  } catch (const pinfeed::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("device_augment.places_parse_and_the_steps_after_the_decode_move") {
  CHECK(loaders::parse_augment_place("device") == augment_place::device);
  CHECK(loaders::parse_augment_place("auto") == augment_place::automatic);
  CHECK(std::string(loaders::to_string(augment_place::host)) == "host");
  CHECK_THROWS_WITH_AS((void)loaders::parse_augment_place("gpu"), "augment place 'gpu' is not one of host, device, auto",
                       pinfeed::invalid_argument);
  const test::hybrid_folder f;
  const std::string steps = "random_resized_crop(16),hflip,trivial_augment,equalize,rotate(30,0,interpolation=bilinear)";
  const auto src = f.source(decode_place::host, steps, augment_place::device);
  CHECK(src->augment_path() == augment_place::device);
  CHECK(src->host_steps().to_string() == "rrc(16,0.08,1,0.75,1.33333333),hflip(0.5)");
  CHECK(src->device_steps().to_string() == "trivial_augment,equalize,rotate(30,0,interpolation=bilinear)");
  CHECK(src->name().find("-> on the device: trivial_augment,equalize,rotate(30,0,interpolation=bilinear)") != std::string::npos);
  const auto fields = src->fields();
  REQUIRE(fields.size() == 3);  // image, label, aug_jobs
  CHECK(fields[2].name == "aug_jobs");
  CHECK(fields[2].scratch);
  CHECK(fields[2].bytes() == 3 * sizeof(ops::aug_job));  // one job a round: 1 + 1 + 1
  // What a CUDA loader counts in its budget: a second image field and the counts, per batch size.
  const auto mem = src->device_memory(8);
  REQUIRE(mem.size() == 1);
  CHECK(mem[0].bytes == 8 * 16 * 16 * 3 + ops::aug_scratch_bytes(8));
  // A CPU loader is refused, naming the steps and the way out.
  CHECK_THROWS_WITH_AS(loader(src, test::cpu_loader(4, 1, 1)),
                       doctest::Contains("on the device (augment_on device), but the loader's batches stay on the cpu: use augment_on host"),
                       pinfeed::invalid_argument);
  // auto follows the decode: on the host here (and decode auto resolves to the host without a GPU).
  for (const auto d : {decode_place::host, decode_place::automatic}) {
    const auto a = f.source(d, steps);
    CHECK(a->augment_path() == augment_place::host);
    CHECK(a->device_steps().empty());
    CHECK(a->augment_refusal().empty());
    CHECK(a->fields().size() == 2);
  }
  // decode device: auto moves them, and the decode's steps are the window and the flip alone.
  const auto dev = f.source(decode_place::device, steps);
  CHECK(dev->decode_path() == decode_place::device);
  CHECK(dev->augment_path() == augment_place::device);
  CHECK(dev->device_steps().to_string() == "trivial_augment,equalize,rotate(30,0,interpolation=bilinear)");
  // With nothing after the window and the flips, nothing moves and nothing is refused.
  const auto none = f.source(decode_place::host, "center_crop(16),hflip", augment_place::device);
  CHECK(none->augment_path() == augment_place::host);
  CHECK(none->augment_refusal().empty());
}

TEST_CASE("device_augment.pipelines_it_cannot_take_are_refused_by_name") {
  const test::hybrid_folder f;
  CHECK(refusal_of(f, decode_place::host, "random_resized_crop(16),gaussian_blur(3),invert", augment_place::device) ==
        "pipeline_source: augment_on device: step gaussian_blur(3,0.8) has no device form");
  CHECK(refusal_of(f, decode_place::host, "center_crop(16),invert,grayscale(1)", augment_place::device) ==
        "pipeline_source: augment_on device: step grayscale(1) changes the image's shape, which the device's steps keep");
  CHECK(refusal_of(f, decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2)", augment_place::device,
                   false) ==
        "pipeline_source: augment_on device: the colour/scale tail is fused on the host (leave it to the consumer: device_tail)");
  CHECK(refusal_of(f, decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2),mixup(0.2,num_classes=12)",
                   augment_place::device, false)
            .find("augment_on device: the ") != std::string::npos);
  // The tail left to the consumer stays after the device's steps.
  const auto tail = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2)", augment_place::device);
  CHECK(tail->device_steps().to_string() == "invert");
  CHECK(tail->tail_params().has_value());
  // auto with decode device and a step without a device form: the decode refuses, saying what would move.
  CHECK(refusal_of(f, decode_place::device, "random_resized_crop(16),gaussian_blur(3)", augment_place::automatic)
            .find("step gaussian_blur(3,0.8) runs after the window: only flips may follow it in the decode (augment_on device or "
                  "auto moves the steps with a device form after them to the GPU)") != std::string::npos);
  // auto with decode host and the same steps: on the host, and why not the device is kept.
  const auto kept = f.source(decode_place::host, "random_resized_crop(16),gaussian_blur(3)", augment_place::automatic);
  CHECK(kept->augment_path() == augment_place::host);
  CHECK(kept->augment_refusal() == "step gaussian_blur(3,0.8) has no device form");
}

TEST_CASE("device_augment.jobs_drawn_on_the_workers_give_the_host_pipelines_pixels") {
  // Policies, the deterministic steps, the random ones, both interpolations, a fill; a sample whose
  // ops are fewer than the rounds gets copies after them.
  const test::hybrid_folder f;
  int compared = 0;
  for (const char* steps :
       {"random_resized_crop(16),hflip,trivial_augment", "random_resized_crop(16),rand_augment(2,9),equalize,solarize(100)",
        "random_resized_crop(16),auto_augment(imagenet),color_jitter(0.4,0.4,0.4,0.1),random_grayscale(0.5)",
        "random_resized_crop(16),hflip,trivial_augment(interpolation=bilinear,fill=77),random_rotation(45),"
        "random_affine(30,0.2,0.1,0.8,1.2,10),autocontrast,sharpness(1.7),posterize(3),hue(0.2),brightness(1.3),contrast(0.6),"
        "saturation(1.4),invert,shear_x(0.2),translate_y(3),affine(10,1,2,1.1,5,3,128,interpolation=bilinear)",
        "random_resized_crop(16),trivial_augment,random_erasing(0.9,0.05,0.5,value=random),random_erasing(0.8,value=200)"}) {
    CAPTURE(steps);
    loader host(f.source(decode_place::host, steps, augment_place::host), test::cpu_loader(4, 2, 11));
    const auto inner = f.source(decode_place::host, steps, augment_place::device);
    REQUIRE(inner->augment_path() == augment_place::device);
    loader dev(std::make_shared<test::any_loader>(inner), test::cpu_loader(4, 2, 11));
    const auto specs = dev.fields();
    const std::size_t rounds = specs[2].bytes() / sizeof(ops::aug_job);
    while (auto want = host.next()) {
      auto got = dev.next();
      REQUIRE(got.has_value());
      const std::size_t n = got->field_count();
      std::vector<std::byte*> fields(n);
      for (std::size_t i = 0; i < n; ++i) fields[i] = static_cast<std::byte*>(got->field(i).data);
      std::vector<const std::uint64_t*> extents(n, nullptr);
      std::vector<std::uint64_t> used(n, 0);
      inner->before_copy(slot_view{specs, fields, {}, extents, used, got->size(), got->index(), nullptr, -1});
      const auto image = got->field("image");
      std::vector<std::uint8_t> spare(image.bytes());
      auto* px = static_cast<std::uint8_t*>(image.data);
      const std::vector<std::uint8_t> before(px, px + image.bytes());
      ops::augment_batch_host(reinterpret_cast<const ops::aug_job*>(fields[2]), got->size(), rounds, px, spare.data(), image.bytes());
      const auto w = want->field("image");
      const auto* wp = static_cast<const std::uint8_t*>(w.data);
      CHECK(std::vector<std::uint8_t>(px, px + image.bytes()) == std::vector<std::uint8_t>(wp, wp + w.bytes()));
      CHECK(std::vector<std::uint8_t>(px, px + image.bytes()) != before);  // the jobs did something
      CHECK(checksum_line(*got) == checksum_line(*want));  // aug_jobs is scratch: not in the line
      ++compared;
    }
    CHECK(!dev.next().has_value());
  }
  CHECK(compared == 5 * 3);  // 12 files in batches of 4, five pipelines
}

TEST_CASE("device_augment.erasing_jobs_on_float_images_give_the_steps_pixels_in_both_layouts") {
  // random_erasing after normalize: each sample's job (drawn as the step draws) run by
  // erase_float_host equals the step's own result, HWC as the step writes it and CHW as the
  // fused tail lays it out; noise and values, grey and RGB, boxes drawn or not.
  int erased = 0, compared = 0;
  for (const char* steps : {"random_erasing(0.7,0.02,0.4)", "random_erasing(0.7,0.05,0.3,0.5,2,value=random)",
                            "random_erasing(1,0.1,0.2,value=37.5)"}) {
    CAPTURE(steps);
    const auto step = loaders::parse_pipeline(steps).steps()[0];
    for (const int c : {1, 3})
      for (std::uint64_t index = 0; index < 12; ++index) {
        const loaders::image_spec spec{19 + static_cast<std::int64_t>(index), 26, c, dtype::f32};
        const std::size_t n = static_cast<std::size_t>(spec.height * spec.width * c);
        std::vector<float> in(n);
        philox_stream r(3, 0, index);
        for (auto& v : in) v = r.uniform() * 4.0f - 2.0f;
        std::vector<float> want = in;
        const philox_stream rng(11, 2, index, 104);
        step->apply({reinterpret_cast<std::byte*>(in.data()), spec}, {reinterpret_cast<std::byte*>(want.data()), spec}, rng);
        const auto jobs = step->device_jobs(spec, rng);
        REQUIRE(jobs.has_value());
        REQUIRE(jobs->size() <= 1);
        const ops::aug_job job = jobs->empty() ? ops::aug_job_of(ops::aug_op::identity, 0, static_cast<std::uint32_t>(spec.height), 26,
                                                                 c, ops::interpolation::nearest, std::nullopt)
                                               : jobs->front();
        std::vector<float> hwc = in;
        ops::erase_float_host(&job, 1, hwc.data(), n, ops::mix_layout::hwc);
        CHECK(std::memcmp(hwc.data(), want.data(), n * sizeof(float)) == 0);
        const auto to_chw = [&](const std::vector<float>& v) {
          std::vector<float> out(n);
          for (std::int64_t y = 0; y < spec.height; ++y)
            for (std::int64_t x = 0; x < spec.width; ++x)
              for (int k = 0; k < c; ++k)
                out[static_cast<std::size_t>((k * spec.height + y) * spec.width + x)] = v[static_cast<std::size_t>((y * spec.width + x) * c + k)];
          return out;
        };
        std::vector<float> chw = to_chw(in);
        ops::erase_float_host(&job, 1, chw.data(), n, ops::mix_layout::chw);
        CHECK(std::memcmp(chw.data(), to_chw(want).data(), n * sizeof(float)) == 0);
        erased += want != in ? 1 : 0;
        ++compared;
      }
  }
  CHECK(compared == 72);
  CHECK(erased > 40);  // most samples drew a box (p 0.7, 0.7 and 1)
  // A job of another kind is refused, naming it.
  const ops::aug_job warp = ops::aug_job_for(ops::aug_op::rotate, 30, 4, 4, 3, ops::interpolation::nearest, std::nullopt);
  std::vector<float> img(48);
  CHECK_THROWS_WITH_AS(ops::erase_float_host(&warp, 1, img.data(), 48, ops::mix_layout::hwc),
                       "erase job of sample 0: a warp job, where float images take erase or copy", pinfeed::invalid_argument);
}
