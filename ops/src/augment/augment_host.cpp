// The augmentation jobs of augment.hpp: made from an op and its arguments (with the checks of the
// host op they stand for), checked, and run on the host with aug_math.hpp's functions.
#include "pinfeed/ops/augment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../colour/samples.hpp"
#include "../geometry/warp_plan.hpp"
#include "aug_math.hpp"
#include "blur_math.hpp"
#include "pinfeed/ops/blur.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {
namespace {

constexpr const char* kKindNames[] = {"copy",     "warp",       "turn",   "brightness", "saturation", "contrast", "sharpness",
                                      "posterize", "solarize", "autocontrast", "equalize", "invert", "hue", "grayscale",
                                      "erase", "blur"};
static_assert(std::size(kKindNames) == static_cast<std::size_t>(aug_kind::count_));

aug_job base(aug_kind kind, std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset, const char* op) {
  if (channels != 1 && channels != 3)
    throw pinfeed::invalid_argument(std::string(op) + ": images of 1 or 3 channels, not " + std::to_string(channels));
  aug_job j;
  j.kind = kind;
  j.height = height;
  j.width = width;
  j.channels = static_cast<std::uint8_t>(channels);
  j.offset = offset;
  return j;
}

void check_fill(const char* op, std::optional<double> fill) {
  if (fill && !(*fill >= 0.0 && *fill <= 255.0))
    throw pinfeed::invalid_argument(std::string(op) + ": the fill must be in [0, 255], not " + std::to_string(*fill));
}

aug_job warp_job(const std::array<double, 6>& m, std::uint32_t height, std::uint32_t width, int channels, interpolation mode,
                 std::optional<double> fill, std::uint64_t offset, const char* op) {
  aug_job j = base(aug_kind::warp, height, width, channels, offset, op);
  check_fill(op, fill);
  for (const double v : m)
    if (!std::isfinite(v)) throw pinfeed::invalid_argument(std::string(op) + ": the matrix must be finite, not " + std::to_string(v));
  const auto g = warp::grid_of(m, height, width);
  std::copy(g.begin(), g.end(), j.grid);
  j.bilinear = mode == interpolation::bilinear ? 1 : 0;
  j.has_fill = fill ? 1 : 0;
  j.fill = fill ? static_cast<float>(*fill) : 0.0f;
  return j;
}

aug_job factor_job(aug_kind kind, double factor, std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset,
                   const char* op) {
  aug_job j = base(kind, height, width, channels, offset, op);
  samples::check_factor(op, factor);
  j.r = static_cast<float>(factor);
  j.rest = static_cast<float>(1.0 - factor);
  return j;
}

void check_finite_arg(const char* op, const char* what, double v) {
  if (!std::isfinite(v)) throw pinfeed::invalid_argument(std::string(op) + ": " + what + " must be finite, not " + std::to_string(v));
}

}  // namespace

const char* aug_kind_name(aug_kind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < std::size(kKindNames) ? kKindNames[i] : "?";
}

