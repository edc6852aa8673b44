// pinfeed's Huffman decoder against libjpeg-turbo's own: the same pixels for every window and
// scale of JPEGs of every chroma layout, quality, restart interval and table kind; corrupt streams
// fail with a message naming the file, and never decode to pixels libjpeg would not give.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <turbojpeg.h>

#include "../../loaders/src/jpeg_huffman.hpp"
#include "pinfeed/loaders/decode.hpp"

using namespace pinfeed::loaders;
using huffman = decode_options::huffman_decoder;
constexpr bool kBuilt = PINFEED_JPEG_HUFFMAN_BUILT;  // the build's PINFEED_JPEG_HUFFMAN outcome

namespace {

/// Smooth gradients, a sharp-edged block and noise of the given amplitude: noise 255 gives
/// coefficients of every size (long codes, 10-bit extra bits), noise 0 long runs of zeros.
cv::Mat test_image(int h, int w, int noise, unsigned seed) {
  std::mt19937 rng(seed);
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const bool block = (x / 23 + y / 17) % 5 == 0;
      for (int c = 0; c < 3; ++c) {
        int v = block ? 255 * c / 2 : (x * (c + 1) * 255 / std::max(1, w) + y * 255 / std::max(1, h)) / (c + 2);
        if (noise) v += static_cast<int>(rng() % static_cast<unsigned>(2 * noise + 1)) - noise;
        m.at<cv::Vec3b>(y, x)[c] = static_cast<uchar>(std::clamp(v, 0, 255));
      }
    }
  return m;
}

std::vector<std::byte> opencv_jpeg(const cv::Mat& m, std::vector<int> params) {
  std::vector<uchar> buf;
  REQUIRE(cv::imencode(".jpg", m, buf, params));
  std::vector<std::byte> out(buf.size());
  std::memcpy(out.data(), buf.data(), buf.size());
  return out;
}

/// TurboJPEG encodes every chroma layout, greyscale among them.
std::vector<std::byte> turbo_jpeg(const cv::Mat& m, int subsamp, int quality) {
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(tj, m.data, m.cols, 0, m.rows, TJPF_BGR, &jpeg, &size, subsamp, quality, 0) == 0);
  std::vector<std::byte> out(size);
  std::memcpy(out.data(), jpeg, size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

struct decoded {
  bool ok = false;
  std::string error;
  image_spec spec{};
  std::vector<std::byte> pixels;
};

decoded decode_with(huffman h, const std::vector<std::byte>& bytes, image_region r, std::int64_t min_short_side,
                    bool strict = false) {
  decode_options o;
  o.huffman = h;
  o.strict = strict;
  decoded d;
  try {
    d.spec = decode_image_region(bytes, d.pixels, o, r, min_short_side, "/data/img.jpg");
    d.ok = true;
  } catch (const std::runtime_error& e) {
    d.error = e.what();
  }
  return d;
}

/// Both decoders on the whole image and on random windows at every scale; returns how many
/// decodes compared equal.
int compare_windows(const std::vector<std::byte>& bytes, int h, int w, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<image_region, std::int64_t>> cases = {{{0, 0, h, w}, 0}, {{0, 0, h, w}, 1}};
  for (int i = 0; i < 12; ++i) {
    const std::int64_t wh = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(h));
    const std::int64_t ww = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(w));
    const image_region r{static_cast<std::int64_t>(rng() % static_cast<unsigned>(h - wh + 1)),
                         static_cast<std::int64_t>(rng() % static_cast<unsigned>(w - ww + 1)), wh, ww};
    const std::int64_t shorter = std::min(wh, ww);
    const std::int64_t mins[] = {0, shorter / 2, shorter / 4, shorter / 8};  // scales 1, 1/2, 1/4, 1/8
    cases.emplace_back(r, std::max<std::int64_t>(0, mins[i % 4]));
  }
  int equal = 0;
  for (const auto& [r, min_side] : cases) {
    CAPTURE(r.y);
    CAPTURE(r.x);
    CAPTURE(r.height);
    CAPTURE(r.width);
    CAPTURE(min_side);
    const decoded ours = decode_with(huffman::pinfeed, bytes, r, min_side);
    const decoded theirs = decode_with(huffman::libjpeg, bytes, r, min_side);
    REQUIRE_MESSAGE(ours.ok, ours.error);
    REQUIRE_MESSAGE(theirs.ok, theirs.error);
    CHECK(ours.spec.height == theirs.spec.height);
    CHECK(ours.spec.width == theirs.spec.width);
    if (ours.pixels == theirs.pixels) ++equal;
  }
  CHECK(equal == static_cast<int>(cases.size()));
  return equal;
}

