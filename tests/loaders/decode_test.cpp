// decode: JPEG (colour, grey, CMYK, windows at DCT scales), PNG, WebP, BMP, TIFF, PNM against OpenCV's decode.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "codec_fixtures.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/node_plan.hpp"

#include <oneapi/tbb/global_control.h>

using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::encode;
using pinfeed::test::encode_cmyk_jpeg;
using pinfeed::test::max_abs_diff;
using pinfeed::test::picture;
using pinfeed::test::reference_rgb;

TEST_CASE("decode.formats_match_a_reference_decode") {
  std::vector<std::byte> out;
  SUBCASE("JPEG colour") {
    const auto jpg = encode(picture(75, 100, 1), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90});
    const auto spec = decode_image(jpg, out, {}, "a.jpg");
    CHECK(spec.height == 75);
    CHECK(spec.width == 100);
    CHECK(max_abs_diff(out, reference_rgb(jpg)) <= 1);
  }
  SUBCASE("JPEG greyscale becomes RGB") {
    cv::Mat grey;
    cv::cvtColor(picture(40, 30, 2), grey, cv::COLOR_BGR2GRAY);
    const auto jpg = encode(grey, ".jpg");
    const auto spec = decode_image(jpg, out, {}, "g.jpg");
    CHECK(spec.channels == 3);
    for (std::size_t p = 0; p < 40 * 30; ++p) {
      REQUIRE(out[3 * p] == out[3 * p + 1]);
      REQUIRE(out[3 * p] == out[3 * p + 2]);
    }
    CHECK(max_abs_diff(out, reference_rgb(jpg)) <= 1);
  }
  SUBCASE("JPEG CMYK becomes RGB") {
    const auto jpg = encode_cmyk_jpeg(24, 32);
    const auto spec = decode_image(jpg, out, {}, "c.jpg");
    CHECK(spec.height == 24);
    CHECK(spec.width == 32);
    // Pillow's CMYK to RGB (formats_test.cpp holds it to Pillow's pixels), OpenCV's rounds apart.
    CHECK(max_abs_diff(out, reference_rgb(jpg)) <= 1);
  }
  SUBCASE("PNG and BMP are exact") {
    const cv::Mat pic = picture(33, 47, 3);
    cv::Mat rgb;
    cv::cvtColor(pic, rgb, cv::COLOR_BGR2RGB);
    for (const char* ext : {".png", ".bmp", ".tiff"}) {
      CAPTURE(ext);
      const auto bytes = encode(pic, ext);
      const auto spec = decode_image(bytes, out, {}, ext);
      CHECK(spec.height == 33);
      CHECK(spec.width == 47);
      CHECK(max_abs_diff(out, rgb) == 0);
      const image_size s = peek_size(bytes);
      CHECK(s.width == 47);
      CHECK(s.height == 33);
    }
  }
  SUBCASE("DCT scaling picks the smallest scale that keeps the short side") {
    const auto jpg = encode(picture(300, 400, 4), ".jpg");
    decode_options o;
    o.min_short_side = 100;
    const auto spec = decode_image(jpg, out, o, "s.jpg");
    CHECK(std::min(spec.height, spec.width) >= 100);
    CHECK(spec.width < 400);
    CHECK(spec.height == 150);  // 1/2 scale: 200x150 (1/4 would give 75, too small)
    CHECK(spec.width == 200);
    CHECK(out.size() == spec.bytes());
  }
}

