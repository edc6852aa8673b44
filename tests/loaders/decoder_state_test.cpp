// No file changes another file's pixels: every kind of failing (and warning) file, decoded on a
// worker thread before good ones, leaves that thread's decoders as a fresh thread's. And JPEGs are
// decoded as libjpeg decodes them, warnings included, or refused by name.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <turbojpeg.h>

#include "codec_fixtures.hpp"
#include "image_fixtures.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::encode;
using pinfeed::test::picture;

namespace {

using bytes = std::vector<std::byte>;

bytes tj_jpeg(int h, int w, int seed, int subsamp) { return test::turbojpeg(test::picture_rgb(h, w, seed).data(), w, h, subsamp); }

/// The offset of the first marker FF `code` at or after `from` (REQUIREs one).
std::size_t marker_at(const bytes& b, unsigned code, std::size_t from = 0) {
  for (std::size_t i = from; i + 1 < b.size(); ++i)
    if (b[i] == std::byte{0xFF} && b[i + 1] == static_cast<std::byte>(code)) return i;
  FAIL("no marker 0x" << std::hex << code);
  return 0;
}

/// A good JPEG whose frame header says `precision` bits and process `sof` (the data stays 8-bit:
/// only the header is read before the file is refused).
bytes with_frame(bytes b, unsigned sof, int precision) {
  const std::size_t at = marker_at(b, 0xC0);
  b[at + 1] = static_cast<std::byte>(sof);
  b[at + 4] = static_cast<std::byte>(precision);
  return b;
}

/// `n` stray bytes between the JFIF segment and the next marker: libjpeg's "n extraneous bytes
/// before marker 0xdb", a warning; the image is the original's.
bytes with_extraneous_bytes(const bytes& b, std::size_t n) {
  const std::size_t app0 = marker_at(b, 0xE0);
  const std::size_t end = app0 + 2 + ((static_cast<std::size_t>(b[app0 + 2]) << 8) | static_cast<std::size_t>(b[app0 + 3]));
  bytes out(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(end));
  out.insert(out.end(), n, std::byte{0x3C});
  out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(end), b.end());
  return out;
}

/// The first RST0 of the scan made RST5: libjpeg warns ("found marker 0xd5 instead of RST0") and
/// resyncs; pinfeed's Huffman decoder stops there.
bytes with_wrong_restart(const bytes& b) {
  auto out = b;
  const std::size_t rst0 = marker_at(out, 0xD0, marker_at(out, 0xDA));
  out[rst0 + 1] = std::byte{0xD5};
  return out;
}

bytes restart_jpeg() { return encode(picture(64, 64, 9), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_RST_INTERVAL, 4}); }

/// A classic little-endian TIFF whose only directory entry is not ImageWidth: no size.
bytes tiff_without_size() {
  const unsigned char t[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x03, 0x01, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  return bytes(reinterpret_cast<const std::byte*>(t), reinterpret_cast<const std::byte*>(t) + sizeof t);
}

struct named_bytes {
  std::string name;
  bytes data;
  bool decodes;  ///< decoded (past warnings) under the default options, else refused
};

/// Every kind of file a worker may meet that is refused or decoded past a warning.
std::vector<named_bytes> troublesome_files() {
  const bytes good = tj_jpeg(48, 64, 3, TJSAMP_420);
  bytes png = encode(picture(32, 32, 2), ".png");
  for (std::size_t i = 40; i < png.size(); ++i) png[i] = std::byte{0x5A};
  bytes header_only(good.begin(), good.begin() + 20);
  bytes bad_table = good;
  bad_table[marker_at(bad_table, 0xDB) + 4] = std::byte{0x7F};  // a DQT of table 15
  return {
      {"12-bit JPEG", with_frame(good, 0xC1, 12), false},
      {"lossless JPEG", with_frame(good, 0xC3, 8), false},
      {"truncated JPEG", bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() * 2 / 3)), false},
      {"JPEG header only", header_only, false},
      {"JPEG with a bad table", bad_table, false},
      {"JPEG with extraneous bytes", with_extraneous_bytes(good, 3), true},
      {"JPEG with a wrong restart marker", with_wrong_restart(restart_jpeg()), true},
      {"corrupt PNG", png, false},
      {"TIFF without a size", tiff_without_size(), false},
      {"empty file", {}, false},
      {"text", bytes(64, std::byte{'x'}), false},
  };
}

