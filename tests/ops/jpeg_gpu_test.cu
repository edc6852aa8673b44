// The JPEG planes on the device: a batch decoded there must equal the host decode path (libjpeg-turbo)
// and the host reference, byte for byte, for every chroma layout and size, and at the range
// limit's wrap. On the simulator each case stays small (its kernels run a few million simulated
// instructions, the photo-sized one tens of millions).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "jpeg_fixtures.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "gpu_setup.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {

/// `batch` decoded on the device (on a stream of its own), and on the host; both checked against
/// `want` (the host decode path's pixels, image by image) where given.
void device_equals(const loaders::jpeg_batch& batch, const std::vector<std::vector<std::uint8_t>>& want,
                   const std::vector<std::string>& names) {
  const ops::jpeg_batch_view host = batch.view();
  std::vector<std::uint8_t> cpu(batch.out_bytes), scratch(batch.scratch_bytes);
  ops::decode_jpeg_batch_host(host, cpu.data(), cpu.size(), scratch.data(), scratch.size());
  const std::size_t geometry = batch.images.size() * sizeof(ops::jpeg_image);
  device_buffer d_images(geometry), d_blocks(batch.blocks.size() * 2), d_quant(batch.quant.size() * 2),
      d_out(batch.out_bytes), d_scratch(batch.scratch_bytes);
  test::upload(d_images.data(), batch.images.data(), geometry);
  test::upload(d_blocks.data(), batch.blocks.data(), batch.blocks.size() * 2);
  test::upload(d_quant.data(), batch.quant.data(), batch.quant.size() * 2);
  // Every output byte must come from the kernels: the buffer starts as a marker.
  test::fill_device(d_out.data(), 0xEE, batch.out_bytes);
  ops::jpeg_batch_view device = host;
  device.images = reinterpret_cast<const ops::jpeg_image*>(d_images.data());
  device.blocks = reinterpret_cast<const std::int16_t*>(d_blocks.data());
  device.quant = reinterpret_cast<const std::uint16_t*>(d_quant.data());
  const cuda_stream stream = cuda_stream::create();
  ops::decode_jpeg_batch_device(device, batch.images.data(), reinterpret_cast<std::uint8_t*>(d_out.data()), batch.out_bytes,
                                reinterpret_cast<std::uint8_t*>(d_scratch.data()), batch.scratch_bytes, stream.get());
  std::vector<std::uint8_t> gpu(batch.out_bytes);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(gpu.data(), d_out.data(), gpu.size(), cudaMemcpyDeviceToHost, stream.get()));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  for (std::size_t i = 0; i < batch.images.size(); ++i) {
    CAPTURE(names[i]);
    const ops::jpeg_image& im = batch.images[i];
    const std::size_t bytes = ops::jpeg_output_bytes(im);
    CHECK(std::memcmp(gpu.data() + im.out_offset, cpu.data() + im.out_offset, bytes) == 0);
    if (i < want.size()) {
      REQUIRE(want[i].size() == bytes);
      CHECK(std::memcmp(gpu.data() + im.out_offset, want[i].data(), bytes) == 0);
    }
  }
}

loaders::jpeg_coefficients coefficients_of(const std::vector<std::byte>& file) {
  loaders::jpeg_read r = loaders::read_jpeg_coefficients(file, "test");
  REQUIRE_MESSAGE(r.coefficients.has_value(), r.reason);
  return std::move(*r.coefficients);
}

}  // namespace

TEST_CASE("gpu.jpeg.mixed_batch_equals_the_host_decode" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG planes GPU == host decode")) return;
  // Every layout at 1x1, 2 and 3 wide (1 and 2 chroma samples: replication, not the filter), odd
  // sizes across blocks and MCUs; quality 75 and 100 (every step 1), one batch.
  const int sizes[][2] = {{1, 1}, {2, 5}, {3, 5}, {7, 9}, {17, 33}};
  loaders::jpeg_batch batch;
  std::vector<std::vector<std::uint8_t>> want;
  std::vector<std::string> names;
  std::uint32_t seed = 0;
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& s : sizes) {
      loaders::jpeg_encode_options o;
      o.quality = ++seed % 2 ? 75 : 100;
      const auto file = test::jpeg_file(s[0], s[1], seed, layout, o);
      batch.append(coefficients_of(file));
      want.push_back(test::host_pixels(file));
      names.push_back(std::string(layout.name) + " " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + " q" + std::to_string(o.quality));
    }
  device_equals(batch, want, names);
}