TEST_CASE("decode.encode_jpeg_round_trip_and_bad_input") {
  const int w = 97, h = 61;
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto* px = rgb.data() + (y * w + x) * 3;
      px[0] = static_cast<std::uint8_t>(x * 2);
      px[1] = static_cast<std::uint8_t>(y * 4);
      px[2] = 128;
    }
  const auto jpeg = encode_jpeg(rgb, w, h, 95);
  CHECK(peek_size(jpeg).width == w);
  CHECK(peek_size(jpeg).height == h);
  std::vector<std::byte> out;
  const image_spec spec = decode_image(jpeg, out, {}, "encoded");
  REQUIRE(spec.height == h);
  REQUIRE(spec.width == w);
  int worst = 0;  // lossy, but close on a smooth image
  for (std::size_t i = 0; i < rgb.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<int>(rgb[i]) - static_cast<int>(out[i])));
  CHECK(worst < 24);
  CHECK_THROWS_WITH_AS((void)encode_jpeg(rgb, w, h + 1), doctest::Contains("97 x 62"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)encode_jpeg(rgb, w, h, 0), doctest::Contains("quality"), std::invalid_argument);
  CHECK_THROWS_AS((void)encode_jpeg({}, 0, 0), std::invalid_argument);
}

TEST_CASE("decode.bad_bytes_name_the_file_and_reason") {
  std::vector<std::byte> out;
  const auto jpg = encode(picture(64, 64, 5), ".jpg");
  const auto png = encode(picture(64, 64, 5), ".png");
  auto expect = [&](std::vector<std::byte> bytes, const char* needle, decode_options o = {}) {
    CAPTURE(needle);
    CHECK_THROWS_WITH_AS(decode_image(bytes, out, o, "/data/x.jpg"), doctest::Contains(needle), std::runtime_error);
    CHECK_THROWS_WITH_AS(decode_image(bytes, out, o, "/data/x.jpg"), doctest::Contains("/data/x.jpg"), std::runtime_error);
  };
  expect({}, "empty file");
  expect(std::vector<std::byte>(jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() / 2)), "JPEG");
  std::vector<std::byte> text(100, std::byte{'a'});
  expect(text, "not a decodable image");
  auto corrupt = png;
  for (std::size_t i = 40; i < corrupt.size(); ++i) corrupt[i] = std::byte{0x5A};
  expect(corrupt, "");  // any message, but an error
  decode_options tight;
  tight.max_pixels = 1000;
  expect(jpg, "exceeds the limit of 1000 pixels", tight);
  expect(png, "exceeds the limit of 1000 pixels", tight);
  for (const char* ext : {".webp", ".tiff", ".bmp"}) {
    CAPTURE(ext);
    expect(encode(picture(64, 64, 5), ext), "exceeds the limit of 1000 pixels", tight);
  }
  // WebP lossless and lossy headers both give the size.
  for (int q : {101, 80}) {
    const auto webp = encode(picture(37, 53, 1), ".webp", {cv::IMWRITE_WEBP_QUALITY, q});
    CHECK(peek_size(webp).width == 53);
    CHECK(peek_size(webp).height == 37);
  }
  CHECK_THROWS_WITH_AS(read_file("/nonexistent/a.jpg", out), doctest::Contains("/nonexistent/a.jpg"), std::runtime_error);
}

