#pragma once
// Encoded test images and OpenCV's decode of them, for the decoder and image-file tests.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <turbojpeg.h>

#include "image_fixtures.hpp"

namespace pinfeed::test {

/// The shared test picture (image_fixtures.hpp) as OpenCV keeps it, BGR.
inline cv::Mat picture(int h, int w, int seed) {
  std::vector<std::uint8_t> rgb = test::picture_rgb(h, w, seed);
  cv::Mat bgr;
  cv::cvtColor(cv::Mat(h, w, CV_8UC3, rgb.data()), bgr, cv::COLOR_RGB2BGR);
  return bgr;
}

inline std::vector<std::byte> encode(const cv::Mat& m, const std::string& ext, std::vector<int> params = {}) {
  std::vector<uchar> buf;
  REQUIRE(cv::imencode(ext, m, buf, params));
  std::vector<std::byte> out(buf.size());
  std::memcpy(out.data(), buf.data(), buf.size());
  return out;
}

inline std::vector<std::byte> encode_cmyk_jpeg(int h, int w) {
  std::vector<unsigned char> cmyk(static_cast<std::size_t>(h * w * 4));
  for (int i = 0; i < h * w; ++i) {
    cmyk[4 * i] = static_cast<unsigned char>(i % 200);
    cmyk[4 * i + 1] = 60;
    cmyk[4 * i + 2] = 120;
    cmyk[4 * i + 3] = 30;
  }
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(tj, cmyk.data(), w, 0, h, TJPF_CMYK, &jpeg, &size, TJSAMP_444, 90, 0) == 0);
  std::vector<std::byte> out(size);
  std::memcpy(out.data(), jpeg, size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

/// 8-bit RGB pixels (HWC) as a JPEG with TurboJPEG's chroma `subsamp` (TJSAMP_444, _422, _420, _GRAY).
inline std::vector<std::byte> turbojpeg(const std::uint8_t* rgb, int w, int h, int subsamp, int quality = 90) {
  tjhandle tj = tjInitCompress();
  REQUIRE(tj != nullptr);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &size, subsamp, quality, 0) == 0);
  std::vector<std::byte> out(reinterpret_cast<std::byte*>(jpeg), reinterpret_cast<std::byte*>(jpeg) + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

/// The reference: OpenCV's own decode, as RGB.
inline cv::Mat reference_rgb(const std::vector<std::byte>& bytes) {
  const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<std::byte*>(bytes.data()));
  cv::Mat bgr = cv::imdecode(raw, cv::IMREAD_COLOR), rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

inline int max_abs_diff(const std::vector<std::byte>& got, const cv::Mat& ref) {
  int worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<int>(got[i]) - static_cast<int>(ref.data[i])));
  return worst;
}

}  // namespace pinfeed::test
