// The augmentation jobs (pinfeed/ops/augment.hpp) on the host: each job gives its host op's
// pixels, op by op and magnitude by magnitude, alone and chained over a batch of mixed sizes; and
// the jobs' refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/augment_cases.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/blur.hpp"
#include "pinfeed/runtime/exception.hpp"

using namespace pinfeed;
using namespace pinfeed::ops;

namespace {
struct size3 {
  std::uint32_t h, w;
  int c;
};
const std::vector<size3> kSizes{{1, 1, 3}, {2, 5, 1}, {7, 3, 3}, {17, 31, 3}, {32, 32, 1}, {24, 24, 3}, {40, 23, 3}};
}  // namespace

TEST_CASE("augment.each_job_gives_its_host_op") {
  int compared = 0, changed = 0;
  for (const size3& s : kSizes) {
    const std::uint64_t bytes = std::uint64_t{s.h} * s.w * static_cast<std::uint64_t>(s.c);
    const auto image = test::aug_image(bytes, s.h * 131 + s.w);
    for (const test::aug_case& k : test::aug_cases(s.h, s.w, s.c)) {
      CAPTURE(k.what);
      CAPTURE(s.h);
      CAPTURE(s.w);
      CAPTURE(s.c);
      std::vector<std::uint8_t> want(bytes), got = image, spare(bytes, 0xA5);
      k.reference(image.data(), want.data());
      augment_batch_host(&k.job, 1, 1, got.data(), spare.data(), bytes);
      CHECK(got == want);
      ++compared;
      changed += got != image ? 1 : 0;
    }
  }
  // Every size, every op (16), both tables, several bins and signs: the comparisons are many, and
  // most jobs change their image (not the identity, a turn by 0 or 360, a 1x1 image) (a job that wrote nothing would pass where its op does nothing).
  CHECK(compared > 1500);
  CHECK(changed > compared * 2 / 3);
}

TEST_CASE("augment.rounds_over_a_batch_of_mixed_sizes_chain_the_host_ops") {
  // Four samples of different sizes and channels side by side with gaps, 1 to 4 rounds: each
  // sample's result is its ops applied one after the other; the gaps are not written.
  for (std::size_t rounds = 1; rounds <= 4; ++rounds) {
    CAPTURE(rounds);
    const std::vector<size3> sizes{{17, 31, 3}, {24, 24, 3}, {2, 5, 1}, {40, 23, 3}};
    std::vector<std::uint64_t> offsets;
    std::uint64_t bytes = 0;
    for (const auto& s : sizes) {
      offsets.push_back(bytes);
      bytes += std::uint64_t{s.h} * s.w * static_cast<std::uint64_t>(s.c) + 13;
    }
    std::vector<std::uint8_t> batch = test::aug_image(bytes, 99 + rounds), spare(bytes);
    std::vector<std::uint8_t> want = batch;
    std::vector<aug_job> jobs(sizes.size() * rounds);
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      const size3& s = sizes[j];
      const auto cases = test::aug_cases(s.h, s.w, s.c);
      const std::uint64_t n = std::uint64_t{s.h} * s.w * static_cast<std::uint64_t>(s.c);
      std::vector<std::uint8_t> cur(want.begin() + static_cast<std::ptrdiff_t>(offsets[j]),
                                    want.begin() + static_cast<std::ptrdiff_t>(offsets[j] + n)),
          next(n);
      for (std::size_t r = 0; r < rounds; ++r) {
        const test::aug_case& k = cases[(j * 37 + r * 101 + rounds * 7) % cases.size()];
        jobs[r * sizes.size() + j] = k.job;
        jobs[r * sizes.size() + j].offset = offsets[j];
        k.reference(cur.data(), next.data());
        cur.swap(next);
      }
      std::memcpy(want.data() + offsets[j], cur.data(), n);
    }
    augment_batch_host(jobs.data(), sizes.size(), rounds, batch.data(), spare.data(), bytes);
    CHECK(batch == want);
  }
}

