#pragma once
/// @file colour.hpp
/// pinfeed's colour ops on 8-bit images (rows of pixels, 1 or 3 samples a pixel,
/// packed): each the arithmetic of torchvision.transforms.v2.functional on a uint8 tensor on the
/// CPU, stated here. Floats are IEEE float32; F(x) is sample x as a float (exact); f32(v) rounds a
/// real or double to float32 (ties to even); fma(a, b, c) = a b + c rounded once (std::fmaf: what
/// PyTorch's vectorised add with alpha computes); trunc rounds toward zero (a float's conversion
/// to uint8 after a clamp to [0, 255]). A factor r is a double; f32(r) and f32(1 - r) are each
/// rounded from the double, as PyTorch rounds a Python float. Nothing but those fma are fused
/// (colour_host.cpp is compiled with -ffp-contract=off, on every target).
///
/// - grey(p) = fma(F(b), f32(0.114), fma(F(g), f32(0.587), f32(F(r) f32(0.2989)))), a float (the
///   weights add to 0.9999: a grey pixel x gives just under x). grayscale: trunc(grey), no
///   clamp; of one channel, the channel itself. Out: 1 channel, or that one repeated 3 times.
/// - blend(x, o, r) = trunc(clamp(fma(o, f32(1 - r), f32(F(x) f32(r))), 0, 255)).
/// - brightness(f): trunc(min(f32(F(x) f32(f)), 255)).
/// - saturation(f): blend(x, floor(grey(p)), f) per sample; one channel is left as it is.
/// - contrast(f): blend(x, m, f) with m = f32(f32(S) / f32(N)), S the sum of floor(grey(p)) (one
///   channel: of the samples) over the N pixels. S is summed exactly here; PyTorch sums in
///   float32, exact while N <= 65,793 (a 256 x 256 image), so larger images can differ in m's last
///   bit, and a sample then by 1.
/// - sharpness(f): inside the border, per sample, S = the sum of its 8 neighbours + 5 x (a 3 x 3
///   kernel of 1/13 with 5/13 at its centre), b = floor((2 S + 13) / 26) (S / 13 rounded; never a
///   tie), out = trunc(clamp(fma(F(b) - F(x), f32(1 - f), F(x)), 0, 255)); the first and last rows
///   and columns as they are; images of 2 rows or columns or fewer as they are.
/// - posterize(bits): x & ((2^bits - 1) << (8 - bits)), bits 1..8.
/// - solarize(t): 255 - x where F(x) >= f32(t), else x.
/// - invert: 255 - x.
/// - hue(h), h in [-0.5, 0.5], 3 channels: each sample to v = f32(F(x) f32(1/255)); then HSV:
///   hi, lo the greatest and least of r, g, b; eq = (hi == lo); s = (hi - lo) / (eq ? 1 : hi);
///   d = eq ? 1 : hi - lo; rc, gc, bc = (hi - r) / d, (hi - g) / d, (hi - b) / d;
///   H = ((hr + hg) + hb) with hr = bc - gc where hi == r, hg = (rc + 2) - bc where hi == g != r,
///   hb = (gc + 4) - rc where hi != r and hi != g (each 0 elsewhere);
///   H = fmod(f32(H f32(1/6)) + 1, 1), then H = remainder(f32(H + f32(h)), 1) (fmod, plus 1 where
///   negative). Back: h6 = f32(H 6), i = floor(h6) mod 6, f = h6 - floor(h6), sf = f32(s f),
///   u = f32(1 - s); q = clamp(f32(f32(1 - sf) v), 0, 1), t = clamp(f32(f32(sf + u) v), 0, 1),
///   p = clamp(f32(u v), 0, 1), v = hi; (R, G, B) = (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q)
///   for i = 0..5; each to trunc(f32(y f32(255.999))). Every step one float32 operation, rounded.

#include <cstdint>

#include "pinfeed/ops/histogram.hpp"  // autocontrast, equalize

namespace pinfeed::ops {

/// Each takes `pixels` pixels of `channels` (1 or 3) samples at `in` and writes as many to `out`
/// (but grayscale_u8, which writes `out_channels`); `out` may be `in` (not for sharpness_u8).
/// Throws std::invalid_argument naming the value for channels other than 1 or 3, a negative or
/// non-finite factor, bits outside 1..8, a threshold outside [0, 255], or a null pointer with
/// pixels > 0.
void grayscale_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out, int out_channels);
void brightness_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out);
void saturation_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out);
void contrast_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out);
void posterize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, int bits, std::uint8_t* out);
void solarize_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double threshold, std::uint8_t* out);
void invert_u8(const std::uint8_t* in, std::int64_t pixels, int channels, std::uint8_t* out);
/// 3 channels only (a grey image has no hue); throws std::invalid_argument naming a factor
/// outside [-0.5, 0.5].
void hue_u8(const std::uint8_t* in, std::int64_t pixels, int channels, double factor, std::uint8_t* out);
/// height x width pixels; `out` must not overlap `in`.
void sharpness_u8(const std::uint8_t* in, std::int64_t height, std::int64_t width, int channels, double factor,
                  std::uint8_t* out);

}  // namespace pinfeed::ops
