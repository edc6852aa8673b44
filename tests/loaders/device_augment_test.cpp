// The steps a pipeline_source runs on the GPU (augment_on), host side (loaders/src/device_augment.cpp):
// which steps move and which are refused, and why; and a CPU oracle of the whole path: the slot a
// CPU loader fills (the pixels before those steps, each sample's jobs) is put in rounds as before the
// copy, then run by augment_batch_host (what the kernels compute, bit for bit), and must equal the
// host pipeline's images byte for byte.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <span>
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

/// A CPU loader's batch as the copy hooks see it: its fields as the host slot, no device.
struct hook_slot {
  std::vector<std::byte*> fields;
  std::vector<const std::uint64_t*> extents;
  std::vector<std::uint64_t> used;
  explicit hook_slot(const batch& b) : fields(b.field_count()), extents(b.field_count(), nullptr), used(b.field_count(), 0) {
    for (std::size_t i = 0; i < fields.size(); ++i) fields[i] = static_cast<std::byte*>(b.field(i).data);
  }
  [[nodiscard]] slot_view view(std::span<const field_spec> specs, const batch& b, std::uint64_t seed) const {
    return {specs, fields, {}, extents, used, b.size(), b.index(), nullptr, -1, seed, b.epoch()};
  }
};

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
  CHECK(refusal_of(f, decode_place::host, "random_resized_crop(16),mask(0.25),invert", augment_place::device) ==
        "pipeline_source: augment_on device: step mask(0.25) has no device form");
  CHECK(refusal_of(f, decode_place::host, "center_crop(16),invert,grayscale(1)", augment_place::device) ==
        "pipeline_source: augment_on device: step grayscale(1) changes the image's shape, which the device's steps keep");
  // A batch op after a tail no fused op expresses (two scales): nothing makes its floats on the device.
  CHECK(refusal_of(f, decode_place::host, "center_crop(16),invert,scale,scale,mixup(0.2,num_classes=12)", augment_place::device, false) ==
        "pipeline_source: augment_on device: the batch op mixup(0.2,num_classes=12) mixes floats no fused tail makes on the device");
  // The tail left to the consumer stays after the device's steps.
  const auto tail = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2)", augment_place::device);
  CHECK(tail->device_steps().to_string() == "invert");
  CHECK(tail->tail_params().has_value());
  // auto with decode device and a step without a device form: the decode refuses, saying what would move.
  CHECK(refusal_of(f, decode_place::device, "random_resized_crop(16),mask(0.25)", augment_place::automatic)
            .find("step mask(0.25) runs after the window: only flips may follow it in the decode (augment_on device or "
                  "auto moves the steps with a device form after them to the GPU)") != std::string::npos);
  // auto with decode host and the same steps: on the host, and why not the device is kept.
  const auto kept = f.source(decode_place::host, "random_resized_crop(16),mask(0.25)", augment_place::automatic);
  CHECK(kept->augment_path() == augment_place::host);
  CHECK(kept->augment_refusal() == "step mask(0.25) has no device form");
}