TEST_CASE("gpu.jpeg.every_dct_scale_equals_libjpegs_scaled_decode" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG planes GPU at 1/2, 1/4, 1/8 == libjpeg")) return;
  // Every layout at 1/2, 1/4 and 1/8 (the reduced IDCTs; 4:2:0 chroma at a larger IDCT and no
  // upsampling; no filtering at 1/8), in one batch with full-scale images, against libjpeg's decode
  // at that scale; whole images and windows of the host half at a scale.
  const int sizes[][2] = {{1, 1}, {7, 9}, {17, 33}};
  loaders::jpeg_batch batch;
  std::vector<std::vector<std::uint8_t>> want;
  std::vector<std::string> names;
  std::uint32_t seed = 80;
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& s : sizes)
      for (unsigned denom : {1u, 2u, 4u, 8u}) {
        loaders::jpeg_encode_options o;
        o.quality = ++seed % 2 ? 75 : 100;
        const auto file = test::jpeg_file(s[0], s[1], seed, layout, o);
        loaders::jpeg_coefficients c = coefficients_of(file);
        c.image.scale = static_cast<std::uint8_t>(8 / denom);
        ops::jpeg_component_scales(c.image);
        batch.append(c);
        want.push_back(test::libjpeg_scaled(file, denom));
        names.push_back(std::string(layout.name) + " " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + " 1/" + std::to_string(denom));
      }
  const loaders::image_region w{5, 9, 30, 33};  // of 61x47: at 1/2, 1/4 and 1/8 for shorter sides 15, 7, 3
  for (const auto& layout : test::jpeg_layouts())
    for (const auto& [denom, need] : {std::pair{2u, 15}, std::pair{4u, 7}, std::pair{8u, 3}}) {
      REQUIRE(loaders::region_decode_denom(w, need) == denom);
      const auto file = test::jpeg_file(61, 47, ++seed, layout, {});
      loaders::jpeg_pack_options po;
      po.window = w;
      po.scale_denom = denom;
      loaders::jpeg_packed packed;
      REQUIRE(loaders::pack_jpeg(file, "test", po, packed).fallback == loaders::jpeg_fallback::none);
      batch.append(packed);
      std::vector<std::byte> px;
      (void)loaders::decode_image_region(file, px, {}, w, need, "test");
      const auto* p = reinterpret_cast<const std::uint8_t*>(px.data());
      want.emplace_back(p, p + px.size());
      names.push_back(std::string(layout.name) + " window at 1/" + std::to_string(denom));
    }
  device_equals(batch, want, names);
}

TEST_CASE("gpu.jpeg.photo_size_equals_the_host_decode" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG planes GPU == host decode, 500x375")) return;
  loaders::jpeg_batch batch;
  const auto file = test::jpeg_file(500, 375, 11, test::jpeg_layouts()[2], {});  // 4:2:0, quality 90
  batch.append(coefficients_of(file));
  device_equals(batch, {test::host_pixels(file)}, {"4:2:0 500x375 q90"});
}

TEST_CASE("gpu.jpeg.range_limit_wraps_as_on_the_host" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG planes GPU range limit")) return;
  // Blocks whose values pass +-512 before the range limit (a crafted file's; no encoder makes them):
  // one grey 8x8 image per DC, with AC terms so that the wrap falls inside the block.
  loaders::jpeg_batch batch;
  std::vector<std::string> names;
  for (int dc : {2000, 4096, -4096, 4084, 8180, 8188, -8188}) {
    loaders::jpeg_coefficients c;
    c.image.width = c.image.height = 8;
    c.image.components = 1;
    c.image.comp[0] = {1, 1, 0, 1, 1, 0};
    c.blocks.assign(64, 0);
    c.blocks[0] = static_cast<std::int16_t>(dc / 4);
    c.blocks[1] = 300;
    c.blocks[8] = -200;
    c.blocks[63] = 1000;
    c.quant.assign(64, 4);
    batch.append(c);
    names.push_back("DC " + std::to_string(dc));
  }
  device_equals(batch, {}, names);
}