aug_job aug_job_of(aug_op op, double value, std::uint32_t height, std::uint32_t width, int channels, interpolation mode,
                   std::optional<double> fill, std::uint64_t offset) {
  const char* name = aug_op_name(op);
  switch (op) {
    case aug_op::identity: return base(aug_kind::copy, height, width, channels, offset, name);
    case aug_op::shear_x:
    case aug_op::shear_y:
      check_finite_arg(name, "the factor", value);
      return warp_job(warp::shear_matrix(op == aug_op::shear_x, value, height, width), height, width, channels, mode, fill, offset,
                      name);
    case aug_op::translate_x:
    case aug_op::translate_y:
      check_finite_arg(name, "the offset", value);
      return warp_job(warp::translate_matrix(op == aug_op::translate_x, value), height, width, channels, mode, fill, offset, name);
    case aug_op::rotate: {
      check_finite_arg(name, "the angle", value);
      check_fill(name, fill);
      const int quarters = warp::rotate_quarters(value, height, width);
      if (quarters < 0) return warp_job(warp::rotate_matrix(value), height, width, channels, mode, fill, offset, name);
      aug_job j = base(quarters == 0 ? aug_kind::copy : aug_kind::turn, height, width, channels, offset, name);
      j.mask = static_cast<std::uint8_t>(quarters);
      return j;
    }
    case aug_op::brightness: return factor_job(aug_kind::brightness, value, height, width, channels, offset, name);
    case aug_op::saturation: return factor_job(aug_kind::saturation, value, height, width, channels, offset, name);
    case aug_op::contrast: return factor_job(aug_kind::contrast, value, height, width, channels, offset, name);
    case aug_op::sharpness: return factor_job(aug_kind::sharpness, value, height, width, channels, offset, name);
    case aug_op::posterize: {
      if (!(value >= 1.0 && value <= 8.0) || value != std::floor(value))
        throw pinfeed::invalid_argument("posterize: bits must be 1 to 8, not " + std::to_string(value));
      const int bits = static_cast<int>(value);
      aug_job j = base(aug_kind::posterize, height, width, channels, offset, name);
      j.mask = static_cast<std::uint8_t>(((1u << bits) - 1u) << (8 - bits));
      return j;
    }
    case aug_op::solarize: {
      if (!(value >= 0.0 && value <= 255.0))
        throw pinfeed::invalid_argument("solarize: the threshold must be in [0, 255], not " + std::to_string(value));
      aug_job j = base(aug_kind::solarize, height, width, channels, offset, name);
      j.r = static_cast<float>(value);
      return j;
    }
    case aug_op::autocontrast: return base(aug_kind::autocontrast, height, width, channels, offset, name);
    case aug_op::equalize: return base(aug_kind::equalize, height, width, channels, offset, name);
    case aug_op::invert: return base(aug_kind::invert, height, width, channels, offset, name);
  }
  throw pinfeed::invalid_argument("augmentation job: op " + std::to_string(static_cast<int>(op)) + " is not one of pinfeed's");
}

aug_job aug_job_for(aug_op op, double m, std::uint32_t height, std::uint32_t width, int channels, interpolation mode,
                    std::optional<double> fill, std::uint64_t offset) {
  // apply_aug_op_u8's arguments of its host ops, computed as it computes them.
  switch (op) {
    case aug_op::brightness:
    case aug_op::saturation:
    case aug_op::contrast:
    case aug_op::sharpness: return aug_job_of(op, 1.0 + m, height, width, channels, mode, fill, offset);
    case aug_op::posterize:
      if (!(m >= 1.0 && m < 9.0)) throw pinfeed::invalid_argument("posterize: bits must be 1 to 8, not " + std::to_string(m));
      return aug_job_of(op, static_cast<double>(static_cast<int>(m)), height, width, channels, mode, fill, offset);
    case aug_op::solarize: return aug_job_of(op, 255.0 * m, height, width, channels, mode, fill, offset);
    default: return aug_job_of(op, m, height, width, channels, mode, fill, offset);
  }
}

aug_job affine_job(double angle, double tx, double ty, double scale, double shear_x, double shear_y, std::uint32_t height,
                   std::uint32_t width, int channels, interpolation mode, std::optional<double> fill, std::uint64_t offset) {
  for (const double v : {angle, tx, ty, shear_x, shear_y}) check_finite_arg("affine", "every parameter", v);
  if (!(scale > 0.0) || !std::isfinite(scale))
    throw pinfeed::invalid_argument("affine: the scale must be finite and greater than 0, not " + std::to_string(scale));
  return warp_job(inverse_affine_matrix(0.0, 0.0, angle, tx, ty, scale, shear_x, shear_y), height, width, channels, mode, fill,
                  offset, "affine");
}

aug_job hue_job(double factor, std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset) {
  if (channels != 3) throw pinfeed::invalid_argument("hue: images of 3 channels (a grey image has no hue)");
  if (!(factor >= -0.5 && factor <= 0.5))
    throw pinfeed::invalid_argument("hue: the factor must be in [-0.5, 0.5], not " + std::to_string(factor));
  aug_job j = base(aug_kind::hue, height, width, channels, offset, "hue");
  j.r = static_cast<float>(factor);
  return j;
}

aug_job grayscale_job(std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset) {
  return base(aug_kind::grayscale, height, width, channels, offset, "grayscale");
}

