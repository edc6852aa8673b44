// The batch ops mixup, cutmix and mixup_cutmix in a pipeline: spellings and refusals (with the
// parser's caret, and at the source's construction naming the field or the value); a loader's
// batches equal the same pipeline without the op, mixed by pinfeed/ops/mix.hpp with the draw of
// (seed, epoch, batch); soft labels summing to 1; the same batches for 1, 2 and 4 workers and
// across state()/resume().
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "image_fixtures.hpp"
#include "step_checks.hpp"
#include "test_util.hpp"

using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

const char* const kNormalize = "normalize(0.485,0.456,0.406,0.229,0.224,0.225)";

/// Three class folders (a, b, c) of JPEGs of several sizes: labels 0, 1, 2.
std::vector<image_file> three_classes(const std::filesystem::path& root, int per_class) {
  int n = 0;
  for (const char* c : {"a", "b", "c"}) {
    std::filesystem::create_directories(root / c);
    for (int i = 0; i < per_class; ++i, ++n) {
      const int h = 40 + 3 * n, w = 52 + 2 * n;
      test::write_bytes(root / c / (test::letters_name(i, per_class) + ".jpg"), encode_jpeg(test::picture_rgb(h, w, n), w, h));
    }
  }
  return list_image_folder(root.string()).files;
}