TEST_CASE("decode.region_equals_the_window_of_a_full_decode") {
  std::vector<std::byte> full, region;
  // TurboJPEG-encoded JPEGs at 4:4:4, 4:2:2 and 4:2:0 chroma subsampling, and a PNG.
  auto tj_jpeg = [](const cv::Mat& bgr, int subsamp) {
    cv::Mat rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    return test::turbojpeg(rgb.data, rgb.cols, rgb.rows, subsamp);
  };
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    {
      const cv::Mat pic = picture(375, 500, 7 + variant);
      const auto bytes = variant == 3 ? encode(pic, ".png") : tj_jpeg(pic, variant == 0 ? TJSAMP_444 : variant == 1 ? TJSAMP_422 : TJSAMP_420);
      const auto whole = decode_image(bytes, full, {}, "full");
      for (const image_region r : {image_region{0, 0, 375, 500}, image_region{17, 33, 200, 151}, image_region{100, 250, 275, 250},
                                   image_region{371, 490, 50, 50}}) {
        CAPTURE(r.y);
        CAPTURE(r.x);
        const auto spec = decode_image_region(bytes, region, {}, r, 0, "region");
        const std::int64_t h = std::min(r.height, whole.height - r.y), w = std::min(r.width, whole.width - r.x);
        REQUIRE(spec.height == h);
        REQUIRE(spec.width == w);
        for (std::int64_t y = 0; y < h; ++y)
          REQUIRE(std::memcmp(region.data() + y * w * 3, full.data() + ((r.y + y) * whole.width + r.x) * 3,
                              static_cast<std::size_t>(w) * 3) == 0);
      }
    }
  }
  // Scaled: a 300x400 window wanting >= 100 on its short side decodes at 1/2 (150 >= 100, 75 < 100)
  // and equals the window of a 1/2-scale full decode.
  const auto bytes = encode(picture(480, 640, 9), ".jpg");
  decode_options half;
  half.min_short_side = 240;  // full 480x640 -> 1/2 is 240x320
  const auto whole = decode_image(bytes, full, half, "full");
  REQUIRE(whole.height == 240);
  const auto spec = decode_image_region(bytes, region, {}, {40, 80, 300, 400}, 100, "region");
  REQUIRE(spec.height == 150);
  REQUIRE(spec.width == 200);
  for (std::int64_t y = 0; y < 150; ++y)
    REQUIRE(std::memcmp(region.data() + y * 200 * 3, full.data() + ((20 + y) * 320 + 40) * 3, 200 * 3) == 0);
  // Truncated JPEG: an error naming the file, not a crash.
  std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 3));
  CHECK_THROWS_WITH_AS(decode_image_region(cut, region, {}, {300, 0, 100, 100}, 0, "/x/cut.jpg"),
                       doctest::Contains("/x/cut.jpg"), std::runtime_error);
}

TEST_CASE("decode.peek_size_takes_the_first_of_a_repeated_tiff_tag") {
  // The pixel limit is checked against the header's size before decoding: a TIFF that gives its
  // width twice must be sized as libtiff decodes it (the first), not by a small later one.
  std::vector<std::uint8_t> t = {'I', 'I', 42, 0, 8, 0, 0, 0, 3, 0};
  auto entry = [&](std::uint16_t tag, std::uint16_t type, std::uint32_t value) {
    const std::uint8_t e[12] = {static_cast<std::uint8_t>(tag), static_cast<std::uint8_t>(tag >> 8), static_cast<std::uint8_t>(type), 0, 1, 0, 0, 0,
                                static_cast<std::uint8_t>(value), static_cast<std::uint8_t>(value >> 8),
                                static_cast<std::uint8_t>(value >> 16), static_cast<std::uint8_t>(value >> 24)};
    t.insert(t.end(), e, e + 12);
  };
  entry(256, 3, 777);  // ImageWidth, SHORT
  entry(257, 3, 7);    // ImageLength
  entry(256, 4, 59);   // ImageWidth again, LONG
  const auto s = peek_size(std::as_bytes(std::span(t)));
  CHECK(s.width == 777);
  CHECK(s.height == 7);
  // A width of another type (here LONG8) leaves the size unknown: the TIFF is refused by name
  // before libtiff allocates what it says.
  t.resize(10);
  entry(256, 16, 5);
  entry(257, 3, 7);
  entry(258, 3, 8);
  CHECK(peek_size(std::as_bytes(std::span(t))).width == 0);
  std::vector<std::byte> out;
  CHECK_THROWS_WITH_AS((void)decode_image(std::as_bytes(std::span(t)), out, {}, "odd.tiff"),
                       doctest::Contains("odd.tiff: a TIFF image whose header gives no size: the first directory must give ImageWidth"), std::runtime_error);
}