TEST_CASE("augment.bad_jobs_are_refused_naming_the_sample_and_the_value") {
  const auto refused = [](const std::vector<aug_job>& jobs, std::size_t samples, std::size_t rounds, std::uint64_t bytes,
                          const std::string& words) {
    std::vector<std::uint8_t> a(bytes), b(bytes);
    try {
      augment_batch_host(jobs.data(), samples, rounds, a.data(), b.data(), bytes);
      FAIL("accepted: " << words);
    } catch (const pinfeed::invalid_argument& e) {
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  const aug_job ok = aug_job_for(aug_op::invert, 0, 4, 4, 3, interpolation::nearest, std::nullopt, 0);
  aug_job k = ok;
  k.kind = aug_kind::count_;
  refused({k}, 1, 1, 48, "sample 0, round 0 (?): kind 16 is past the last");
  k = ok;
  k.channels = 2;
  refused({k}, 1, 1, 48, "images of 1 or 3 channels, not 2");
  refused({ok}, 1, 1, 47, "ends past the batch's 47 bytes");
  aug_job second = ok;
  second.offset = 40;
  refused({ok, second}, 2, 1, 100, "sample 1, round 0 (invert): its image overlaps sample 0's");
  aug_job later = ok;
  later.offset = 48;
  refused({ok, later}, 1, 2, 100, "sample 0, round 1 (invert): its image is not the one of its round 0");
  k = aug_job_for(aug_op::rotate, 90, 4, 4, 3, interpolation::nearest, std::nullopt);
  CHECK(k.kind == aug_kind::turn);
  k.width = 2;
  refused({k}, 1, 1, 48, "1 quarter turns of a 4x2 image");
  k = ok;
  k.r = std::numeric_limits<float>::infinity();
  refused({k}, 1, 1, 48, "a parameter is not finite");
  // The builders refuse what the host ops refuse, with their words.
  const auto builder = [](auto make, const std::string& words) {
    try {
      (void)make();
      FAIL("accepted: " << words);
    } catch (const pinfeed::invalid_argument& e) {
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  builder([] { return aug_job_for(aug_op::posterize, 0.5, 4, 4, 3, interpolation::nearest, std::nullopt); }, "posterize: bits must be 1 to 8");
  builder([] { return aug_job_for(aug_op::solarize, 1.5, 4, 4, 3, interpolation::nearest, std::nullopt); },
          "solarize: the threshold must be in [0, 255], not 382.5");
  builder([] { return aug_job_for(aug_op::shear_x, 0.2, 4, 4, 3, interpolation::nearest, 300.0); }, "shear_x: the fill must be in [0, 255], not 300");
  builder([] { return aug_job_for(aug_op::brightness, -1.5, 4, 4, 3, interpolation::nearest, std::nullopt); },
          "brightness: the factor must be finite and not negative, not -0.5");
  builder([] { return aug_job_for(aug_op::rotate, std::nan(""), 4, 4, 3, interpolation::nearest, std::nullopt); }, "rotate: the angle must be finite");
  builder([] { return hue_job(0.2, 4, 4, 1); }, "hue: images of 3 channels");
  builder([] { return hue_job(0.7, 4, 4, 3); }, "hue: the factor must be in [-0.5, 0.5], not 0.7");
  builder([] { return affine_job(0, 0, 0, 0, 0, 0, 4, 4, 3, interpolation::nearest, std::nullopt); }, "affine: the scale must be finite and greater than 0");
  builder([] { return grayscale_job(4, 4, 4); }, "grayscale: images of 1 or 3 channels, not 4");
  const std::uint32_t past[4] = {2, 1, 3, 3};
  const double value[3] = {1, 2, 3};
  builder([&] { return erase_job(past, value, 4, 4, 3); }, "erase: the box 3x3 at (2, 1) reaches past the 4x4 image");
  builder([&] { return erase_noise_job(past, philox_stream(1, 2, 3), 5, 3, 3); }, "erase: the box 3x3 at (2, 1) reaches past the 5x3 image");
  const std::uint32_t whole[4] = {0, 0, 4, 4};
  k = erase_noise_job(whole, philox_stream(1, 2, 3), 4, 4, 3);
  k.box[0] = 1;
  refused({k}, 1, 1, 48, "sample 0, round 0 (erase): the box 4x4 at (1, 0) reaches past the image");
  k = erase_noise_job(whole, philox_stream(1, 2, 3), 4, 4, 3);
  k.noise_first = (std::uint64_t{1} << 34) - 95;  // the box takes 96 words
  refused({k}, 1, 1, 48, "the noise runs past its stream's 2^34 words");
  k.noise_first = (std::uint64_t{1} << 34) - 96;  // the last 96: accepted
  std::vector<std::uint8_t> a4(48), b4(48);
  CHECK_NOTHROW(augment_batch_host(&k, 1, 1, a4.data(), b4.data(), 48));
  // blur: the job's kernel checked as the host op checks it, its sigmas and its reach.
  builder([] { return blur_job(4, 3, 1.0, 1.0, 8, 8, 3); }, "gaussian_blur: the kernel size must be odd and at least 1, not 4");
  builder([] { return blur_job(3, 3, 0.0, 1.0, 8, 8, 3); }, "gaussian_blur: sigma must be finite and greater than 0");
  builder([] { return blur_job(3, 3, 1.0, 1e-50, 8, 8, 3); }, "greater than 0 as a float32, not 0.000000 (0 as a float32)");
  builder([] { return blur_job(3, 3, 1e39, 1.0, 8, 8, 3); }, "(inf as a float32)");
  builder([] { return blur_job(1025, 3, 1.0, 1.0, 8, 2000, 3); }, "gaussian_blur: kernels of at most 1023 taps, not 1025");
  builder([] { return blur_job(3, 9, 1.0, 1.0, 4, 8, 3); }, "gaussian_blur: a 3x9 kernel needs an image wider than 1 and taller than 4 pixels, not 8x4");
  builder([] { return blur_job(3, 3, 1.0, 1.0, 8, 8, 2); }, "gaussian_blur: images of 1 or 3 channels, not 2");
  k = blur_job(3, 3, 1.0, 1.0, 4, 4, 3);
  k.box[1] = 4;
  refused({k}, 1, 1, 48, "sample 0, round 0 (blur): a 3x4 kernel (sizes odd, 1 to 1023)");
  k.box[1] = 1025;
  refused({k}, 1, 1, 48, "a 3x1025 kernel (sizes odd, 1 to 1023)");
  k.box[1] = 9;
  refused({k}, 1, 1, 48, "a 3x9 kernel reaches past the 4x4 image");
  k = blur_job(3, 3, 1.0, 1.0, 4, 4, 3);
  k.rest = 0.0f;
  refused({k}, 1, 1, 48, "a sigma not greater than 0");
  // The buffers must be two.
  std::vector<std::uint8_t> a(96);
  CHECK_THROWS_WITH_AS(augment_batch_host(&ok, 1, 1, a.data(), a.data() + 40, 48), doctest::Contains("the buffers overlap"),
                       pinfeed::invalid_argument);
  CHECK_THROWS_WITH_AS(augment_batch_host(&ok, 1, 1, a.data(), nullptr, 48), doctest::Contains("a null buffer"), pinfeed::invalid_argument);
}

TEST_CASE("augment.normal_noise_is_box_muller_within_float_rounding_and_standard_normal") {
  // pinfeed's own log and cos against the C library's in double: the float results agree to a
  // float's rounding (the two double values differ by ~1e-16 relative, so a result may round the
  // other way at a float's half-ulp), at the ends of both words' ranges too.
  const auto libm = [](std::uint32_t a, std::uint32_t b) {
    const double u1 = (static_cast<double>(a) + 1.0) / 4294967296.0, u2 = static_cast<double>(b) / 4294967296.0;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.141592653589793 * u2));
  };
  std::vector<std::pair<std::uint32_t, std::uint32_t>> words;
  for (const std::uint32_t a : {0u, 1u, 2u, 0x7FFFFFFFu, 0xB504F333u, 0xFFFFFFFEu, 0xFFFFFFFFu})
    for (const std::uint32_t b : {0u, 1u, 1u << 29, (1u << 29) + 1, 1u << 30, 0x55555555u, 3u << 30, 0xFFFFFFFFu})
      words.emplace_back(a, b);
  philox_stream r(42, 0, 0);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t a = r.next_u32();
    words.emplace_back(a, r.next_u32());
  }
  double sum = 0, squares = 0;
  int off_by_an_ulp = 0;
  for (const auto& [a, b] : words) {
    const float got = normal_noise(a, b), want = libm(a, b);
    CAPTURE(a);
    CAPTURE(b);
    REQUIRE(std::fabs(got - want) <= std::max(1e-7f, std::fabs(want) * 1.2e-7f));
    off_by_an_ulp += got != want ? 1 : 0;
    sum += got;
    squares += static_cast<double>(got) * got;
  }
  CHECK(normal_noise(0xFFFFFFFFu, 123u) == 0.0f);  // u1 = 1: log 1 = 0 exactly
  CHECK(normal_noise(0u, 0u) == libm(0u, 0u));     // the largest radius, sqrt(64 ln 2), at angle 0
  CHECK(off_by_an_ulp < static_cast<int>(words.size() / 100));
  const double n = static_cast<double>(words.size()), mean = sum / n;
  CHECK(std::fabs(mean) < 0.01);
  CHECK(std::fabs(squares / n - mean * mean - 1.0) < 0.01);
}

TEST_CASE("augment.the_blur_taps_own_exp_is_the_c_librarys_within_an_ulp") {
  // The taps take pinfeed's own exp (double steps rounded to float, so that the GPU computes the
  // same bits): against the same steps with the C library's expf, every tap within an ulp and
  // nearly all equal, over sizes 1 to 1023 and sigmas from a near-delta to a near-box.
  int taps = 0, equal = 0;
  for (const int k : {1, 3, 5, 7, 9, 11, 23, 31, 63, 101, 255, 511, 1023})
    for (const double sigma : {0.05, 0.3, 0.8, 0.15 * k + 0.35, 2.5, 7.0, 40.0, 1e4}) {
      CAPTURE(k);
      CAPTURE(sigma);
      const auto got = ops::gaussian_kernel1d(k, sigma);
      std::vector<float> v(static_cast<std::size_t>(k));
      const double lim = (k - 1) / (2.0 * std::sqrt(2.0));
      const float a = static_cast<float>(-lim), b = static_cast<float>(lim), s = static_cast<float>(sigma);
      const float step = k > 1 ? (b - a) / static_cast<float>(k - 1) : 0.0f;
      float top = -INFINITY, sum = 0.0f;
      for (int i = 0; i < k; ++i) {
        const float x = i < k / 2 ? a + step * static_cast<float>(i) : b - step * static_cast<float>(k - 1 - i);
        const float t = x / s;
        v[static_cast<std::size_t>(i)] = -(t * t);
        top = std::max(top, v[static_cast<std::size_t>(i)]);
      }
      for (auto& e : v) sum += (e = std::exp(e - top));
      for (int i = 0; i < k; ++i) {
        // below float's least normal a tap is 0 (a framework flushing subnormals computes alike)
        float want = v[static_cast<std::size_t>(i)] / sum;
        if (want < std::numeric_limits<float>::min()) want = 0.0f;
        const float have = got[static_cast<std::size_t>(i)];
        CHECK((have == 0.0f || have >= std::numeric_limits<float>::min()));
        const float ulp = std::nextafter(std::max(want, have), INFINITY) - std::max(want, have);
        CHECK(std::fabs(have - want) <= 2 * ulp);  // a tap's ulp, and the sum's
        equal += have == want ? 1 : 0;
        ++taps;
      }
    }
  CHECK(taps > 15000);
  CHECK(equal > taps * 9 / 10);
  MESSAGE(equal << " of " << taps << " taps equal to the C library's");
}