aug_job blur_job(int kx, int ky, double sx, double sy, std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset) {
  aug_job j = base(aug_kind::blur, height, width, channels, offset, "gaussian_blur");
  if (kx > aug::kMostBlurTaps || ky > aug::kMostBlurTaps)
    throw pinfeed::invalid_argument("gaussian_blur: kernels of at most " + std::to_string(aug::kMostBlurTaps) + " taps, not " +
                                    std::to_string(std::max(kx, ky)));
  (void)gaussian_kernel1d(kx, sx);  // its checks of the sizes and sigmas
  (void)gaussian_kernel1d(ky, sy);
  if (kx / 2 >= static_cast<std::int64_t>(width) || ky / 2 >= static_cast<std::int64_t>(height))
    throw pinfeed::invalid_argument("gaussian_blur: a " + std::to_string(kx) + "x" + std::to_string(ky) +
                                    " kernel needs an image wider than " + std::to_string(kx / 2) + " and taller than " +
                                    std::to_string(ky / 2) + " pixels, not " + std::to_string(width) + "x" + std::to_string(height));
  j.box[0] = static_cast<std::uint32_t>(kx);
  j.box[1] = static_cast<std::uint32_t>(ky);
  j.r = static_cast<float>(sx);
  j.rest = static_cast<float>(sy);
  return j;
}

float normal_noise(std::uint32_t a, std::uint32_t b) noexcept { return aug::box_muller(a, b); }

namespace {
aug_job erase_base(const std::uint32_t (&box)[4], std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset) {
  aug_job j = base(aug_kind::erase, height, width, channels, offset, "erase");
  if (std::uint64_t{box[0]} + box[2] > height || std::uint64_t{box[1]} + box[3] > width)
    throw pinfeed::invalid_argument("erase: the box " + std::to_string(box[2]) + "x" + std::to_string(box[3]) + " at (" +
                                    std::to_string(box[0]) + ", " + std::to_string(box[1]) + ") reaches past the " +
                                    std::to_string(height) + "x" + std::to_string(width) + " image");
  std::copy(std::begin(box), std::end(box), j.box);
  return j;
}
}  // namespace

aug_job erase_job(const std::uint32_t (&box)[4], const double (&value)[3], std::uint32_t height, std::uint32_t width,
                  int channels, std::uint64_t offset) {
  aug_job j = erase_base(box, height, width, channels, offset);
  j.has_fill = 1;
  for (int k = 0; k < 3; ++k) {
    if (!std::isfinite(value[k])) throw pinfeed::invalid_argument("erase: the value must be finite, not " + std::to_string(value[k]));
    j.value[k] = static_cast<std::uint8_t>(static_cast<std::int64_t>(value[k]) & 0xFF);
    j.grid[k] = static_cast<float>(value[k]);
  }
  return j;
}

aug_job erase_noise_job(const std::uint32_t (&box)[4], const philox_stream& noise, std::uint32_t height, std::uint32_t width,
                        int channels, std::uint64_t offset) {
  aug_job j = erase_base(box, height, width, channels, offset);
  const philox_block ctr = noise.counter(0);
  j.noise_key[0] = noise.key_lo();
  j.noise_key[1] = noise.key_hi();
  j.noise_counter[0] = ctr.v[1];
  j.noise_counter[1] = ctr.v[2];
  j.noise_counter[2] = ctr.v[3];
  j.noise_first = noise.position();
  return j;
}

