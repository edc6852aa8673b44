#pragma once
/// @file blur.hpp
/// pinfeed's Gaussian blur on 8-bit images (rows of pixels, 1 or 3 samples a pixel, packed):
/// torchvision.transforms.v2.functional.gaussian_blur on a uint8 tensor on the CPU, stated here
/// (f32 rounds to float32, ties to even; every step one float32 operation, nothing fused:
/// blur_host.cpp is compiled with -ffp-contract=off on every target).
///
/// - The 1-D kernel of odd size k and sigma s (torchvision's _get_gaussian_kernel1d):
///   lim = (k - 1) / (2 sqrt 2) in double; x = torch.linspace(-lim, lim, k) in float32: a =
///   f32(-lim), b = f32(lim), step = f32((b - a) / (k - 1)), x[i] = a + step i for i < k / 2, else
///   b - step (k - 1 - i); v[i] = -(f32(x[i] / f32(s)))^2; kernel[i] = f32(e[i] / sum(e)) with
///   e[i] = exp(v[i] - max v) (float32 each: pinfeed's own exp in double steps rounded to float,
///   the same on the host and the GPU; PyTorch's vectorised exp is within an ulp of it); a tap
///   below float's least normal is 0 (so a process flushing subnormals computes the same taps).
///   sigma is taken as a float32: one that rounds to 0 or past float's range is refused.
/// - The 2-D kernel: K[i][j] = f32(ky[i] kx[j]); sigma by default 0.15 k + 0.35 per axis.
/// - The image padded by reflection (no edge repeated) by kx / 2 columns and ky / 2 rows, each
///   output sample the float sum of K times the window, rounded to the nearest (ties to even) and
///   converted to uint8 (clamped to [0, 255]).
/// - Here the sum is taken as PyTorch's conv2d cannot be repeated (its order is its backend's):
///   rows first, sum over j of kx[j] p in float32, then columns, sum over i of ky[i] r. The two
///   agree to a few float32 ulps of 255: a sample differs by 1 only where the exact sum is that
///   close to a half (tests/loaders/blur_test.cpp counts them against torchvision).
/// - torchvision refuses a padding not smaller than the image (k / 2 >= width or height): so does
///   this.

#include <cstdint>
#include <vector>

namespace pinfeed::ops {

/// torchvision's 1-D Gaussian kernel of `size` taps (odd, >= 1) and `sigma` (> 0), as above.
/// Throws std::invalid_argument naming a size that is even or below 1, or a sigma not > 0 or not finite.
[[nodiscard]] std::vector<float> gaussian_kernel1d(int size, double sigma);

/// Blurs height x width pixels of `channels` (1 or 3) at `in` into `out` (which may be `in`), with
/// kernel kx x ky (odd; kx across, ky down) and sigmas sx, sy. Throws std::invalid_argument naming
/// the bad value: an even or non-positive kernel, a sigma not > 0, other channel counts, or an
/// image not larger than half the kernel in either direction.
void gaussian_blur_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, int kx, int ky,
                      double sx, double sy, std::uint8_t* out);

}  // namespace pinfeed::ops