TEST_CASE("gpu.jpeg.packed_blocks_unpack_on_the_device_as_on_the_host" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG compact form unpacked on the device")) return;
  // A 4:2:0 and a 4:4:4 file's blocks, packed with their starts, unpacked on the device: the same
  // dense blocks, which decode to the host decode path's pixels. Then one block broken (a bad
  // end byte): it alone comes back zero, and the device counts it, as the host names it.
  loaders::jpeg_batch batch;
  std::vector<std::vector<std::uint8_t>> want;
  for (int k : {2, 0}) {
    const auto file = test::jpeg_file(40, 24, 5 + static_cast<std::uint32_t>(k), test::jpeg_layouts()[static_cast<std::size_t>(k)], {});
    batch.append(coefficients_of(file));
    want.push_back(test::host_pixels(file));
  }
  std::vector<std::uint8_t> packed;
  std::vector<std::uint32_t> starts;
  ops::pack_jpeg_blocks(batch.blocks, packed, &starts);
  const std::uint64_t count = batch.blocks.size() / 64;
  REQUIRE(starts.size() == count);
  const auto unpack = [&](const std::vector<std::uint8_t>& bytes, std::uint32_t& malformed) {
    device_buffer d_bytes(bytes.size()), d_starts(starts.size() * 4), d_blocks(count * 128), d_bad(4);
    test::upload(d_bytes.data(), bytes.data(), bytes.size());
    test::upload(d_starts.data(), starts.data(), starts.size() * 4);
    test::fill_device(d_blocks.data(), 0x5A, count * 128);
    test::fill_device(d_bad.data(), 0, 4);
    ops::unpack_jpeg_blocks_device(reinterpret_cast<const std::uint8_t*>(d_bytes.data()), bytes.size(),
                                   reinterpret_cast<const std::uint32_t*>(d_starts.data()), count,
                                   reinterpret_cast<std::int16_t*>(d_blocks.data()), reinterpret_cast<std::uint32_t*>(d_bad.data()), nullptr);
    std::vector<std::int16_t> dense(count * 64);
    PINFEED_CUDA_TRY(cudaMemcpy(dense.data(), d_blocks.data(), count * 128, cudaMemcpyDeviceToHost));
    PINFEED_CUDA_TRY(cudaMemcpy(&malformed, d_bad.data(), 4, cudaMemcpyDeviceToHost));
    return dense;
  };
  std::uint32_t malformed = 99;
  const auto dense = unpack(packed, malformed);
  CHECK(malformed == 0);
  CHECK(dense == batch.blocks);
  loaders::jpeg_batch unpacked = batch;
  unpacked.blocks = dense;
  device_equals(unpacked, want, {"4:2:0 40x24 unpacked on the device", "4:4:4 40x24 unpacked on the device"});
  // Block 3 broken: its end byte becomes 0x18 (low nibble 8, neither the end nor 16 zeros).
  const std::uint64_t broken = 3;
  std::vector<std::uint8_t> bad = packed;
  REQUIRE(bad[starts[broken + 1] - 1] == 0x08);
  bad[starts[broken + 1] - 1] = 0x18;
  const auto partly = unpack(bad, malformed);
  CHECK(malformed == 1);
  for (std::uint64_t b = 0; b < count; ++b) {
    CAPTURE(b);
    const bool same = std::equal(partly.begin() + static_cast<std::ptrdiff_t>(b * 64), partly.begin() + static_cast<std::ptrdiff_t>(b * 64 + 64),
                                 batch.blocks.begin() + static_cast<std::ptrdiff_t>(b * 64));
    const bool zero = std::all_of(partly.begin() + static_cast<std::ptrdiff_t>(b * 64), partly.begin() + static_cast<std::ptrdiff_t>(b * 64 + 64),
                                  [](std::int16_t v) { return v == 0; });
    CHECK((b == broken ? zero : same));
  }
  std::vector<std::int16_t> host(count * 64);
  const std::string where = "block " + std::to_string(broken) + ", byte " + std::to_string(starts[broken + 1] - 1) + ": byte 24";
  CHECK_THROWS_WITH_AS(ops::unpack_jpeg_blocks(bad, count, host.data()), doctest::Contains(where.c_str()), std::invalid_argument);
}