namespace {
void put_le(std::vector<std::byte>& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

/// A 24-bit BMP with the 12-byte core header (Windows 2.x / OS/2 1.x): 16-bit width and height.
std::vector<std::byte> core_header_bmp(int w, int h, bool with_pixels) {
  const std::size_t stride = (static_cast<std::size_t>(w) * 3 + 3) / 4 * 4;
  std::vector<std::byte> b{std::byte{'B'}, std::byte{'M'}};
  put_le(b, 26 + (with_pixels ? stride * static_cast<std::size_t>(h) : 0), 4);
  put_le(b, 0, 4);
  put_le(b, 26, 4);  // pixel data offset
  put_le(b, 12, 4);  // the core header's size
  put_le(b, static_cast<std::uint64_t>(w), 2);
  put_le(b, static_cast<std::uint64_t>(h), 2);
  put_le(b, 1, 2);   // planes
  put_le(b, 24, 2);  // bits a pixel
  if (with_pixels)
    for (int y = 0; y < h; ++y)
      for (std::size_t x = 0; x < stride; ++x) b.push_back(static_cast<std::byte>((x * 7 + static_cast<std::size_t>(y) * 3) & 0xFF));
  return b;
}
}  // namespace

TEST_CASE("decode.every_formats_header_gives_its_size_and_the_limit_holds_for_each") {
  std::vector<std::byte> out;
  decode_options tight;
  tight.max_pixels = 1000;
  // BMP, core header: 127 x 64 (read as 32-bit fields this was 4194431 x 524289), decoded at that size.
  const auto bmp = core_header_bmp(127, 64, true);
  CHECK(peek_size(bmp).width == 127);
  CHECK(peek_size(bmp).height == 64);
  const image_spec s = decode_image(bmp, out, {}, "os2.bmp");
  CHECK(s.width == 127);
  CHECK(s.height == 64);
  CHECK_THROWS_WITH_AS((void)decode_image(bmp, out, tight, "os2.bmp"), doctest::Contains("os2.bmp: image of 127x64 pixels exceeds the limit of 1000"),
                       std::runtime_error);
  // A height of 32768 or more stays a height (it made a negative width, past the limit, before).
  const auto tall = core_header_bmp(3000, 40000, false);
  CHECK(peek_size(tall).width == 3000);
  CHECK(peek_size(tall).height == 40000);
  decode_options million;
  million.max_pixels = 1000000;
  CHECK_THROWS_WITH_AS((void)decode_image(tall, out, million, "tall.bmp"), doctest::Contains("3000x40000 pixels exceeds"),
                       std::runtime_error);
  // PNM: the header's tokens past comments; the limit applies before OpenCV allocates.
  std::string ppm = "P6\n# a comment 99 99\n 40  # another\n 30\n255\n";
  ppm += std::string(40 * 30 * 3, '\x40');
  const auto pnm = std::as_bytes(std::span(ppm));
  CHECK(peek_size(pnm).width == 40);
  CHECK(peek_size(pnm).height == 30);
  CHECK(decode_image(pnm, out, {}, "a.ppm").width == 40);
  CHECK_THROWS_WITH_AS((void)decode_image(pnm, out, tight, "a.ppm"), doctest::Contains("a.ppm: image of 40x30 pixels exceeds"),
                       std::runtime_error);
  const std::string bad_pnm = "P5\n# no size at all\n";
  CHECK(peek_size(std::as_bytes(std::span(bad_pnm))).width == 0);
  CHECK_THROWS_WITH_AS((void)decode_image(std::as_bytes(std::span(bad_pnm)), out, {}, "b.pgm"),
                       doctest::Contains("b.pgm: a PNM image whose header gives no size"), std::runtime_error);
  // BigTIFF: 8-byte offsets and counts, a LONG8 width.
  std::vector<std::byte> big{std::byte{'I'}, std::byte{'I'}};
  put_le(big, 43, 2);
  put_le(big, 8, 2);
  put_le(big, 0, 2);
  put_le(big, 16, 8);  // the first directory
  put_le(big, 2, 8);   // two entries
  for (const auto& [tag, type, value] : {std::tuple{256, 16, 70000}, std::tuple{257, 4, 70000}}) {
    put_le(big, static_cast<std::uint64_t>(tag), 2);
    put_le(big, static_cast<std::uint64_t>(type), 2);
    put_le(big, 1, 8);
    put_le(big, static_cast<std::uint64_t>(value), 8);
  }
  CHECK(peek_size(big).width == 70000);
  CHECK(peek_size(big).height == 70000);
  CHECK_THROWS_WITH_AS((void)decode_image(big, out, {}, "big.tif"), doctest::Contains("big.tif: image of 70000x70000 pixels exceeds"),
                       std::runtime_error);
  // A JPEG's size from its frame header, past stray bytes between segments as libjpeg reads it,
  // and none where a scan comes before any frame.
  auto jpg = encode(picture(37, 53, 2), ".jpg");
  CHECK(peek_size(jpg).width == 53);
  std::vector<std::byte> sos_first{std::byte{0xFF}, std::byte{0xD8}, std::byte{0xFF}, std::byte{0xDA}, std::byte{0},
                                   std::byte{2}};
  CHECK(peek_size(sos_first).width == 0);
  const std::vector<std::byte> cut(jpg.begin(), jpg.begin() + 8);
  CHECK(peek_size(cut).width == 0);
}

TEST_CASE("decode.a_decode_over_its_memory_is_refused_before_anything_is_allocated") {
  const cv::Mat pic = picture(30, 40, 4);  // 1,200 pixels
  const auto jpg = encode(pic, ".jpg");
  const auto progressive = encode(pic, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  const auto png = encode(pic, ".png");
  const auto tif = encode(pic, ".tif");
  const auto webp = encode(pic, ".webp");
  const auto bmp = encode(pic, ".bmp");
  // The estimate, per pixel of the whole image: 3 (RGB) and what each decoder holds beside it.
  CHECK(decode_memory_need(jpg, {}, false).bytes == 1200 * 3);
  CHECK(decode_memory_need(jpg, {}, true).bytes == 1200 * 3);  // a JPEG window is decoded as a window
  CHECK(decode_memory_need(progressive, {}, false).bytes == 1200 * 9);
  CHECK(decode_memory_need(progressive, {}, false).parts.find("DCT coefficients") != std::string::npos);
  CHECK(decode_memory_need(png, {}, false).bytes == 1200 * 3);
  CHECK(decode_memory_need(png, {}, true).bytes == 1200 * 6);  // decoded whole, then cut
  CHECK(decode_memory_need(tif, {}, false).bytes == 1200 * 7);
  CHECK(decode_memory_need(webp, {}, false).bytes == 1200 * 7);
  CHECK(decode_memory_need(bmp, {}, true).bytes == 1200 * 6);
  const std::vector<std::byte> junk(16, std::byte{7});
  CHECK(decode_memory_need(junk, {}, false).bytes == 0);

  // At the estimate it decodes; one byte under, it is refused by name, for every format and path.
  std::vector<std::byte> out;
  for (const auto* file : {&jpg, &progressive, &png, &tif, &webp, &bmp}) {
    for (const bool region : {false, true}) {
      CAPTURE(region);
      decode_options o;
      o.max_decode_bytes = decode_memory_need(*file, o, region).bytes;
      const auto run = [&] {
        return region ? decode_image_region(*file, out, o, {5, 6, 10, 12}, 0, "m.img")
                      : decode_image(*file, out, o, "m.img");
      };
      CHECK(run().height > 0);
      *o.max_decode_bytes -= 1;
      std::vector<std::byte>().swap(out);
      CHECK_THROWS_WITH_AS((void)run(), doctest::Contains("m.img: decoding this 40x30 "), std::runtime_error);
      CHECK_THROWS_WITH_AS((void)run(), doctest::Contains("one decode may take (decode_options::max_decode_bytes"),
                           std::runtime_error);
      CHECK(out.capacity() == 0);  // refused before the output was allocated
    }
  }
  // 0 is no limit.
  decode_options none;
  none.max_decode_bytes = 0;
  CHECK(decode_image(progressive, out, none, "m.jpg").width == 40);

  // A 6 KB file whose header says 16000x16000 (within the default pixel limit): 732 MiB to decode,
  // refused under a 512 MiB limit with its size, its estimate and the limit.
  auto bomb = jpg;
  const std::byte sof0[] = {std::byte{0xFF}, std::byte{0xC0}};
  const auto sof = std::search(bomb.begin(), bomb.end(), std::begin(sof0), std::end(sof0));
  REQUIRE(sof != bomb.end());
  for (const int at : {5, 7}) {  // height, then width, big-endian after the length and precision
    sof[at] = std::byte{16000 >> 8};
    sof[at + 1] = std::byte{16000 & 0xFF};
  }
  REQUIRE(peek_size(bomb).width == 16000);
  decode_options half_gib;
  half_gib.max_decode_bytes = std::uint64_t{512} << 20;
  std::vector<std::byte>().swap(out);
  CHECK_THROWS_WITH_AS((void)decode_image(bomb, out, half_gib, "bomb.jpg"),
                       doctest::Contains("bomb.jpg: decoding this 16000x16000 JPEG image needs about 732.4 MiB (3 bytes a "
                                         "pixel for the decoded RGB pixels), more than the 512.0 MiB one decode may take"),
                       std::runtime_error);
  CHECK(out.capacity() == 0);

  // The default follows the node plan: this process's share of memory over TBB's thread cap.
  const decode_memory_limit by_default = decode_memory_limit_of({});
  const node_plan& plan = this_node_plan_without_gpu();
  const auto threads = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  if (plan.rank_memory == 0) {
    CHECK(by_default.bytes == 0);
  } else {
    CHECK(by_default.bytes == plan.rank_memory / threads);
    CHECK(by_default.source.find(plan.memory_source) != std::string::npos);
    CHECK(by_default.source.find("over the " + std::to_string(threads) + " threads") != std::string::npos);
  }
  CHECK(decode_memory_limit_of(half_gib).bytes == std::uint64_t{512} << 20);
}

TEST_CASE("decode.exif_orientation_is_left_unless_asked_and_a_window_is_of_the_turned_image") {
  const auto plain = encode(picture(30, 44, 8), ".jpg");  // 44 wide, 30 high
  // The same JPEG with an APP1 Exif segment after SOI: a little-endian TIFF block whose IFD0 holds
  // Orientation 6 (turned 90 degrees clockwise to view).
  std::vector<std::byte> exif;
  const int app1[] = {0xFF, 0xE1, 0x00, 0x22, 'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0,
                      1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
  for (const int v : app1) exif.push_back(static_cast<std::byte>(v));
  std::vector<std::byte> turned_file(plain.begin(), plain.begin() + 2);
  turned_file.insert(turned_file.end(), exif.begin(), exif.end());
  turned_file.insert(turned_file.end(), plain.begin() + 2, plain.end());
  std::vector<std::byte> stored, as_stored, turned;
  (void)decode_image(plain, stored, {}, "p.jpg");
  const image_spec s = decode_image(turned_file, as_stored, {}, "t.jpg");
  CHECK(s.width == 44);
  CHECK(as_stored == stored);  // by default: the pixels as stored, as torchvision's loaders give them
  CHECK(peek_size(turned_file).width == 44);
  decode_options apply;
  apply.apply_exif_orientation = true;
  const image_spec t = decode_image(turned_file, turned, apply, "t.jpg");
  REQUIRE(t.width == 30);
  REQUIRE(t.height == 44);
  // Turned 90 degrees clockwise: the stored bottom-left pixel is the top-left one.
  for (std::int64_t y = 0; y < 44; ++y)
    for (std::int64_t x = 0; x < 30; ++x)
      for (int c = 0; c < 3; ++c)
        REQUIRE(turned[static_cast<std::size_t>((y * 30 + x) * 3 + c)] == stored[static_cast<std::size_t>(((29 - x) * 44 + y) * 3 + c)]);
  // A window is of the turned image, at whatever DCT scale was asked for.
  std::vector<std::byte> window;
  const image_spec w = decode_image_region(turned_file, window, apply, {5, 3, 20, 12}, 4, "t.jpg");
  REQUIRE(w.width == 12);
  REQUIRE(w.height == 20);
  for (std::int64_t y = 0; y < 20; ++y)
    CHECK(std::memcmp(window.data() + y * 12 * 3, turned.data() + ((5 + y) * 30 + 3) * 3, 12 * 3) == 0);
}