void check_aug_jobs(const aug_job* jobs, std::size_t samples, std::size_t rounds, std::uint64_t bytes) {
  if (samples * rounds > 0 && jobs == nullptr) throw pinfeed::invalid_argument("augmentation jobs: null with " + std::to_string(samples * rounds) + " jobs");
  const auto bad = [&](std::size_t r, std::size_t s, const std::string& why) {
    throw pinfeed::invalid_argument("augmentation job of sample " + std::to_string(s) + ", round " + std::to_string(r) + " (" +
                                    aug_kind_name(jobs[r * samples + s].kind) + "): " + why);
  };
  struct span {
    std::uint64_t first, end;
    std::size_t sample;
  };
  std::vector<span> spans;
  spans.reserve(samples);
  for (std::size_t s = 0; s < samples; ++s)
    for (std::size_t r = 0; r < rounds; ++r) {
      const aug_job& j = jobs[r * samples + s];
      if (static_cast<std::size_t>(j.kind) >= static_cast<std::size_t>(aug_kind::count_))
        bad(r, s, "kind " + std::to_string(static_cast<int>(j.kind)) + " is past the last");
      if (j.channels != 1 && j.channels != 3) bad(r, s, "images of 1 or 3 channels, not " + std::to_string(j.channels));
      const std::uint64_t size = std::uint64_t{j.height} * j.width * j.channels;
      if (j.offset > bytes || size > bytes - j.offset)
        bad(r, s, "its image (" + std::to_string(j.height) + "x" + std::to_string(j.width) + "x" + std::to_string(j.channels) +
                      " at byte " + std::to_string(j.offset) + ") ends past the batch's " + std::to_string(bytes) + " bytes");
      if (j.height >= (1u << 22) || j.width >= (1u << 22))
        bad(r, s, "a side of 2^22 pixels or more (" + std::to_string(j.height) + "x" + std::to_string(j.width) + ")");
      if (std::uint64_t{j.height} * j.width >= (std::uint64_t{1} << 32))
        bad(r, s, "an image of 2^32 pixels or more (" + std::to_string(j.height) + "x" + std::to_string(j.width) + ")");
      if (j.kind == aug_kind::turn && (j.mask < 1 || j.mask > 3 || (j.mask != 2 && j.height != j.width)))
        bad(r, s, std::to_string(j.mask) + " quarter turns of a " + std::to_string(j.height) + "x" + std::to_string(j.width) + " image");
      if (j.kind == aug_kind::hue && j.channels != 3) bad(r, s, "images of 3 channels (a grey image has no hue)");
      if (j.kind == aug_kind::erase) {
        if (std::uint64_t{j.box[0]} + j.box[2] > j.height || std::uint64_t{j.box[1]} + j.box[3] > j.width)
          bad(r, s, "the box " + std::to_string(j.box[2]) + "x" + std::to_string(j.box[3]) + " at (" + std::to_string(j.box[0]) +
                        ", " + std::to_string(j.box[1]) + ") reaches past the image");
        // a Philox stream has 2^34 words: the box's noise must end inside it
        if (!j.has_fill && j.noise_first + 2 * std::uint64_t{j.box[2]} * j.box[3] * j.channels > (std::uint64_t{1} << 34))
          bad(r, s, "the noise runs past its stream's 2^34 words (from word " + std::to_string(j.noise_first) + ")");
      }
      if (j.kind == aug_kind::blur) {
        const std::uint32_t kx = j.box[0], ky = j.box[1];
        if (kx % 2 == 0 || ky % 2 == 0 || kx > aug::kMostBlurTaps || ky > aug::kMostBlurTaps)
          bad(r, s, "a " + std::to_string(kx) + "x" + std::to_string(ky) + " kernel (sizes odd, 1 to " +
                        std::to_string(aug::kMostBlurTaps) + ")");
        if (kx / 2 >= j.width || ky / 2 >= j.height)
          bad(r, s, "a " + std::to_string(kx) + "x" + std::to_string(ky) + " kernel reaches past the " + std::to_string(j.height) +
                        "x" + std::to_string(j.width) + " image");
        if (!(j.r > 0.0f) || !(j.rest > 0.0f)) bad(r, s, "a sigma not greater than 0");
      }
      for (const float v : j.grid)
        if (!std::isfinite(v)) bad(r, s, "a grid factor is not finite");
      if (!std::isfinite(j.fill) || !std::isfinite(j.r) || !std::isfinite(j.rest)) bad(r, s, "a parameter is not finite");
      const aug_job& first = jobs[s];
      if (j.offset != first.offset || j.height != first.height || j.width != first.width || j.channels != first.channels)
        bad(r, s, "its image is not the one of its round 0");
      if (r == 0 && size > 0) spans.push_back({j.offset, j.offset + size, s});
    }
  std::sort(spans.begin(), spans.end(), [](const span& a, const span& b) { return a.first < b.first; });
  for (std::size_t k = 1; k < spans.size(); ++k)
    if (spans[k].first < spans[k - 1].end)
      bad(0, spans[k].sample, "its image overlaps sample " + std::to_string(spans[k - 1].sample) + "'s");
}

void round_major_jobs(const aug_job* sample_major, std::size_t samples, std::size_t rounds, std::uint64_t image_bytes, aug_job* out) {
  for (std::size_t j = 0; j < samples; ++j)
    for (std::size_t r = 0; r < rounds; ++r) {
      aug_job job = sample_major[j * rounds + r];
      job.offset = j * image_bytes;
      out[r * samples + j] = job;
    }
}