/// Good files of every path: baseline 4:2:0, 4:4:4 and grey, progressive, with restarts, CMYK, PNG;
/// sides times `k` (large enough, a random crop's window decodes at a DCT scale).
std::vector<named_bytes> good_files(int k = 1) {
  return {
      {"4:2:0 JPEG", tj_jpeg(61 * k, 83 * k, 1, TJSAMP_420), true},
      {"4:4:4 JPEG", tj_jpeg(40 * k, 52 * k, 2, TJSAMP_444), true},
      {"grey JPEG", tj_jpeg(33 * k, 47 * k, 4, TJSAMP_GRAY), true},
      {"progressive JPEG", encode(picture(50 * k, 70 * k, 5), ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}), true},
      {"JPEG with restarts", restart_jpeg(), true},
      {"CMYK JPEG", test::encode_cmyk_jpeg(24 * k, 30 * k), true},
      {"PNG", encode(picture(30 * k, 26 * k, 6), ".png"), true},
  };
}

/// What a thread's decoders give for `f`: the whole image, a window at a DCT scale, the peeked size.
struct result {
  bool ok = false;
  std::string error;
  bytes whole, window;
  std::int64_t peek_width = 0, peek_height = 0;
  bool operator==(const result&) const = default;
};

result decode_all(const bytes& f, decode_options::huffman_decoder h) {
  result r;
  decode_options o;
  o.huffman = h;
  const image_size peeked = peek_size(f);
  r.peek_width = peeked.width;
  r.peek_height = peeked.height;
  try {
    (void)decode_image(f, r.whole, o, "/data/f");
    (void)decode_image_region(f, r.window, o, {3, 5, 24, 20}, 6, "/data/f");
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

/// `fn` on a new thread: fresh per-thread decoder state.
template <class Fn>
auto on_fresh_thread(Fn fn) {
  decltype(fn()) out{};
  std::thread([&] { out = fn(); }).join();
  return out;
}

constexpr decode_options::huffman_decoder kDecoders[] = {decode_options::huffman_decoder::pinfeed,
                                                         decode_options::huffman_decoder::libjpeg};

}  // namespace

TEST_CASE("decoder_state.no_file_changes_the_pixels_of_the_files_after_it_on_its_thread") {
  const auto bad = troublesome_files();
  const auto goods = good_files();
  for (const auto h : kDecoders) {
    CAPTURE(static_cast<int>(h));
    // Each file's clean result, each on a thread of its own.
    std::vector<result> clean_good, clean_bad;
    for (const auto& g : goods) clean_good.push_back(on_fresh_thread([&] { return decode_all(g.data, h); }));
    for (const auto& b : bad) clean_bad.push_back(on_fresh_thread([&] { return decode_all(b.data, h); }));
    for (std::size_t i = 0; i < goods.size(); ++i) {
      CAPTURE(goods[i].name);
      REQUIRE_MESSAGE(clean_good[i].ok, clean_good[i].error);
      CHECK(clean_good[i].peek_width > 0);
    }
    for (std::size_t i = 0; i < bad.size(); ++i) {
      CAPTURE(bad[i].name);
      CHECK_MESSAGE(clean_bad[i].ok == bad[i].decodes, clean_bad[i].error);
      if (!clean_bad[i].ok) CHECK(clean_bad[i].error.find("/data/f") != std::string::npos);
    }
    // Every ordered pair of troublesome files, then every good file, on one thread: each result is
    // the clean one (the troublesome ones' too: the first of a pair must not change the second).
    std::size_t sequences = 0;
    std::thread([&] {
      for (std::size_t a = 0; a < bad.size(); ++a)
        for (std::size_t b = 0; b < bad.size(); ++b) {
          CAPTURE(bad[a].name);
          CAPTURE(bad[b].name);
          (void)decode_all(bad[a].data, h);
          CHECK(decode_all(bad[b].data, h) == clean_bad[b]);
          for (std::size_t g = 0; g < goods.size(); ++g) {
            CAPTURE(goods[g].name);
            CHECK(decode_all(goods[g].data, h) == clean_good[g]);
          }
          ++sequences;
        }
    }).join();
    CHECK(sequences == bad.size() * bad.size());
  }
}

TEST_CASE("decoder_state.a_folder_of_every_troublesome_kind_gives_the_same_batches_for_any_worker_count") {
  test::temp_dir d;
  fs::create_directories(d.path / "a");
  fs::create_directories(d.path / "b");
  const auto bad = troublesome_files();
  const auto goods = good_files(4);
  int n = 0, refused = 0;
  const auto ext = [](const named_bytes& f) {
    return f.name.find("PNG") != std::string::npos ? ".png" : f.name.find("TIFF") != std::string::npos ? ".tif" : ".jpg";
  };
  // Interleaved: a troublesome file between good ones, in both classes.
  for (std::size_t i = 0; i < std::max(bad.size(), goods.size() * 2); ++i) {
    const auto& g = goods[i % goods.size()];
    test::write_bytes(d.path / (i % 2 ? "a" : "b") / (test::letters_name(n++, 100) + ext(g)), g.data);
    if (i < bad.size()) {
      test::write_bytes(d.path / (i % 2 ? "b" : "a") / (test::letters_name(n++, 100) + ext(bad[i])), bad[i].data);
      refused += bad[i].decodes ? 0 : 1;
    }
  }
  const auto files = list_image_folder(d.path.string()).files;
  REQUIRE(static_cast<int>(files.size()) == n);
  struct run_result {
    std::vector<std::uint64_t> indices;
    std::vector<std::byte> pixels;
    std::uint64_t failures = 0, replaced = 0, warnings = 0;
    std::vector<std::string> failed;
  };
  const auto run = [&](std::size_t workers) {
    pipeline_source_options po;
    po.on_error = error_policy::skip;
    auto src = std::make_shared<pipeline_source>(make_image_files_reader(files), parse_pipeline("rrc(24),hflip"), po);
    loader_options o;
    o.batch_size = 4;
    o.device = "cpu";
    o.seed = 7;
    o.workers = workers;
    o.order = {true, 0, 1, false};
    loader l(src, o);
    run_result r;
    for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
      l.start_epoch(epoch);
      while (auto b = l.next()) {
        const auto& f = b->field("image");
        const auto* px = static_cast<const std::byte*>(f.data);
        r.pixels.insert(r.pixels.end(), px, px + b->size() * 24 * 24 * 3);
        r.indices.insert(r.indices.end(), b->indices().begin(), b->indices().end());
      }
    }
    r.failures = src->failures();
    r.replaced = src->replaced();
    r.failed = src->failed();
    r.warnings = l.stats().decode_warnings;
    return r;
  };
  const run_result one = run(1);
  CHECK(one.indices.size() == files.size() * 2);
  CHECK(one.failures == static_cast<std::uint64_t>(refused));  // distinct samples
  CHECK(one.replaced == static_cast<std::uint64_t>(refused) * 2);  // a stand-in for each, each epoch
  // Each refusal names its file and the decode stage.
  REQUIRE(one.failed.size() == static_cast<std::size_t>(refused));
  for (const auto& f : one.failed) CHECK(f.find(d.path.string()) != std::string::npos);
  CHECK(one.warnings >= 4);  // two files decoded past warnings, each epoch (more where one stands in)
  for (const std::size_t workers : {std::size_t{2}, std::size_t{4}, std::size_t{2}}) {
    CAPTURE(workers);
    const run_result r = run(workers);
    CHECK(r.indices == one.indices);
    CHECK(r.pixels == one.pixels);
    CHECK(r.failures == one.failures);
    CHECK(r.replaced == one.replaced);
    CHECK(r.warnings == one.warnings);
  }
}

