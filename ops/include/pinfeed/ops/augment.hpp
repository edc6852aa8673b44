#pragma once
/// @file augment.hpp
/// The per-sample augmentations of colour.hpp, histogram.hpp, geometry.hpp and policies.hpp as
/// jobs over a batch of 8-bit images, on the host and on the GPU with the same bits. A job is one
/// op on one image with its parameters decided: the random choices (which op, which magnitude) are
/// drawn before, by whoever makes the jobs (a pipeline's worker, from the sample's stream), and the
/// parameters rounded to what the op computes with (the warp's grid factors, the blend's two
/// float factors), so the device never evaluates a double or a libm function the host did not.
///
/// A batch of `samples` images (each its own height, width and channels at its own offset; the
/// same offsets in both buffers) takes `rounds` jobs a sample, round by round: jobs[r * samples +
/// j] is sample j's r-th op (aug_kind::copy for none). Each round reads one buffer and writes the
/// other; the result is left in `images` (copied back after an odd number of rounds). Per round,
/// the images whose op needs a whole-image figure (contrast's mean, autocontrast's extremes,
/// equalize's histogram) are counted first, then each output pixel is computed from the input, the
/// job and those figures by one function (src/augment/aug_math.hpp) the host and the kernels share;
/// a blur job's taps are computed from its sizes and sigmas, and each of its output samples from
/// its window, by the functions of src/augment/blur_math.hpp.
///
/// The result of each job is that of the host op it stands for (colour.hpp and the others state
/// the arithmetic); tests/ops/augment_test.cpp checks it op by op, and the GPU tests the device
/// against the host bit for bit.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "pinfeed/ops/geometry.hpp"
#include "pinfeed/ops/mix.hpp"
#include "pinfeed/ops/policies.hpp"
#include "pinfeed/runtime/philox.hpp"

#include "pinfeed/runtime/cuda_api.hpp"