TEST_CASE("gpu.jpeg.windows_equal_the_host_paths_windows" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG planes GPU windows == host decode")) return;
  // The host half's windows (pack_jpeg: the window's blocks and a margin, walked by pinfeed's
  // Huffman decoder) in one batch: windows touching each edge, a single pixel, an interior one at
  // an odd phase, for every layout; the host decode path decodes the same window with libjpeg's
  // crop and skip.
  const int W = 41, H = 29;
  const loaders::image_region windows[] = {{0, 0, 11, 13}, {H - 9, W - 14, 9, 14}, {H - 1, 0, 1, 1}, {7, 19, 13, 9}, {0, 3, H, 30}};
  loaders::jpeg_batch batch;
  std::vector<std::vector<std::uint8_t>> want;
  std::vector<std::string> names;
  std::uint32_t seed = 40;
  for (const auto& layout : test::jpeg_layouts()) {
    loaders::jpeg_encode_options o;
    o.restart_interval = seed % 2 ? 1 : 0;
    const auto file = test::jpeg_file(W, H, ++seed, layout, o);
    for (const auto& w : windows) {
      loaders::jpeg_pack_options opts;
      opts.window = w;
      loaders::jpeg_packed packed;
      const loaders::jpeg_pack_result r = loaders::pack_jpeg(file, "test", opts, packed);
      REQUIRE_MESSAGE(r.fallback == loaders::jpeg_fallback::none, r.reason);
      batch.append(packed);
      std::vector<std::byte> px;
      (void)loaders::decode_image_region(file, px, {}, w, 0, "test");
      const auto* p = reinterpret_cast<const std::uint8_t*>(px.data());
      want.emplace_back(p, p + px.size());
      names.push_back(std::string(layout.name) + " window " + std::to_string(w.width) + "x" + std::to_string(w.height) + "+" +
                      std::to_string(w.x) + "+" + std::to_string(w.y));
    }
  }
  device_equals(batch, want, names);
}