/// decode_image(): libjpeg with pinfeed's decoder against TurboJPEG's tjDecompress2, at every
/// DCT scale.
int compare_whole(const std::vector<std::byte>& bytes, int h, int w) {
  int equal = 0;
  for (const std::int64_t min_side : {0, std::min(h, w) / 2, std::min(h, w) / 4, std::min(h, w) / 8}) {
    CAPTURE(min_side);
    decode_options o;
    o.min_short_side = min_side;
    std::vector<std::byte> ours, theirs;
    const auto a = decode_image(bytes, ours, o, "/data/img.jpg");
    o.huffman = huffman::libjpeg;
    const auto b = decode_image(bytes, theirs, o, "/data/img.jpg");
    CHECK(a.height == b.height);
    CHECK(a.width == b.width);
    CHECK(ours == theirs);
    equal += ours == theirs ? 1 : 0;
  }
  return equal;
}

}  // namespace

TEST_CASE("jpeg_huffman.build_feature_and_self_check") {
  // Built in: the self-check at first use passes on this libjpeg-turbo and pinfeed's decoder is
  // used; not built: libjpeg-turbo's own, and the status says why.
  const auto& status = jpeg_huffman_in_use();
  CAPTURE(status.reason);
  CHECK(status.pinfeed == kBuilt);
  CHECK(status.reason.find(kBuilt ? "self-check passed" : "not built") != std::string::npos);
}

