// `pinfeed preview`: a contact sheet (PNG) of N samples after the pipeline's host steps, each
// labelled with its index; with --explain, what each step did to each sample (transform::explain:
// the parameters a random step drew, the ops a policy chose).
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pipeline_options.hpp"

namespace pinfeed::tool {
namespace {

/// An image the preview holds.
struct held_image {
  std::vector<std::byte> data;
  loaders::image_spec spec;
};

struct preview_args {
  run_args run;
  std::uint64_t count = 16, first = 0;
  std::uint32_t epoch = 0;
  std::string out = "preview.png";
  bool explain = false;
};

// Digits 0-9 as 3 x 5 bitmaps, a row a number of 3 bits (the left pixel the high bit).
constexpr std::array<std::array<std::uint8_t, 5>, 10> kDigits{{{7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7},
                                                                {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7},
                                                                {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7},
                                                                {7, 5, 7, 1, 7}}};
constexpr int kScale = 2, kGap = 4, kLabel = 5 * kScale + 6;

/// An RGB canvas, rows of width x 3 bytes.
struct canvas {
  int width, height;
  std::vector<std::uint8_t> px;
  canvas(int w, int h) : width(w), height(h), px(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3, 32) {}
  void set(int x, int y, std::uint8_t v) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    std::uint8_t* p = &px[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)) * 3];
    p[0] = p[1] = p[2] = v;
  }
  /// `text` (digits) in white from (x, y), kScale pixels a bitmap pixel.
  void label(int x, int y, const std::string& text) {
    for (const char ch : text) {
      const auto& rows = kDigits[static_cast<std::size_t>(ch - '0')];
      for (int r = 0; r < 5; ++r)
        for (int c = 0; c < 3; ++c)
          if ((rows[static_cast<std::size_t>(r)] >> (2 - c)) & 1)
            for (int dy = 0; dy < kScale; ++dy)
              for (int dx = 0; dx < kScale; ++dx) set(x + c * kScale + dx, y + r * kScale + dy, 255);
      x += 4 * kScale;
    }
  }
};

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

void chunk(std::vector<std::uint8_t>& out, const char* type, const std::vector<std::uint8_t>& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, static_cast<std::uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(out.size() - start))));
}