TEST_CASE("decoder_state.jpeg_warnings_are_decoded_as_libjpeg_decodes_them_or_refused_when_strict") {
  const bytes good = tj_jpeg(48, 64, 3, TJSAMP_420);
  const bytes extra = with_extraneous_bytes(good, 3);
  for (const auto h : kDecoders) {
    CAPTURE(static_cast<int>(h));
    decode_options o;
    o.huffman = h;
    bytes clean, out;
    (void)decode_image(good, clean, o, "/data/good.jpg");
    // Extraneous bytes between segments: the original's pixels, one warning in libjpeg's words.
    decode_report report;
    (void)decode_image(extra, out, o, "/data/x.jpg", &report);
    CHECK(out == clean);
    CHECK(report.warnings == 1);
    CHECK(report.first_warning.find("3 extraneous bytes before marker 0xdb") != std::string::npos);
    CHECK(peek_size(extra).width == 64);  // the peek walks past them as libjpeg does
    decode_report window_report;
    (void)decode_image_region(extra, out, o, {8, 8, 32, 32}, 0, "/data/x.jpg", &window_report);
    CHECK(window_report.warnings == 1);
    // Strict: refused, naming the file and the warning.
    decode_options strict = o;
    strict.strict = true;
    CHECK_THROWS_WITH_AS((void)decode_image(extra, out, strict, "/data/x.jpg"),
                         doctest::Contains("/data/x.jpg: corrupt or truncated JPEG (Corrupt JPEG data: 3 extraneous bytes"),
                         std::runtime_error);
    // A wrong restart marker: libjpeg resyncs; both decoders give libjpeg's pixels.
    const bytes rst = with_wrong_restart(restart_jpeg());
    decode_report rst_report;
    bytes rst_out, rst_libjpeg;
    (void)decode_image(rst, rst_out, o, "/data/r.jpg", &rst_report);
    decode_options lib = o;
    lib.huffman = decode_options::huffman_decoder::libjpeg;
    (void)decode_image(rst, rst_libjpeg, lib, "/data/r.jpg");
    CHECK(rst_out == rst_libjpeg);
    CHECK(rst_report.warnings >= 1);
    CHECK(rst_report.first_warning.find("RST0") != std::string::npos);
    CHECK_THROWS_WITH_AS((void)decode_image(rst, rst_out, strict, "/data/r.jpg"), doctest::Contains("RST0"), std::runtime_error);
    // The end of the data refuses the file in either mode, as Pillow refuses a truncated file.
    const bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
    for (const bool s : {false, true}) {
      decode_options t = o;
      t.strict = s;
      CHECK_THROWS_WITH_AS((void)decode_image(cut, out, t, "/data/t.jpg"), doctest::Contains("Premature end of JPEG file"),
                           std::runtime_error);
    }
  }
}

