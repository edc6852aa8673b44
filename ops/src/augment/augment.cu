// augment.hpp's batch on the device. A round is up to four launches: the counts of the images
// whose op needs them (blocks of an image add their shared-memory counts into the image's with
// atomic additions: sums and counts are the same in any order), the tables (a thread an image,
// aug_math.hpp's make_tables), and the pixels (an image a blockIdx.y, threads striding over its
// pixels, aug_math.hpp's apply_pixel; the blur jobs' pixels by a kernel of their own, which
// computes the taps first, blur_math.hpp's). Nothing is allocated and nothing waits on the host: the
// scratch is the caller's, cleared by cudaMemsetAsync on the stream.
#include <algorithm>
#include <string>

#include "pinfeed/ops/detail/job_launch.hpp"
#include "aug_math.hpp"
#include "blur_math.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::ops {
namespace {

constexpr int kThreads = 256;

/// A thread's first unit of its block's job (the x blocks stride over the job's units together),
/// and the stride.
__device__ __forceinline__ std::uint64_t first_unit() { return blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ std::uint64_t unit_stride() { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }
constexpr int kTableWords = static_cast<int>((sizeof(aug::image_tables) + 3) / 4);

__global__ void counts_kernel(const aug_job* __restrict__ jobs, std::size_t first, const std::uint8_t* __restrict__ from,
                              aug::image_counts* __restrict__ counts) {
  const aug_job& j = jobs[first + blockIdx.y];
  if (!aug::needs_counts(j.kind)) return;  // the whole block: the barriers below stay uniform
  __shared__ aug::image_counts local;
  for (int k = threadIdx.x; k < 3 * 256; k += blockDim.x) (&local.hist[0][0])[k] = 0;
  if (threadIdx.x == 0) local.sum = 0;
  __syncthreads();
  const int c = j.channels;
  const bool histogram = aug::needs_histogram(j.kind);
  const std::uint64_t pixels = std::uint64_t{j.height} * j.width;
  const std::uint8_t* in = from + j.offset;
  unsigned long long sum = 0;
  for (std::uint64_t p = first_unit(); p < pixels; p += unit_stride()) {
    const std::uint8_t* px = in + p * static_cast<std::uint64_t>(c);
    if (histogram)
      for (int k = 0; k < c; ++k) atomicAdd(&local.hist[k][px[k]], 1u);
    else
      sum += aug::contrast_term(px, c);
  }
  if (!histogram && sum != 0) atomicAdd(&local.sum, sum);
  __syncthreads();
  aug::image_counts& g = counts[first + blockIdx.y];
  if (histogram)
    for (int k = threadIdx.x; k < c * 256; k += blockDim.x)
      if (const std::uint32_t v = (&local.hist[0][0])[k]; v != 0) atomicAdd(&g.hist[0][0] + k, v);
  if (threadIdx.x == 0 && !histogram && local.sum != 0) atomicAdd(&g.sum, local.sum);
}

__global__ void tables_kernel(const aug_job* __restrict__ jobs, std::size_t samples, const aug::image_counts* __restrict__ counts,
                              aug::image_tables* __restrict__ tables) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= samples) return;
  const aug_job j = jobs[i];
  if (aug::needs_counts(j.kind)) aug::make_tables(j, counts[i], tables[i]);
}

__global__ void apply_kernel(const aug_job* __restrict__ jobs, std::size_t first, const std::uint8_t* __restrict__ from,
                             std::uint8_t* __restrict__ to, const aug::image_tables* __restrict__ tables, bool copy_only) {
  // Read where it is (global memory), not copied to a local: the simulator's PTX loses what the
  // inlined functions read through a generic pointer into a thread's local copy.
  const aug_job& j = jobs[first + blockIdx.y];
  if (!copy_only && j.kind == aug_kind::blur) return;  // blur_kernel's (the whole block)
  __shared__ aug::image_tables t;
  if (!copy_only && aug::needs_counts(j.kind)) {  // the whole block: the barrier stays uniform
    const auto* src = reinterpret_cast<const std::uint32_t*>(tables + first + blockIdx.y);
    auto* dst = reinterpret_cast<std::uint32_t*>(&t);
    for (int k = threadIdx.x; k < kTableWords; k += blockDim.x) dst[k] = src[k];
    __syncthreads();
  }
  const std::uint64_t pixels = std::uint64_t{j.height} * j.width;
  const std::uint8_t* in = from + j.offset;
  std::uint8_t* out = to + j.offset;
  for (std::uint64_t p = first_unit(); p < pixels; p += unit_stride()) {
    if (copy_only) {
      for (int k = 0; k < j.channels; ++k) out[p * j.channels + k] = in[p * j.channels + k];
      continue;
    }
    aug::apply_pixel(j, in, t, p, out);
  }
}