TEST_CASE("jpeg_huffman.same_pixels_as_libjpeg_for_every_layout_quality_and_table") {
  struct shape {
    int h, w;
  };
  const shape shapes[] = {{1, 1}, {9, 17}, {75, 100}, {250, 333}, {389, 510}};
  int compared = 0;
  for (const auto& s : shapes)
    for (const int noise : {0, 12, 255}) {
      const cv::Mat img = test_image(s.h, s.w, noise, static_cast<unsigned>(s.h * 7 + noise));
      for (const int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY})
        for (const int quality : {30, 90, 100}) {
          CAPTURE(s.h);
          CAPTURE(s.w);
          CAPTURE(noise);
          CAPTURE(subsamp);
          CAPTURE(quality);
          const auto bytes = turbo_jpeg(img, subsamp, quality);
          const auto before = detail::pinfeed_huffman_scans();
          compared += compare_windows(bytes, s.h, s.w, static_cast<unsigned>(subsamp + quality));
          compared += compare_whole(bytes, s.h, s.w);
          // Really decoded by pinfeed's decoder (where it is built in).
          CHECK((detail::pinfeed_huffman_scans() > before) == kBuilt);
        }
      // libjpeg's encoder (OpenCV's): restart intervals, optimized (per-image) Huffman tables.
      for (const int rst : {0, 1, 3, 64})
        for (const int optimize : {0, 1}) {
          CAPTURE(rst);
          CAPTURE(optimize);
          const auto bytes = opencv_jpeg(img, {cv::IMWRITE_JPEG_QUALITY, 92, cv::IMWRITE_JPEG_RST_INTERVAL, rst,
                                               cv::IMWRITE_JPEG_OPTIMIZE, optimize});
          const auto before = detail::pinfeed_huffman_scans();
          compared += compare_windows(bytes, s.h, s.w, static_cast<unsigned>(rst * 2 + optimize));
          CHECK((detail::pinfeed_huffman_scans() > before) == kBuilt);
        }
      // Progressive JPEGs stay with libjpeg's decoder, and decode the same either way.
      const auto progressive = opencv_jpeg(img, {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
      const auto before = detail::pinfeed_huffman_scans();
      compared += compare_windows(progressive, s.h, s.w, 5);
      CHECK(detail::pinfeed_huffman_scans() == before);
    }
  MESSAGE(compared << " decodes compared equal");
  CHECK(compared > 5000);
}

TEST_CASE("jpeg_huffman.corrupt_streams_fail_or_match_libjpeg") {
  const cv::Mat img = test_image(120, 160, 40, 3);
  for (const int rst : {0, 2}) {
    CAPTURE(rst);
    const auto good = opencv_jpeg(img, {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_RST_INTERVAL, rst});
    const image_region whole{0, 0, 120, 160};
    std::mt19937 rng(static_cast<unsigned>(11 + rst));
    int both_failed = 0, both_decoded = 0, only_ours_failed = 0, decoded_past_warnings = 0;
    for (int trial = 0; trial < 400; ++trial) {
      auto bad = good;
      if (trial % 4 == 0) {
        bad.resize(700 + rng() % (good.size() - 700));  // truncated inside the entropy-coded data
      } else {
        for (int flips = 1 + trial % 3; flips > 0; --flips)  // bit flips past the headers
          bad[700 + rng() % (bad.size() - 702)] ^= static_cast<std::byte>(1u << (rng() % 8));
      }
      CAPTURE(trial);
      // Strict: each decoder refuses at the first corrupt data it meets.
      const decoded ours = decode_with(huffman::pinfeed, bad, whole, 0, true);
      const decoded theirs = decode_with(huffman::libjpeg, bad, whole, 0, true);
      if (ours.ok && theirs.ok) {
        ++both_decoded;
        CHECK(ours.pixels == theirs.pixels);  // a flip that still decodes decodes the same
      } else if (!ours.ok) {
        CHECK(ours.error.find("/data/img.jpg") != std::string::npos);
        CHECK(ours.error.find("corrupt or truncated JPEG") != std::string::npos);
        (theirs.ok ? only_ours_failed : both_failed) += 1;
      } else {
        // pinfeed decoded what libjpeg refused: only where libjpeg read ahead past the end of
        // a truncated file (its "premature end of JPEG file") for bits no block needed.
        CHECK(theirs.error.find("Premature end of JPEG file") != std::string::npos);
      }
      // The default: libjpeg's verdict and libjpeg's pixels whichever decoder is asked for (pinfeed's
      // hands a scan it finds corrupt to libjpeg's), refused only where the data ends early.
      const decoded ours_lenient = decode_with(huffman::pinfeed, bad, whole, 0);
      const decoded theirs_lenient = decode_with(huffman::libjpeg, bad, whole, 0);
      REQUIRE(ours_lenient.ok == theirs_lenient.ok);
      if (ours_lenient.ok) {
        CHECK(ours_lenient.pixels == theirs_lenient.pixels);
        decoded_past_warnings += ours.ok ? 0 : 1;
      } else {
        CHECK(ours_lenient.error.find("Premature end of JPEG file") != std::string::npos);
      }
    }
    MESSAGE("rst " << rst << ": strict: both failed " << both_failed << ", both decoded " << both_decoded
                   << ", only pinfeed failed " << only_ours_failed << "; by default decoded past warnings "
                   << decoded_past_warnings);
    CHECK(both_failed > 50);
    CHECK(both_decoded > 20);
    // Without restart markers a flip mostly makes the decoder read on to the end of the data; with
    // them libjpeg resyncs at the next one and decodes on.
    CHECK(decoded_past_warnings > (rst ? 50 : 0));
  }
}

TEST_CASE("jpeg_huffman.restart_marker_errors_are_named") {
  const cv::Mat img = test_image(64, 64, 20, 9);
  const auto good = opencv_jpeg(img, {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_RST_INTERVAL, 4});
  // The first RST0 after the scan header: make it RST5.
  std::size_t sos = 0;
  for (std::size_t i = 0; i + 1 < good.size(); ++i)
    if (good[i] == std::byte{0xFF} && good[i + 1] == std::byte{0xDA}) sos = i;
  std::size_t rst0 = 0;
  for (std::size_t i = sos + 2; i + 1 < good.size() && !rst0; ++i)
    if (good[i] == std::byte{0xFF} && good[i + 1] == std::byte{0xD0}) rst0 = i + 1;
  REQUIRE(rst0 > 0);
  auto bad = good;
  bad[rst0] = std::byte{0xD5};
  const decoded ours = decode_with(huffman::pinfeed, bad, {0, 0, 64, 64}, 0, true);
  const decoded theirs = decode_with(huffman::libjpeg, bad, {0, 0, 64, 64}, 0, true);
  REQUIRE_FALSE(ours.ok);
  REQUIRE_FALSE(theirs.ok);
  CHECK(ours.error.find("/data/img.jpg") != std::string::npos);
  CHECK(ours.error.find("RST0") != std::string::npos);  // "found marker 0xd5 instead of RST0"
  // A window above the bad marker never reaches it: both decode it.
  const decoded top = decode_with(huffman::pinfeed, bad, {0, 0, 8, 64}, 0, true);
  CHECK_MESSAGE(top.ok, top.error);
  // By default libjpeg resyncs at the next marker, and both decoders give its pixels.
  const decoded ours_lenient = decode_with(huffman::pinfeed, bad, {0, 0, 64, 64}, 0);
  const decoded theirs_lenient = decode_with(huffman::libjpeg, bad, {0, 0, 64, 64}, 0);
  REQUIRE_MESSAGE(ours_lenient.ok, ours_lenient.error);
  REQUIRE_MESSAGE(theirs_lenient.ok, theirs_lenient.error);
  CHECK(ours_lenient.pixels == theirs_lenient.pixels);
}

TEST_CASE("jpeg_huffman.pixel_limit_holds_where_only_libjpeg_reads_the_header") {
  // A fuzzed JPEG whose frame header says 18730 x 8265: TurboJPEG's header reader refuses the
  // file, libjpeg's reads it. The limit must still stop it before the pixel buffer is allocated.
  const auto path = std::string(PINFEED_FUZZ_DIR) + "/regressions/jpeg/bomb-sof-that-turbojpeg-refuses.jpg";
  std::vector<std::byte> bytes;
  read_file(path, bytes);
  decode_options o;
  o.max_pixels = std::int64_t{1} << 22;
  std::vector<std::byte> out;
  CHECK_THROWS_WITH_AS(decode_image(bytes, out, o, "/data/bomb.jpg"),
                       doctest::Contains("/data/bomb.jpg: image of 18730x8265 pixels exceeds the limit of 4194304"),
                       std::runtime_error);
  CHECK(out.capacity() < (std::size_t{1} << 20));
  // A WebP file whose first chunk is none of VP8, VP8L, VP8X has no size to check: refused.
  read_file(std::string(PINFEED_FUZZ_DIR) + "/regressions/image/webp-unknown-first-chunk", bytes);
  CHECK_THROWS_WITH_AS(decode_image(bytes, out, o, "/data/odd.webp"), doctest::Contains("not a decodable image"),
                       std::runtime_error);
}