TEST_CASE("decoder_state.jpegs_libjpeg_cannot_decode_are_refused_by_name") {
  const bytes good = tj_jpeg(48, 64, 3, TJSAMP_420);
  bytes out;
  const decode_options o;
  CHECK_THROWS_WITH_AS((void)decode_image(with_frame(good, 0xC1, 12), out, o, "/data/a.jpg"),
                       doctest::Contains("/data/a.jpg: a 12-bit JPEG (extended sequential (SOF1))"), std::runtime_error);
  CHECK_THROWS_WITH_AS((void)decode_image(with_frame(good, 0xC1, 16), out, o, "/data/a.jpg"),
                       doctest::Contains("decodes 8-bit JPEGs only"), std::runtime_error);
  CHECK_THROWS_WITH_AS((void)decode_image(with_frame(good, 0xC3, 8), out, o, "/data/b.jpg"),
                       doctest::Contains("/data/b.jpg: a lossless (SOF3) JPEG, which"), std::runtime_error);
  CHECK_THROWS_WITH_AS((void)decode_image_region(with_frame(good, 0xC1, 12), out, o, {0, 0, 8, 8}, 0, "/data/c.jpg"),
                       doctest::Contains("12-bit JPEG"), std::runtime_error);
  // The peek gives their size all the same: the header is well-formed.
  CHECK(peek_size(with_frame(good, 0xC1, 12)).width == 64);
}
