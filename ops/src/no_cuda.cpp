// The device ops in a CPU-only build (PINFEED_WITH_CUDA=OFF): the same argument checks as the CUDA
// build, then an error saying the build has no GPU half. Nothing here can be reached with a device
// pointer, since no device exists in such a build.
#include <stdexcept>
#include <string>

#include "finishing/encode_checks.hpp"
#include "jpeg/jpeg_math.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/encode.hpp"
#include "pinfeed/ops/mix.hpp"
#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/ops/resize.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::ops {

namespace {
[[noreturn]] void no_gpu(const char* what) {
  throw pinfeed::runtime_error(std::string(what) + ": " + pinfeed::detail::kNoCuda + "; use the host version");
}
}  // namespace

void balanced_sample_device(void* d_temp, std::size_t&, const sampler_args& a, const sampler_params& p, cudaStream_t) {
  detail::validate_gpu_shapes(a, p, d_temp != nullptr);
  no_gpu("balanced_sample_device");
}

void decode_jpeg_batch_device(const jpeg_batch_view& device, const jpeg_image* host_images, std::uint8_t*, std::uint64_t out_bytes,
                              std::uint8_t*, std::uint64_t scratch_bytes, cudaStream_t) {
  jpeg::check_device_call(device, host_images, out_bytes, scratch_bytes);
  if (device.count == 0) return;
  no_gpu("decode_jpeg_batch_device");
}

void unpack_jpeg_blocks_device(const std::uint8_t* bytes, std::uint64_t size, const std::uint32_t* starts, std::uint64_t block_count,
                               std::int16_t* blocks, std::uint32_t* malformed, cudaStream_t) {
  jpeg::check_unpack_call(bytes, size, starts, block_count, blocks, malformed);
  if (block_count == 0) return;
  no_gpu("unpack_jpeg_blocks_device");
}

void augment_batch_device(const aug_job*, const aug_job* host_jobs, std::size_t samples, std::size_t rounds, std::uint8_t*,
                          std::uint8_t*, std::uint64_t bytes, void*, std::uint64_t, cudaStream_t) {
  check_aug_jobs(host_jobs, samples, rounds, bytes);
  if (samples * rounds == 0) return;
  no_gpu("augment_batch_device");
}

void erase_float_device(const aug_job*, const aug_job* host_jobs, std::size_t samples, float* images, std::uint64_t floats,
                        mix_layout, cudaStream_t) {
  detail::check_erase_float_jobs(host_jobs, samples, images, floats);
  if (samples == 0) return;
  no_gpu("erase_float_device");
}

void resize_bilinear_u8_device(const resize_job*, const resize_job* host_jobs, std::size_t count, const std::uint8_t*, std::uint64_t in_bytes,
                               std::uint8_t*, std::uint64_t out_bytes, cudaStream_t) {
  check_resize_jobs(host_jobs, count, in_bytes, out_bytes);
  if (count == 0) return;
  no_gpu("resize_bilinear_u8_device");
}

void check_sampler_faults() {}  // no GPU call has run, so none has faulted

void normalize_hwc_to_chw_device(const normalize_args& args, const normalize_params& params, cudaStream_t) {
  float a[3], b[3];
  if (!detail::validate_normalize(args.in, args.out, args.shape, params, a, b)) return;
  no_gpu("normalize_hwc_to_chw_device");
}

void mix_batch_device(const mix_batch_args& a, const mix_params& p, cudaStream_t) {
  check_mix_batch(a, p);
  if (a.count == 0) return;
  no_gpu("mix_batch_device");
}

void one_hot_device(const one_hot_args& a, cudaStream_t) {
  detail::validate_one_hot(a);
  if (a.count == 0) return;
  no_gpu("one_hot_device");
}

void unpack_bits_device(const bit_planes_args& a, cudaStream_t) {
  detail::validate_bits(a.in, a.out, a.shape, "unpack_bits");
  if (a.shape.count * a.shape.pixels == 0) return;
  no_gpu("unpack_bits_device");
}

void pack_bits_device(const bit_planes_args& a, cudaStream_t) {
  detail::validate_bits(a.in, a.out, a.shape, "pack_bits");
  if (a.shape.count * a.shape.pixels == 0) return;
  no_gpu("pack_bits_device");
}

}  // namespace pinfeed::ops