/// The blur jobs of a round (blockIdx.y: the job; others leave at once, the whole block): each
/// block computes its job's taps into shared memory step by step as blur_math.hpp's blur_taps
/// does (the exponents and exps a tap a thread, the largest and the sum in order by one thread),
/// then its threads stride over the image's pixels, each from its window (blur_pixel).
__global__ void blur_kernel(const aug_job* __restrict__ jobs, std::size_t first, const std::uint8_t* __restrict__ from,
                            std::uint8_t* __restrict__ to) {
  const aug_job& j = jobs[first + blockIdx.y];
  if (j.kind != aug_kind::blur) return;  // the whole block: the barriers below stay uniform
  __shared__ float taps[2 * aug::kMostBlurTaps];
  __shared__ float top[2], sum[2];
  const int kx = aug::blur_kx(j), n = kx + aug::blur_ky(j);
  const auto axis = [&](int i) { return i < kx ? 0 : 1; };  // the tap's kernel: 0 across, 1 down
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    taps[i] = i < kx ? aug::tap_exponent(i, kx, j.r) : aug::tap_exponent(i - kx, n - kx, j.rest);
  __syncthreads();
  if (threadIdx.x < 2) top[threadIdx.x] = threadIdx.x == 0 ? aug::largest(taps, kx) : aug::largest(taps + kx, n - kx);
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) taps[i] = aug::exp_float(aug::sub(taps[i], top[axis(i)]));
  __syncthreads();
  if (threadIdx.x < 2) sum[threadIdx.x] = threadIdx.x == 0 ? aug::sum_in_order(taps, kx) : aug::sum_in_order(taps + kx, n - kx);
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) taps[i] = aug::normal_or_zero(aug::quo(taps[i], sum[axis(i)]));
  __syncthreads();
  for (std::uint64_t p = first_unit(); p < std::uint64_t{j.height} * j.width; p += unit_stride())
    aug::blur_pixel(j, from + j.offset, taps, taps + kx, static_cast<std::int64_t>(p / j.width), static_cast<std::int64_t>(p % j.width),
                    to + j.offset + p * j.channels);
}

/// Each thread a value of its sample's box (blockIdx.y: the sample; the box's values strided over
/// the x blocks); only the boxes are written.
__global__ void erase_float_kernel(const aug_job* __restrict__ jobs, std::size_t first, float* __restrict__ images, bool chw) {
  const aug_job& j = jobs[first + blockIdx.y];
  if (j.kind != aug_kind::erase) return;
  const std::uint64_t values = std::uint64_t{j.box[2]} * j.box[3] * j.channels;
  for (std::uint64_t n = first_unit(); n < values; n += unit_stride())
    aug::erase_float_value(j, n, chw, images + j.offset);
}

static_assert(sizeof(aug::image_counts) % alignof(aug::image_counts) == 0 && alignof(aug::image_tables) <= alignof(aug::image_counts));

}  // namespace