TEST_CASE("gpu.jpeg.window_resize_and_flip_equal_the_host_path" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("JPEG window + resize + flip on the GPU == host path")) return;
  // The hybrid decode's device half end to end on small images: packed windows unpacked, decoded,
  // resized (shrinking and growing) and flipped on the device; the host path decodes the window
  // with libjpeg and resizes and flips with pinfeed's resize. Byte for byte.
  struct job_spec {
    int layout;
    loaders::image_region window;
    std::uint32_t out_h, out_w, flip;
  };
  const job_spec specs[] = {{2, {3, 5, 20, 30}, 16, 16, 0}, {2, {0, 0, 29, 41}, 24, 24, 1}, {0, {10, 7, 9, 11}, 24, 20, 1},
                            {1, {2, 30, 25, 11}, 8, 8, 0},   {5, {0, 0, 6, 6}, 13, 9, 1},     {4, {11, 3, 13, 17}, 12, 12, 0}};
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> starts;
  loaders::jpeg_batch batch;
  std::vector<ops::resize_job> jobs;
  std::vector<std::vector<std::uint8_t>> want;
  std::uint64_t out_bytes = 0;
  std::uint32_t seed = 60;
  for (const auto& s : specs) {
    const auto file = test::jpeg_file(41, 29, ++seed, test::jpeg_layouts()[static_cast<std::size_t>(s.layout)], {});
    loaders::jpeg_pack_options po;
    po.window = s.window;
    loaders::jpeg_packed p;
    REQUIRE(loaders::pack_jpeg(file, "test", po, p).fallback == loaders::jpeg_fallback::none);
    for (const std::uint32_t st : p.starts) starts.push_back(static_cast<std::uint32_t>(bytes.size() + st));
    bytes.insert(bytes.end(), p.bytes.begin(), p.bytes.end());
    const std::uint64_t in_offset = batch.out_bytes;
    batch.append(p);  // the geometry and tables (its blocks are replaced by the device's unpack below)
    ops::resize_job j;
    j.in_offset = in_offset;
    j.in_h = static_cast<std::uint32_t>(s.window.height);
    j.in_w = static_cast<std::uint32_t>(s.window.width);
    j.out_offset = out_bytes;
    j.out_h = s.out_h;
    j.out_w = s.out_w;
    j.flip = s.flip;
    jobs.push_back(j);
    out_bytes += std::uint64_t{s.out_h} * s.out_w * 3;
    std::vector<std::byte> px;
    const loaders::image_spec spec = loaders::decode_image_region(file, px, {}, s.window, 0, "test");
    std::vector<std::uint8_t> host(std::uint64_t{s.out_h} * s.out_w * 3);
    ops::resize_bilinear_u8(reinterpret_cast<const std::uint8_t*>(px.data()), static_cast<std::size_t>(spec.width) * 3, spec.height,
                            spec.width, 3, host.data(), s.out_h, s.out_w, s.flip != 0);
    want.push_back(std::move(host));
  }
  const std::uint64_t blocks = batch.blocks.size() / 64;
  device_buffer d_bytes(bytes.size()), d_starts(starts.size() * 4), d_blocks(blocks * 128), d_bad(4),
      d_images(batch.images.size() * sizeof(ops::jpeg_image)), d_quant(batch.quant.size() * 2), d_planes(batch.out_bytes),
      d_scratch(batch.scratch_bytes), d_jobs(jobs.size() * sizeof(ops::resize_job)), d_out(out_bytes);
  test::upload(d_bytes.data(), bytes.data(), bytes.size());
  test::upload(d_starts.data(), starts.data(), starts.size() * 4);
  test::upload(d_images.data(), batch.images.data(), d_images.size());
  test::upload(d_quant.data(), batch.quant.data(), d_quant.size());
  test::upload(d_jobs.data(), jobs.data(), d_jobs.size());
  test::fill_device(d_bad.data(), 0, 4);
  test::fill_device(d_out.data(), 0xEE, out_bytes);
  const cuda_stream stream = cuda_stream::create();
  ops::unpack_jpeg_blocks_device(reinterpret_cast<const std::uint8_t*>(d_bytes.data()), bytes.size(),
                                 reinterpret_cast<const std::uint32_t*>(d_starts.data()), blocks,
                                 reinterpret_cast<std::int16_t*>(d_blocks.data()), reinterpret_cast<std::uint32_t*>(d_bad.data()), stream.get());
  ops::jpeg_batch_view view = batch.view();
  view.images = reinterpret_cast<const ops::jpeg_image*>(d_images.data());
  view.blocks = reinterpret_cast<const std::int16_t*>(d_blocks.data());
  view.quant = reinterpret_cast<const std::uint16_t*>(d_quant.data());
  ops::decode_jpeg_batch_device(view, batch.images.data(), reinterpret_cast<std::uint8_t*>(d_planes.data()), batch.out_bytes,
                                reinterpret_cast<std::uint8_t*>(d_scratch.data()), batch.scratch_bytes, stream.get());
  ops::resize_bilinear_u8_device(reinterpret_cast<const ops::resize_job*>(d_jobs.data()), jobs.data(), jobs.size(),
                                 reinterpret_cast<const std::uint8_t*>(d_planes.data()), batch.out_bytes,
                                 reinterpret_cast<std::uint8_t*>(d_out.data()), out_bytes, stream.get());
  std::vector<std::uint8_t> gpu(out_bytes);
  std::uint32_t bad = 1;
  PINFEED_CUDA_TRY(cudaMemcpyAsync(gpu.data(), d_out.data(), out_bytes, cudaMemcpyDeviceToHost, stream.get()));
  PINFEED_CUDA_TRY(cudaMemcpyAsync(&bad, d_bad.data(), 4, cudaMemcpyDeviceToHost, stream.get()));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  CHECK(bad == 0);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(gpu.data() + jobs[i].out_offset, want[i].data(), want[i].size()) == 0);
  }
}