TEST_CASE("device_augment.jobs_drawn_on_the_workers_give_the_host_pipelines_pixels") {
  // Policies, the deterministic steps, the random ones (blurs too), both interpolations, a fill; a sample whose
  // ops are fewer than the rounds gets copies after them.
  const test::hybrid_folder f;
  int compared = 0;
  for (const char* steps :
       {"random_resized_crop(16),hflip,trivial_augment", "random_resized_crop(16),rand_augment(2,9),equalize,solarize(100),gaussian_blur(5,1.3),random_gaussian_blur(3,0.1,2)",
        "random_resized_crop(16),auto_augment(imagenet),color_jitter(0.4,0.4,0.4,0.1),random_grayscale(0.5)",
        "random_resized_crop(16),hflip,trivial_augment(interpolation=bilinear,fill=77),random_rotation(45),"
        "random_affine(30,0.2,0.1,0.8,1.2,10),autocontrast,sharpness(1.7),posterize(3),hue(0.2),brightness(1.3),contrast(0.6),"
        "saturation(1.4),invert,shear_x(0.2),translate_y(3),affine(10,1,2,1.1,5,3,128,interpolation=bilinear),gaussian_blur(3,0.8,7,2.5)",
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
      const hook_slot slot(*got);
      const auto& fields = slot.fields;
      inner->before_copy(slot.view(specs, *got, 11));
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

TEST_CASE("device_augment.the_tail_and_the_batch_op_run_on_the_device_after_its_steps") {
  const test::hybrid_folder f;
  // The float CHW images the host's fused tail would make: made on the device from the copied
  // pixels (device_only), and the batch op after them there too.
  const auto owed = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2)", augment_place::device, false);
  CHECK(owed->finishes_on_device());
  CHECK_FALSE(owed->tail_on_host());
  CHECK_FALSE(owed->tail_params().has_value());
  REQUIRE(owed->device_tail_params().has_value());
  CHECK(owed->device_tail_params()->std[0] == 0.2f);
  CHECK(owed->name().find("-> on the device: invert -> fused tail (device, CHW float)") != std::string::npos);
  const auto fields = owed->fields();
  REQUIRE(fields.size() == 4);  // image, label, pixels, aug_jobs
  CHECK((fields[0].name == "image" && fields[0].device_only && fields[0].type == dtype::f32 &&
         fields[0].shape == std::vector<std::int64_t>{3, 16, 16}));
  CHECK((fields[2].name == "pixels" && fields[2].scratch && !fields[2].device_only && fields[2].type == dtype::u8 &&
         fields[2].shape == std::vector<std::int64_t>{16, 16, 3}));
  CHECK(fields[3].name == "aug_jobs");
  // A CPU loader is refused: the image is made on the GPU.
  CHECK_THROWS_AS((void)loader(owed, test::cpu_loader(4, 1, 11)), pinfeed::invalid_argument);
  // The tail left to the consumer, with a batch op: run on the device before the op.
  const auto mixed = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2),mixup(0.2,num_classes=12)",
                              augment_place::device, true);
  CHECK(mixed->finishes_on_device());
  REQUIRE(mixed->batch_op().has_value());
  CHECK(mixed->batch_op()->layout == ops::mix_layout::chw);
  // ... and on the host where the steps stay there: the tail cannot be left to the consumer.
  const auto host = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2),mixup(0.2,num_classes=12)",
                             augment_place::host, true);
  CHECK_FALSE(host->finishes_on_device());
  CHECK(host->tail_on_host());
  CHECK(host->fields()[0].shape == std::vector<std::int64_t>{3, 16, 16});
  // No tail owed and no batch op: the consumer's tail, as before.
  const auto consumer = f.source(decode_place::host, "center_crop(16),invert,normalize(0.5,0.5,0.5,0.2,0.2,0.2)", augment_place::device, true);
  CHECK_FALSE(consumer->finishes_on_device());
  CHECK(consumer->tail_params().has_value());
}

TEST_CASE("device_augment.a_cpu_oracle_of_the_device_tail_and_batch_op_gives_the_host_pipelines_batches") {
  // The slot a CPU loader fills on the device path (pixels, jobs), put in rounds as before the
  // copy, then what after_copy runs, by the host twins: the jobs, the fused tail into the image
  // field, the batch op (finish_batch on the host slot). Its checksum lines must be the host
  // pipeline's: the same images and soft labels, bit for bit.
  const test::hybrid_folder f;
  int compared = 0;
  for (const auto& [steps, device_tail] : std::vector<std::pair<const char*, bool>>{
           {"random_resized_crop(16),hflip,trivial_augment,normalize(0.485,0.456,0.406,0.229,0.224,0.225)", false},
           {"random_resized_crop(16),rand_augment(2,9),random_erasing(0.8,value=random),scale,mixup_cutmix(0.8,1,num_classes=12)", true},
           {"random_resized_crop(16),equalize,ycbcr,normalize(0.5,0.4,0.3,0.2,0.25,0.3),cutmix(0.7,num_classes=12)", false},
           {"random_resized_crop(16),trivial_augment,normalize(0.485,0.456,0.406,0.229,0.224,0.225),random_erasing(0.9,value=random),"
            "random_erasing(0.9,0.1,0.2,value=3)",
            true}}) {
    CAPTURE(steps);
    loader host(f.source(decode_place::host, steps, augment_place::host, device_tail), test::cpu_loader(4, 2, 11));
    const auto inner = f.source(decode_place::host, steps, augment_place::device, device_tail);
    REQUIRE(inner->finishes_on_device());
    loader dev(std::make_shared<test::any_loader>(inner), test::cpu_loader(4, 2, 11));
    const auto specs = dev.fields();
    std::size_t pixels = 0, jobs = 0, tail_jobs = 0;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name == "pixels") pixels = i;
      if (specs[i].name == "aug_jobs") jobs = i;
      if (specs[i].name == "tail_jobs") tail_jobs = i;
    }
    CHECK((tail_jobs > 0) == !inner->float_steps().empty());
    REQUIRE((pixels > 0 && jobs > 0));
    const std::size_t rounds = specs[jobs].bytes() / sizeof(ops::aug_job);
    while (auto want = host.next()) {
      auto got = dev.next();
      REQUIRE(got.has_value());
      const hook_slot slot(*got);
      const auto& fields = slot.fields;
      const slot_view view = slot.view(specs, *got, 11);
      inner->before_copy(view);
      const auto px = got->field(pixels);
      auto* p = static_cast<std::uint8_t*>(px.data);
      std::vector<std::uint8_t> spare(px.bytes());
      ops::augment_batch_host(reinterpret_cast<const ops::aug_job*>(fields[jobs]), got->size(), rounds, p, spare.data(), px.bytes());
      ops::normalize_hwc_to_chw_host({p, fields[0], {got->size(), 16, 16}}, *inner->device_tail_params());
      if (tail_jobs > 0)  // erasing on the tail's floats, round by round
        for (std::size_t r = 0; r < specs[tail_jobs].bytes() / sizeof(ops::aug_job); ++r)
          ops::erase_float_host(reinterpret_cast<const ops::aug_job*>(fields[tail_jobs]) + r * got->size(), got->size(),
                                reinterpret_cast<float*>(fields[0]), got->size() * 3 * 16 * 16, ops::mix_layout::chw);
      inner->finish_batch(view);  // the batch op, on the host slot
      CHECK(checksum_line(*got) == checksum_line(*want));
      ++compared;
    }
    CHECK(!dev.next().has_value());
  }
  CHECK(compared == 4 * 3);
}