void augment_batch_device(const aug_job* device_jobs, const aug_job* host_jobs, std::size_t samples, std::size_t rounds,
                          std::uint8_t* images, std::uint8_t* spare, std::uint64_t bytes, void* scratch,
                          std::uint64_t scratch_bytes, cudaStream_t stream) {
  check_aug_jobs(host_jobs, samples, rounds, bytes);
  if (samples * rounds == 0) return;
  if (device_jobs == nullptr || images == nullptr || spare == nullptr || scratch == nullptr)
    throw pinfeed::invalid_argument("augment_batch_device: a device pointer is null");
  if (images < spare + bytes && spare < images + bytes) throw pinfeed::invalid_argument("augment_batch_device: the buffers overlap");
  if (scratch_bytes < aug_scratch_bytes(samples))
    throw pinfeed::invalid_argument("augment_batch_device: scratch of " + std::to_string(scratch_bytes) + " bytes, " +
                                    std::to_string(samples) + " images need " + std::to_string(aug_scratch_bytes(samples)));
  auto* counts = static_cast<aug::image_counts*>(scratch);
  auto* tables = reinterpret_cast<aug::image_tables*>(counts + samples);
  // The pixels of a round: the blur jobs' by blur_kernel, the others' by apply_kernel (each leaves
  // the other's jobs, and a launch without jobs of its own is left out).
  const auto pixels = [&](const aug_job* d_round, const aug_job* h_round, const std::uint8_t* from, std::uint8_t* to, bool copy_only) {
    const auto units = [&](bool blur) {
      return [=](std::size_t i) {
        const bool is_blur = !copy_only && h_round[i].kind == aug_kind::blur;
        return is_blur == blur ? std::uint64_t{h_round[i].height} * h_round[i].width : std::uint64_t{0};
      };
    };
    detail::launch_over_jobs("apply_kernel", samples, kThreads, units(false), [&](dim3 grid, std::size_t first) {
      apply_kernel<<<grid, kThreads, 0, stream>>>(d_round, first, from, to, tables, copy_only);
    });
    detail::launch_over_jobs("blur_kernel", samples, kThreads, units(true), [&](dim3 grid, std::size_t first) {
      blur_kernel<<<grid, kThreads, 0, stream>>>(d_round, first, from, to);
    });
  };
  for (std::size_t r = 0; r < rounds; ++r) {
    const aug_job* h_round = host_jobs + r * samples;
    const aug_job* d_round = device_jobs + r * samples;
    const std::uint8_t* from = r % 2 == 0 ? images : spare;
    std::uint8_t* to = r % 2 == 0 ? spare : images;
    if (std::any_of(h_round, h_round + samples, [](const aug_job& j) { return aug::needs_counts(j.kind); })) {
      // The tables too: a job reads only its own rows of them, but the apply kernel copies whole
      // entries (initcheck would count the rest as unset).
      PINFEED_CUDA_TRY(cudaMemsetAsync(counts, 0, aug_scratch_bytes(samples), stream));
      detail::launch_over_jobs(
          "counts_kernel", samples, kThreads, [&](std::size_t i) { return std::uint64_t{h_round[i].height} * h_round[i].width; },
          [&](dim3 grid, std::size_t first) { counts_kernel<<<grid, kThreads, 0, stream>>>(d_round, first, from, counts); });
      tables_kernel<<<static_cast<unsigned>((samples + 63) / 64), 64, 0, stream>>>(d_round, samples, counts, tables);
      PINFEED_CUDA_TRY(cudaGetLastError());
    }
    pixels(d_round, h_round, from, to, false);
  }
  if (rounds % 2 == 1) pixels(device_jobs, host_jobs, spare, images, true);  // the result back, image by image
}

void erase_float_device(const aug_job* device_jobs, const aug_job* host_jobs, std::size_t samples, float* images,
                        std::uint64_t floats, mix_layout layout, cudaStream_t stream) {
  detail::check_erase_float_jobs(host_jobs, samples, images, floats);
  if (samples == 0) return;
  if (device_jobs == nullptr) throw pinfeed::invalid_argument("erase_float_device: the device jobs are null");
  const bool chw = layout == mix_layout::chw;
  detail::launch_over_jobs(
      "erase_float_kernel", samples, kThreads,
      [&](std::size_t i) {
        const aug_job& j = host_jobs[i];
        return j.kind == aug_kind::erase ? std::uint64_t{j.box[2]} * j.box[3] * j.channels : std::uint64_t{0};
      },
      [&](dim3 grid, std::size_t first) { erase_float_kernel<<<grid, kThreads, 0, stream>>>(device_jobs, first, images, chw); });
}

}  // namespace pinfeed::ops