TEST_CASE("gpu.resize.windows_of_a_larger_image_by_their_row_stride" * doctest::test_suite("gpu")) {
  if (!test::gpu_available("resize of strided windows on the GPU == host")) return;
  // What decode device-inexact resizes: windows read in place from whole images (in_stride), every
  // edge and a single pixel, shrunk, grown and flipped; the device's bytes are the host's.
  const std::uint32_t W = 37, H = 23;
  std::vector<std::uint8_t> image(std::size_t{W} * H * 3);
  std::uint32_t state = 5;
  for (auto& v : image) v = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  // With a box (decode device-inexact where the host path scales): the window is of the image
  // reduced by box x box squares from (x, y), partial ones at the image's edges included.
  struct window {
    std::uint32_t x, y, w, h, out_h, out_w, flip, box;
  };
  const window windows[] = {{0, 0, W, H, 9, 11, 0, 1},      {5, 3, 10, 12, 24, 20, 1, 1}, {W - 7, H - 5, 7, 5, 7, 5, 0, 1},
                            {36, 22, 1, 1, 3, 2, 1, 1},     {0, 0, 19, 12, 9, 11, 0, 2},  {4, 2, 8, 5, 7, 6, 1, 4},
                            {W - 7, H - 5, 1, 1, 3, 2, 0, 8}, {8, 8, 4, 2, 16, 16, 1, 8}};
  std::vector<ops::resize_job> jobs;
  std::vector<std::vector<std::uint8_t>> want;
  std::uint64_t out_bytes = 0;
  for (const window& w : windows) {
    ops::resize_job j;
    j.in_offset = (std::uint64_t{w.y} * W + w.x) * 3;
    j.in_h = w.h;
    j.in_w = w.w;
    j.in_stride = W * 3;
    j.out_offset = out_bytes;
    j.out_h = w.out_h;
    j.out_w = w.out_w;
    j.flip = w.flip;
    std::vector<std::uint8_t> host(std::uint64_t{w.out_h} * w.out_w * 3);
    if (w.box > 1) {  // the host's twin: the box reduction, then the resize
      j.box = w.box;
      j.box_h = H - w.y;
      j.box_w = W - w.x;
      std::vector<std::uint8_t> reduced(std::uint64_t{w.h} * w.w * 3);
      ops::box_downscale_u8(image.data() + j.in_offset, W * 3, j.box_h, j.box_w, w.box, reduced.data(), w.h, w.w);
      ops::resize_bilinear_u8(reduced.data(), w.w * 3, w.h, w.w, 3, host.data(), w.out_h, w.out_w, w.flip != 0);
    } else {
      ops::resize_bilinear_u8(image.data() + j.in_offset, W * 3, w.h, w.w, 3, host.data(), w.out_h, w.out_w, w.flip != 0);
    }
    jobs.push_back(j);
    out_bytes += std::uint64_t{w.out_h} * w.out_w * 3;
    want.push_back(std::move(host));
  }
  device_buffer d_in(image.size()), d_jobs(jobs.size() * sizeof(ops::resize_job)), d_out(out_bytes);
  test::upload(d_in.data(), image.data(), image.size());
  test::upload(d_jobs.data(), jobs.data(), d_jobs.size());
  test::fill_device(d_out.data(), 0xEE, out_bytes);
  const cuda_stream stream = cuda_stream::create();
  ops::resize_bilinear_u8_device(reinterpret_cast<const ops::resize_job*>(d_jobs.data()), jobs.data(), jobs.size(),
                                 reinterpret_cast<const std::uint8_t*>(d_in.data()), image.size(),
                                 reinterpret_cast<std::uint8_t*>(d_out.data()), out_bytes, stream.get());
  std::vector<std::uint8_t> gpu(out_bytes);
  PINFEED_CUDA_TRY(cudaMemcpyAsync(gpu.data(), d_out.data(), out_bytes, cudaMemcpyDeviceToHost, stream.get()));
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(gpu.data() + jobs[i].out_offset, want[i].data(), want[i].size()) == 0);
  }
}