/// Refused at construction, saying `says`.
void check_source_refuses(const std::shared_ptr<image_reader>& reader, const std::string& spec, const std::string& says) {
  CAPTURE(spec);
  try {
    (void)std::make_shared<pipeline_source>(reader, parse_pipeline(spec));
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK_MESSAGE(std::string(e.what()).find(says) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("batch_ops.spellings_read_back_and_bad_values_have_a_caret") {
  for (const char* s : {"mixup(0.2)", "cutmix(1)", "mixup_cutmix(0.8,1)", "mixup(0.2,num_classes=10)"}) {
    CAPTURE(s);
    CHECK(parse_pipeline(s).to_string() == s);
    CHECK(parse_pipeline(s).steps()[0]->batch_op().has_value());
  }
  const auto m = parse_pipeline("mixup_cutmix(0.8,1,num_classes=7)").steps()[0]->batch_op();
  REQUIRE(m);
  CHECK(m->recipe.op == ops::mix_op::mixup_cutmix);
  CHECK(m->recipe.alpha_mixup == 0.8);
  CHECK(m->recipe.alpha_cutmix == 1.0);
  CHECK(m->classes == 7);
  CHECK_FALSE(parse_pipeline("hflip").steps()[0]->batch_op().has_value());
  test::check_refused_at("mixup(0)", "alpha (MixUp's) must be finite and > 0, not 0", 6);
  test::check_refused_at("cutmix(-1)", "alpha (CutMix's) must be finite and > 0, not -1", 7);
  test::check_refused_at("mixup_cutmix(0.8,0)", "alpha (CutMix's)", 17);
  test::check_refused_at("mixup_cutmix(-2,1)", "alpha (MixUp's)", 13);
  test::check_refused_at("mixup(0.2,num_classes=2.5)", "num_classes is a whole number of classes, not 2.5", 22);
  test::check_refused_at("mixup(0.2,num_classes=-3)", "num_classes is a whole number of classes, not -3", 22);
}

TEST_CASE("batch_ops.refused_at_construction_naming_the_field_or_the_value") {
  test::temp_dir d;
  const auto reader = make_image_files_reader(three_classes(d.path, 2));
  const std::string norm = kNormalize;
  check_source_refuses(reader, "rrc(16),mixup(0.2)", "mixes float32 images: put normalize or scale before it (the image is uint8)");
  check_source_refuses(reader, "rrc(16),mixup(0.2)," + norm, "mixup(0.2) works on whole batches: it must be the pipeline's last step, not step 2 of 3");
  // A source without labels, and one whose labels are no class indices.
  const auto unlabelled = make_source(4, {{"image", dtype::u8, {8, 8, 3}}}, [](sample&) {}, "unlabelled");
  check_source_refuses(make_reader_from_source(unlabelled), "scale,mixup(0.2,num_classes=3)", "'unlabelled' has no field 'label'");
  const auto float_labels = make_source(4, {{"image", dtype::u8, {8, 8, 3}}, {"label", dtype::f32, {3}}}, [](sample&) {}, "soft");
  check_source_refuses(make_reader_from_source(float_labels), "scale,cutmix(1,num_classes=3)",
                       "takes one int64 or int32 class index a sample in field 'label', and 'soft' gives float32 arrays of 3");
  // Labels without a class count: num_classes must be given.
  const auto counted = make_source(4, {{"image", dtype::u8, {8, 8, 3}}, {"label", dtype::i64, {}}}, [](sample&) {}, "counted");
  check_source_refuses(make_reader_from_source(counted), "scale,mixup(0.2)",
                       "mixup(0.2): num_classes is unknown: 'counted' does not say how many classes its labels count; give it as num_classes=N");
  const auto given = std::make_shared<pipeline_source>(make_reader_from_source(counted), parse_pipeline("scale,mixup(0.2,num_classes=6)"));
  REQUIRE(given->batch_op());
  CHECK(given->batch_op()->classes == 6);
  CHECK(given->fields()[1].name == "label");
  CHECK(given->fields()[1].type == dtype::f32);
  CHECK(given->fields()[1].shape == std::vector<std::int64_t>{6});
  // The folder says 3 classes; such a pipeline decodes on the host (decode host, the default), and
  // on the device it could: the tail and the op then run there.
  const auto folder = std::make_shared<pipeline_source>(reader, parse_pipeline("rrc(16)," + norm + ",cutmix(1)"));
  CHECK(folder->batch_op()->classes == 3);
  CHECK(folder->decode_path() == decode_place::host);
  CHECK(folder->device_refusal().empty());
  CHECK_FALSE(folder->finishes_on_device());
  // A label past the classes fails its batch, naming the sample and the label.
  const auto small = std::make_shared<pipeline_source>(reader, parse_pipeline("rrc(16)," + norm + ",mixup(1,num_classes=2)"));
  loader l(small, pinfeed::test::cpu_loader(6, 1, 1));
  try {
    while (auto b = l.next()) {
    }
    FAIL("no batch failed");
  } catch (const sample_error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("label 2 is outside the 2 classes of mixup(1,num_classes=2)") != std::string::npos, e.what());
  }
}

TEST_CASE("batch_ops.batches_are_the_unmixed_batches_mixed_by_the_draw") {
  test::temp_dir d;
  const auto reader = make_image_files_reader(three_classes(d.path, 7));
  const std::string base = std::string("rrc(24),hflip,") + kNormalize;
  int mixups = 0, cutmixes = 0;
  for (const char* op : {"mixup(0.4)", "cutmix(1)", "mixup_cutmix(0.8,1)"}) {
    CAPTURE(op);
    const auto mixed = std::make_shared<pipeline_source>(reader, parse_pipeline(base + "," + op));
    const auto plain = std::make_shared<pipeline_source>(reader, parse_pipeline(base));
    REQUIRE(mixed->batch_op());
    const auto& plan = *mixed->batch_op();
    CHECK(plan.classes == 3);
    const loader_options o = pinfeed::test::cpu_loader(5, 2, 9);
    loader lm(mixed, o), lp(plain, o);
    for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
      lm.start_epoch(epoch);
      lp.start_epoch(epoch);
      std::size_t batches = 0;
      while (auto bm = lm.next()) {
        auto bp = lp.next();
        REQUIRE(bp);
        const auto img = bp->field("image");
        const std::int64_t c = img.shape[1], h = img.shape[2], w = img.shape[3];  // CHW (the fused host tail)
        CHECK(plan.layout == ops::mix_layout::chw);
        const std::size_t n = bp->size(), per = static_cast<std::size_t>(c * h * w);
        std::vector<float> images(n * per), labels(n * 3, 0.0f);
        std::memcpy(images.data(), img.data, images.size() * sizeof(float));
        const auto* y = static_cast<const std::int64_t*>(bp->field("label").data);
        for (std::size_t i = 0; i < n; ++i) labels[i * 3 + static_cast<std::size_t>(y[i])] = 1.0f;
        const ops::mix_params p = ops::draw_mix(plan.mix.recipe, o.seed, epoch, bm->index(), h, w);
        (p.op == ops::mix_op::mixup ? mixups : cutmixes) += 1;
        ops::mix_batch_host({images.data(), n, h, w, c, ops::mix_layout::chw, labels.data(), 3}, p);
        const auto got_img = bm->field("image"), got_lab = bm->field("label");
        CHECK(got_lab.shape == std::vector<std::int64_t>{static_cast<std::int64_t>(n), 3});
        CHECK(std::memcmp(got_img.data, images.data(), images.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(got_lab.data, labels.data(), labels.size() * sizeof(float)) == 0);
        const auto* soft = static_cast<const float*>(got_lab.data);
        for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(double{soft[3 * i]} + soft[3 * i + 1] + soft[3 * i + 2] - 1.0) <= 1e-6);
        ++batches;
      }
      CHECK_FALSE(lp.next());
      CHECK(batches == 5);  // 21 samples, batch 5: the last batch of 1 kept
    }
  }
  CHECK(mixups > 0);
  CHECK(cutmixes > 0);
}

TEST_CASE("batch_ops.same_batches_for_any_worker_count_and_across_resume") {
  test::temp_dir d;
  const auto reader = make_image_files_reader(three_classes(d.path, 6));
  const auto src = std::make_shared<pipeline_source>(reader, parse_pipeline(std::string("rrc(20),") + kNormalize + ",mixup_cutmix(0.8,1)"));
  CHECK(test::check_same_batches(src, 4).size() == 10);
}