/// The canvas as an 8-bit RGB PNG (zlib's deflate, no filter).
std::vector<std::uint8_t> png_of(const canvas& c) {
  std::vector<std::uint8_t> raw;
  raw.reserve(c.px.size() + static_cast<std::size_t>(c.height));
  for (int y = 0; y < c.height; ++y) {
    raw.push_back(0);
    const auto* row = &c.px[static_cast<std::size_t>(y) * static_cast<std::size_t>(c.width) * 3];
    raw.insert(raw.end(), row, row + static_cast<std::size_t>(c.width) * 3);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> packed(packed_size);
  const int rc = compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 6);
  if (rc == Z_MEM_ERROR) throw std::bad_alloc();
  if (rc != Z_OK) throw pinfeed::runtime_error("preview: zlib could not compress the sheet (" + std::to_string(rc) + ")");
  packed.resize(packed_size);
  std::vector<std::uint8_t> out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<std::uint8_t> ihdr;
  put_u32(ihdr, static_cast<std::uint32_t>(c.width));
  put_u32(ihdr, static_cast<std::uint32_t>(c.height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8 bits, RGB, deflate, no filter, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", packed);
  chunk(out, "IEND", {});
  return out;
}

/// Sample `index` through the reader and the host steps: its image and each step's explanation.
std::pair<held_image, std::vector<std::string>> one_sample(const pipeline_parts& p, const loaders::pipeline& steps,
                                                                     const preview_args& a, std::uint64_t index) {
  // The fields a loader's sample has (the image first, then the reader's own: labels), with room.
  std::vector<field_spec> specs{field_spec{"image", dtype::u8, {}}};
  for (const auto& f : p.reader->extra_fields()) specs.push_back(f);
  std::vector<std::vector<std::byte>> held;
  std::vector<std::byte*> buffers;
  for (const auto& f : specs) buffers.push_back(held.emplace_back(std::max<std::size_t>(f.bytes(), 1)).data());
  sample s(index, a.epoch, a.run.seed, specs, buffers);
  std::vector<std::byte> image;
  const loaders::read_result r = p.reader->read(s, image, [](std::int64_t, std::int64_t) { return loaders::decode_plan{}; });
  held_image cur{std::vector<std::byte>(r.data != nullptr ? r.data : image.data(),
                                                  (r.data != nullptr ? r.data : image.data()) + r.spec.bytes()),
                           r.spec};
  std::vector<std::string> why;
  for (std::size_t k = 0; k < steps.steps().size(); ++k) {
    const auto& step = *steps.steps()[k];
    const philox_stream rng = s.rng(100 + static_cast<std::uint32_t>(k));  // the loader's stream for step k
    why.push_back(step.explain(cur.spec, rng));
    const loaders::image_spec next = step.output_spec(cur.spec);
    held_image out{std::vector<std::byte>(next.bytes()), next};
    step.apply({cur.data.data(), cur.spec}, {out.data.data(), next}, rng);
    cur = std::move(out);
  }
  if (cur.spec.type != dtype::u8 || (cur.spec.channels != 1 && cur.spec.channels != 3))
    throw pinfeed::invalid_argument("preview: the pipeline's host steps end in " + std::to_string(cur.spec.channels) + " channels of " +
                                    std::string(dtype_name(cur.spec.type)) + "; a sheet shows 8-bit grey or RGB images");
  return {std::move(cur), std::move(why)};
}

int cmd_preview(preview_args a) {
  if (a.count == 0 || a.count > 4096) throw pinfeed::invalid_argument("preview: --samples from 1 to 4096, not " + std::to_string(a.count));
  const pipeline_parts p = make_pipeline(a.run, resolve_device("cpu"));
  // A batch op mixes whole batches and the device tail (scale, normalize) makes floats: neither is a
  // picture of a sample.
  loaders::pipeline per_sample = p.steps;
  if (!per_sample.steps().empty() && per_sample.steps().back()->batch_op())
    per_sample = loaders::pipeline({per_sample.steps().begin(), per_sample.steps().end() - 1});
  const loaders::pipeline steps = per_sample.host_part();
  if (a.first + a.count > p.reader->size())
    throw pinfeed::invalid_argument("preview: samples " + std::to_string(a.first) + " to " + std::to_string(a.first + a.count - 1) +
                                    " asked for; the source has " + std::to_string(p.reader->size()));
  std::vector<held_image> images;
  for (std::uint64_t i = a.first; i < a.first + a.count; ++i) {
    auto [img, why] = one_sample(p, steps, a, i);
    if (a.explain) {
      std::string line = "sample " + std::to_string(i) + ":";
      for (std::size_t k = 0; k < why.size(); ++k)
        line += (k ? " | " : " ") + (why[k].empty() ? std::string("(as it was)") : why[k]);
      std::printf("%s\n", line.c_str());
    }
    images.push_back(std::move(img));
  }
  int tile_w = 0, tile_h = 0;
  for (const auto& im : images) {
    tile_w = std::max(tile_w, static_cast<int>(im.spec.width));
    tile_h = std::max(tile_h, static_cast<int>(im.spec.height));
  }
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(images.size()))));
  const int rows = (static_cast<int>(images.size()) + cols - 1) / cols;
  canvas sheet(cols * (tile_w + kGap) + kGap, rows * (tile_h + kLabel + kGap) + kGap);
  for (std::size_t n = 0; n < images.size(); ++n) {
    const auto& im = images[n];
    const int x0 = kGap + static_cast<int>(n % static_cast<std::size_t>(cols)) * (tile_w + kGap);
    const int y0 = kGap + static_cast<int>(n / static_cast<std::size_t>(cols)) * (tile_h + kLabel + kGap);
    const auto* src = reinterpret_cast<const std::uint8_t*>(im.data.data());
    const int c = im.spec.channels;
    for (int y = 0; y < im.spec.height; ++y)
      for (int x = 0; x < im.spec.width; ++x) {
        const std::uint8_t* s = src + (static_cast<std::size_t>(y) * static_cast<std::size_t>(im.spec.width) + static_cast<std::size_t>(x)) * c;
        std::uint8_t* d = &sheet.px[(static_cast<std::size_t>(y0 + y) * static_cast<std::size_t>(sheet.width) + static_cast<std::size_t>(x0 + x)) * 3];
        d[0] = s[0];
        d[1] = s[c == 3 ? 1 : 0];
        d[2] = s[c == 3 ? 2 : 0];
      }
    sheet.label(x0, y0 + tile_h + 3, std::to_string(a.first + n));
  }
  const auto png = png_of(sheet);
  pinfeed::detail::write_whole_file(a.out, std::string(reinterpret_cast<const char*>(png.data()), png.size()),
                                    "cannot write '" + a.out + "'");
  std::printf("preview: %zu samples from %llu, %dx%d tiles, a %dx%d sheet: %s\n", images.size(),
              static_cast<unsigned long long>(a.first), tile_w, tile_h, sheet.width, sheet.height, a.out.c_str());
  return 0;
}

}  // namespace

void add_preview(CLI::App& app, command_list& out) {
  static preview_args pa;
  auto* pv = app.add_subcommand("preview", "a contact sheet (PNG) of samples after the pipeline, labelled with their index");
  pv->add_option("--source", pa.run.source, "synthetic, folder:PATH, list:FILE or shards:PATTERN (as run)");
  pv->add_option("--transforms", pa.run.transforms, "the pipeline, e.g. rrc(224),hflip,trivial_augment");
  pv->add_option("--pipeline", pa.run.pipeline_file, "a JSON pipeline file instead of --transforms");
  pv->add_option("--samples", pa.count, "how many samples to show")->check(CLI::Range(std::uint64_t{1}, std::uint64_t{4096}));
  pv->add_option("--first", pa.first, "the first sample's index");
  pv->add_option("--epoch", pa.epoch, "the epoch whose draws to show");
  pv->add_option("--seed", pa.run.seed, "the seed (as run's)");
  pv->add_option("--height", pa.run.height, "synthetic image height")->check(CLI::PositiveNumber);
  pv->add_option("--width", pa.run.width, "synthetic image width")->check(CLI::PositiveNumber);
  pv->add_option("--out", pa.out, "the PNG to write");
  pv->add_flag("--explain", pa.explain, "print what each step did to each sample (the ops and magnitudes drawn)");
  out.push_back({pv, [] { return cmd_preview(pa); }, {}});
}

}  // namespace pinfeed::tool