TEST_CASE("device_augment.erasing_after_normalize_runs_after_the_fused_tail_on_its_chw_floats") {
  // On the host: the fused tail, then the erasing on its CHW images (what torchvision's recipes
  // erase), each sample's box and noise as the step draws them on the step's HWC floats.
  const test::hybrid_folder f;
  const std::string tail = "random_resized_crop(16),hflip,normalize(0.485,0.456,0.406,0.229,0.224,0.225)";
  const auto src = f.source(decode_place::host, tail + ",random_erasing(1,value=random)", augment_place::host, false);
  CHECK(src->tail_on_host());
  CHECK(src->float_steps().to_string() == "random_erasing(1,0.02,0.33,0.3,3.3,value=random)");
  CHECK(src->fields()[0].shape == std::vector<std::int64_t>{3, 16, 16});
  CHECK(src->name().find("-> fused tail (host, CHW float) -> random_erasing(1,0.02,0.33,0.3,3.3,value=random)") != std::string::npos);
  loader with(src, test::cpu_loader(4, 2, 11));
  loader without(f.source(decode_place::host, tail, augment_place::host, false), test::cpu_loader(4, 2, 11));
  const auto step = loaders::parse_pipeline("random_erasing(1,value=random)").steps()[0];
  int erased = 0;
  while (auto a = without.next()) {
    auto b = with.next();
    REQUIRE(b.has_value());
    const auto* plain = static_cast<const float*>(a->field("image").data);
    const auto* got = static_cast<const float*>(b->field("image").data);
    for (std::size_t j = 0; j < a->size(); ++j) {
      // The step itself on the sample's HWC floats, from its own stream (step 3 of the pipeline).
      std::vector<float> hwc(16 * 16 * 3), want(16 * 16 * 3);
      for (int k = 0; k < 3; ++k)
        for (int p = 0; p < 256; ++p) hwc[static_cast<std::size_t>(p * 3 + k)] = plain[j * 768 + static_cast<std::size_t>(k * 256 + p)];
      const loaders::image_spec spec{16, 16, 3, dtype::f32};
      step->apply({reinterpret_cast<std::byte*>(hwc.data()), spec}, {reinterpret_cast<std::byte*>(want.data()), spec},
                  philox_stream(11, b->epoch(), b->indices()[j], 103));
      for (int k = 0; k < 3; ++k)
        for (int p = 0; p < 256; ++p)
          CHECK(std::memcmp(&got[j * 768 + static_cast<std::size_t>(k * 256 + p)], &want[static_cast<std::size_t>(p * 3 + k)], 4) == 0);
      erased += std::memcmp(got + j * 768, plain + j * 768, 768 * 4) != 0 ? 1 : 0;
    }
  }
  CHECK(erased == 12);  // p = 1: every sample
  // With the tail left to the consumer and the steps on the host: the tail runs on the host.
  CHECK(f.source(decode_place::host, tail + ",random_erasing(0.5)", augment_place::host, true)->tail_on_host());
}