void detail::check_erase_float_jobs(const aug_job* jobs, std::size_t samples, const float* images, std::uint64_t floats) {
  check_aug_jobs(jobs, samples, 1, floats);  // the offsets and sizes in floats, as bytes in a uint8 batch
  for (std::size_t s = 0; s < samples; ++s)
    if (jobs[s].kind != aug_kind::erase && jobs[s].kind != aug_kind::copy)
      throw pinfeed::invalid_argument("erase job of sample " + std::to_string(s) + ": a " + aug_kind_name(jobs[s].kind) +
                                      " job, where float images take erase or copy");
  if (samples > 0 && images == nullptr) throw pinfeed::invalid_argument("erase_float: the images are null");
}

void erase_float_host(const aug_job* jobs, std::size_t samples, float* images, std::uint64_t floats, mix_layout layout) {
  detail::check_erase_float_jobs(jobs, samples, images, floats);
  for (std::size_t s = 0; s < samples; ++s) {
    const aug_job& j = jobs[s];
    if (j.kind != aug_kind::erase) continue;
    const std::uint64_t values = std::uint64_t{j.box[2]} * j.box[3] * j.channels;
    for (std::uint64_t n = 0; n < values; ++n) aug::erase_float_value(j, n, layout == mix_layout::chw, images + j.offset);
  }
}

std::uint64_t aug_scratch_bytes(std::size_t samples) {
  return samples * (sizeof(aug::image_counts) + sizeof(aug::image_tables));
}

namespace {
/// A blur job on the host as its kernel computes it: the taps, then each output pixel from its window.
void blur_host(const aug_job& j, const std::uint8_t* in, std::uint8_t* out) {
  float taps[2 * aug::kMostBlurTaps];
  aug::blur_taps(aug::blur_kx(j), j.r, taps);
  aug::blur_taps(aug::blur_ky(j), j.rest, taps + aug::blur_kx(j));
  for (std::int64_t y = 0; y < j.height; ++y)
    for (std::int64_t x = 0; x < j.width; ++x)
      aug::blur_pixel(j, in, taps, taps + aug::blur_kx(j), y, x, out + (static_cast<std::uint64_t>(y) * j.width + x) * j.channels);
}
}  // namespace

void augment_batch_host(const aug_job* jobs, std::size_t samples, std::size_t rounds, std::uint8_t* images, std::uint8_t* spare,
                        std::uint64_t bytes) {
  check_aug_jobs(jobs, samples, rounds, bytes);
  if (samples * rounds == 0) return;
  if (images == nullptr || spare == nullptr) throw pinfeed::invalid_argument("augment_batch_host: a null buffer");
  if (images < spare + bytes && spare < images + bytes) throw pinfeed::invalid_argument("augment_batch_host: the buffers overlap");
  aug::image_counts counts{};
  aug::image_tables tables{};
  for (std::size_t r = 0; r < rounds; ++r) {
    const std::uint8_t* from = r % 2 == 0 ? images : spare;
    std::uint8_t* to = r % 2 == 0 ? spare : images;
    for (std::size_t s = 0; s < samples; ++s) {
      const aug_job& j = jobs[r * samples + s];
      const std::uint8_t* in = from + j.offset;
      const std::uint64_t pixels = std::uint64_t{j.height} * j.width;
      if (aug::needs_counts(j.kind)) {
        std::memset(&counts, 0, sizeof counts);
        const bool histogram = aug::needs_histogram(j.kind);
        for (std::uint64_t p = 0; p < pixels; ++p) {
          const std::uint8_t* px = in + p * j.channels;
          if (!histogram) counts.sum += aug::contrast_term(px, j.channels);
          else
            for (int c = 0; c < j.channels; ++c) ++counts.hist[c][px[c]];
        }
        aug::make_tables(j, counts, tables);
      }
      if (j.kind == aug_kind::blur) {
        blur_host(j, in, to + j.offset);
        continue;
      }
      for (std::uint64_t p = 0; p < pixels; ++p) aug::apply_pixel(j, in, tables, p, to + j.offset);
    }
  }
  if (rounds % 2 == 1)  // the result is in spare: back to images, image by image
    for (std::size_t s = 0; s < samples; ++s) {
      const aug_job& j = jobs[s];
      std::memcpy(images + j.offset, spare + j.offset, std::uint64_t{j.height} * j.width * j.channels);
    }
}

}  // namespace pinfeed::ops