namespace pinfeed::ops {

enum class aug_kind : std::uint8_t {
  copy, warp, turn, brightness, saturation, contrast, sharpness, posterize, solarize, autocontrast, equalize, invert, hue,
  grayscale, erase, blur,
  count_
};
/// Its name ("warp", "contrast", ...), for messages.
[[nodiscard]] const char* aug_kind_name(aug_kind k) noexcept;

/// One op on one image, its parameters decided (above).
struct aug_job {
  std::uint64_t offset = 0;  ///< the image's first byte in both buffers
  std::uint32_t height = 0, width = 0;
  std::uint8_t channels = 3;  ///< 1 or 3
  aug_kind kind = aug_kind::copy;
  std::uint8_t bilinear = 0;  ///< warp: 0 nearest, 1 bilinear
  /// warp: 1 where a fill is given (torchvision's mask blend), else outside is 0; erase: 1 where the
  /// box takes `value`, 0 where it takes noise
  std::uint8_t has_fill = 0;
  std::uint8_t mask = 0;      ///< posterize: the bits kept; turn: quarter turns counter-clockwise (1, 2, 3)
  std::uint8_t value[3] = {};  ///< erase: each channel's value (one channel: value[0])
  /// warp: the grid's factors A, B, C (over w / 2), D, E, F (over h / 2) and grid_sample's w / 2,
  /// h / 2; erase: grid[0..2] each channel's value on float images
  float grid[8] = {};
  float fill = 0;  ///< warp: the fill value
  /// brightness: r the factor; saturation, contrast: blend's f32(r) and f32(1 - r); sharpness:
  /// rest = f32(1 - r); solarize: r the threshold; hue: r the shift.
  float r = 0, rest = 0;
  /// erase: the box, {top, left, height, width} (rows top .. top + height - 1); blur: box[0] and
  /// box[1] the kernel's sizes across and down (odd, 1 to 1023), r and rest its float sigmas.
  std::uint32_t box[4] = {};
  /// erase with noise: the Philox stream (pinfeed/runtime/philox.hpp) of the sample, its key (lo,
  /// hi) and its counter's last three words, and the first word the box takes: value n of the box
  /// (row by row, channel by channel) is normal_noise(words first + 2n and first + 2n + 1).
  std::uint32_t noise_key[2] = {}, noise_counter[3] = {};
  std::uint64_t noise_first = 0;
};

/// N(0, 1) noise from two uniform words (Box-Muller: sqrt(-2 log u1) cos(2 pi u2), u1 = (a + 1) /
/// 2^32, u2 = b / 2^32), in double steps each rounded to the nearest, with pinfeed's own log and
/// cos (series, error below 1e-15), rounded to float at the end: the same bits on the host and
/// the device (random_erasing's value=random).
[[nodiscard]] float normal_noise(std::uint32_t a, std::uint32_t b) noexcept;
/// random_erasing's job: the box {top, left, height, width} set to `value` (one a channel; on
/// uint8 images truncated toward zero and taken modulo 256, torchvision's conversion, on float ones
/// rounded to float) or, with `noise`, to normal_noise of the stream `noise` from its next word on
/// (on uint8 images converted alike).
[[nodiscard]] aug_job erase_job(const std::uint32_t (&box)[4], const double (&value)[3], std::uint32_t height,
                                std::uint32_t width, int channels, std::uint64_t offset = 0);
[[nodiscard]] aug_job erase_noise_job(const std::uint32_t (&box)[4], const philox_stream& noise, std::uint32_t height,
                                      std::uint32_t width, int channels, std::uint64_t offset = 0);

/// gaussian_blur_u8's job (pinfeed/ops/blur.hpp; its arguments, the sigmas rounded to float as it
/// rounds them). Throws std::invalid_argument as gaussian_blur_u8 would, naming the value.
[[nodiscard]] aug_job blur_job(int kx, int ky, double sx, double sy, std::uint32_t height, std::uint32_t width, int channels,
                               std::uint64_t offset = 0);

/// The job that applies `op` at magnitude `m` (apply_aug_op_u8's arguments) to an image of height
/// x width x channels at `offset`. Throws std::invalid_argument as apply_aug_op_u8 would, naming
/// the op and the value.
[[nodiscard]] aug_job aug_job_for(aug_op op, double m, std::uint32_t height, std::uint32_t width, int channels,
                                  interpolation mode, std::optional<double> fill, std::uint64_t offset = 0);
/// The job of `op`'s host op with that op's own argument `value` (brightness_u8's factor,
/// posterize_u8's bits, solarize_u8's threshold, rotate_u8's angle, shear_x_u8's factor,
/// translate_x_u8's pixels, ...; none for identity, autocontrast, equalize, invert).
[[nodiscard]] aug_job aug_job_of(aug_op op, double value, std::uint32_t height, std::uint32_t width, int channels,
                                 interpolation mode, std::optional<double> fill, std::uint64_t offset = 0);
/// affine_u8's job (its arguments).
[[nodiscard]] aug_job affine_job(double angle, double tx, double ty, double scale, double shear_x, double shear_y,
                                 std::uint32_t height, std::uint32_t width, int channels, interpolation mode,
                                 std::optional<double> fill, std::uint64_t offset = 0);
/// hue_u8's job (3 channels; the factor in [-0.5, 0.5]).
[[nodiscard]] aug_job hue_job(double factor, std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset = 0);
/// grayscale_u8's with as many output channels as input ones.
[[nodiscard]] aug_job grayscale_job(std::uint32_t height, std::uint32_t width, int channels, std::uint64_t offset = 0);

/// Sample-major jobs (sample j's `rounds` jobs side by side, as a sample's steps draw them) in
/// the round-major order augment_batch_* take, into `out` (not overlapping), sample j's image at
/// byte j * image_bytes of the batch.
void round_major_jobs(const aug_job* sample_major, std::size_t samples, std::size_t rounds, std::uint64_t image_bytes, aug_job* out);

/// Erase jobs (random_erasing after normalize) over a batch of `samples` float32 images in
/// `images` (`floats` long), one job a sample: aug_kind::erase, or aug_kind::copy for none; each
/// job's offset and sizes in floats, its image HWC or CHW (`layout`); only the boxes are written.
/// Throws std::invalid_argument naming the job and what is wrong (as check_aug_jobs, and a kind
/// other than those two).
void erase_float_host(const aug_job* jobs, std::size_t samples, float* images, std::uint64_t floats, mix_layout layout);
/// The same on the GPU, queued on `stream`, no host synchronisation, no allocation, capturable:
/// `device_jobs` holds what `host_jobs` holds (checked on the host), `images` is a device buffer.
void erase_float_device(const aug_job* device_jobs, const aug_job* host_jobs, std::size_t samples, float* images,
                        std::uint64_t floats, mix_layout layout, cudaStream_t stream);

namespace detail {
/// erase_float_*'s checks of their arguments (the host's jobs).
void check_erase_float_jobs(const aug_job* jobs, std::size_t samples, const float* images, std::uint64_t floats);
}  // namespace detail

/// Throws std::invalid_argument naming the job (its index) and what is wrong: a kind past the
/// last, channels not 1 or 3, an image past `bytes`, a quarter turn of a non-square image, a
/// non-finite parameter, a blur kernel that is not odd from 1 to 1023 or reaches past its image,
/// or images of one sample that differ from round to round.
void check_aug_jobs(const aug_job* jobs, std::size_t samples, std::size_t rounds, std::uint64_t bytes);

/// The device scratch augment_batch_device needs for `samples` images: their counts and tables.
[[nodiscard]] std::uint64_t aug_scratch_bytes(std::size_t samples);

/// The batch on the host (above): `images` and `spare` each `bytes` long, not overlapping.
void augment_batch_host(const aug_job* jobs, std::size_t samples, std::size_t rounds, std::uint8_t* images,
                        std::uint8_t* spare, std::uint64_t bytes);
/// The same on the GPU, queued on `stream` with no host synchronisation and no allocation (a CUDA
/// graph may capture it): `device_jobs` holds what `host_jobs` holds (checked on the host), `images`
/// and `spare` are device buffers of `bytes`, `scratch` one of at least aug_scratch_bytes(samples).
/// The launches follow the host jobs (a round's counting launches only where one of its jobs needs
/// them, grids from the images' sizes): a captured graph may be replayed with other device jobs
/// only of the same kinds round by round and the same images.
void augment_batch_device(const aug_job* device_jobs, const aug_job* host_jobs, std::size_t samples, std::size_t rounds,
                          std::uint8_t* images, std::uint8_t* spare, std::uint64_t bytes, void* scratch,
                          std::uint64_t scratch_bytes, cudaStream_t stream);

}  // namespace pinfeed::ops
