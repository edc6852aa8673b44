#include "decode_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_rows.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/host_memory.hpp"

namespace pinfeed::bench {
namespace {

namespace fs = std::filesystem;

/// This thread's CPU time, in seconds.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct picture {
  std::vector<std::uint8_t> rgb;
  int width = 0, height = 0;
};

/// `count` pictures of 500x375 (375x500 from portrait photos) cut from the photos in `dir` at
/// offsets spread over each photo, every other one mirrored.
std::vector<picture> cut_photos(const std::string& dir, std::size_t count) {
  std::vector<picture> photos;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".png" && ext != ".jpg" && ext != ".jpeg") continue;
      std::vector<std::byte> bytes, px;
      loaders::read_file(e.path().string(), bytes);
      const loaders::image_spec s = loaders::decode_image(bytes, px, {}, e.path().string());
      const bool portrait = s.height > s.width;
      const int w = portrait ? 375 : 500, h = portrait ? 500 : 375;
      if (s.width < w || s.height < h) continue;
      picture p;
      p.width = static_cast<int>(s.width);
      p.height = static_cast<int>(s.height);
      const auto* b = reinterpret_cast<const std::uint8_t*>(px.data());
      p.rgb.assign(b, b + px.size());
      photos.push_back(std::move(p));
    }
  if (photos.empty())
    throw std::runtime_error("bench decode: no photo of at least 500x375 in '" + dir + "' (scripts/fetch-photos.sh " + dir + ")");
  std::vector<picture> out;
  for (std::size_t i = 0; i < count; ++i) {
    const picture& src = photos[i % photos.size()];
    const std::size_t k = i / photos.size(), per = (count + photos.size() - 1) / photos.size();
    const bool portrait = src.height > src.width;
    picture p;
    p.width = portrait ? 375 : 500;
    p.height = portrait ? 500 : 375;
    const int x0 = static_cast<int>((src.width - p.width) * k / std::max<std::size_t>(1, per - 1));
    const int y0 = static_cast<int>((src.height - p.height) * ((k * 7) % per) / std::max<std::size_t>(1, per - 1));
    p.rgb.resize(static_cast<std::size_t>(p.width) * p.height * 3);
    for (int y = 0; y < p.height; ++y)
      for (int x = 0; x < p.width; ++x) {
        const int sx = (i % 2 == 1) ? x0 + p.width - 1 - x : x0 + x;
        std::memcpy(&p.rgb[(static_cast<std::size_t>(y) * p.width + x) * 3],
                    &src.rgb[(static_cast<std::size_t>(y0 + y) * src.width + sx) * 3], 3);
      }
    out.push_back(std::move(p));
  }
  return out;
}

/// One image with its rrc(224) window and flip, drawn as the loader's first two steps draw them.
struct sample {
  std::vector<std::byte> jpeg;
  loaders::window_plan plan;
  philox_stream flip_rng{0, 0, 0};
};

/// The host path: the window decoded as the loader decodes it (DCT scaling where the window
/// allows), resized to 224x224, flipped.
void host_path(const sample& s, const loaders::transform& flip, std::vector<std::byte>& px, std::vector<std::byte>& resized,
               std::vector<std::byte>& flipped) {
  const loaders::image_spec spec = loaders::decode_image_region(
      s.jpeg, px, {}, s.plan.window, std::min(s.plan.out_height, s.plan.out_width), "bench");
  const loaders::image_spec out{s.plan.out_height, s.plan.out_width, 3, dtype::u8};
  resized.resize(out.bytes());
  flipped.resize(out.bytes());
  loaders::resize_into({px.data(), spec}, {resized.data(), out});
  flip.apply({resized.data(), out}, {flipped.data(), out}, s.flip_rng);
}

struct pass_result {
  double host = 0, half = 0;
};

#if PINFEED_WITH_CUDA
/// Images/s of the device half for `packed` as one batch: unpack, IDCT, upsampling, colour.
double device_half_images_per_s(const std::vector<loaders::jpeg_packed>& packed, int repeats) {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> starts;
  std::vector<ops::jpeg_image> images;
  std::vector<std::uint16_t> quant;
  std::uint64_t blocks = 0, out_bytes = 0, scratch = 0;
  for (const auto& p : packed) {
    ops::jpeg_image im = p.image;
    for (int k = 0; k < im.components; ++k) im.comp[k].first_block += blocks;
    im.first_quant = static_cast<std::uint32_t>(quant.size() / 64);
    im.out_offset = out_bytes;
    im.plane_offset = scratch;
    for (const std::uint32_t s : p.starts) starts.push_back(static_cast<std::uint32_t>(bytes.size() + s));
    bytes.insert(bytes.end(), p.bytes.begin(), p.bytes.end());
    quant.insert(quant.end(), p.quant.begin(), p.quant.end());
    blocks += p.starts.size();
    out_bytes += ops::jpeg_output_bytes(im);
    scratch += ops::jpeg_plane_bytes(im);
    images.push_back(im);
  }
  device_buffer d_bytes(bytes.size()), d_starts(starts.size() * 4), d_blocks(blocks * 128), d_images(images.size() * sizeof(ops::jpeg_image)),
      d_quant(quant.size() * 2), d_out(out_bytes), d_scratch(scratch), d_bad(4);
  PINFEED_CUDA_TRY(cudaMemcpy(d_bytes.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemcpy(d_starts.data(), starts.data(), starts.size() * 4, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemcpy(d_images.data(), images.data(), images.size() * sizeof(ops::jpeg_image), cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemcpy(d_quant.data(), quant.data(), quant.size() * 2, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemset(d_bad.data(), 0, 4));
  const cuda_stream stream = cuda_stream::create();
  const ops::jpeg_batch_view view{reinterpret_cast<const ops::jpeg_image*>(d_images.data()), images.size(),
                                  reinterpret_cast<const std::int16_t*>(d_blocks.data()), blocks,
                                  reinterpret_cast<const std::uint16_t*>(d_quant.data()), quant.size() / 64};
  const auto once = [&] {
    ops::unpack_jpeg_blocks_device(reinterpret_cast<const std::uint8_t*>(d_bytes.data()), bytes.size(),
                                   reinterpret_cast<const std::uint32_t*>(d_starts.data()), blocks,
                                   reinterpret_cast<std::int16_t*>(d_blocks.data()), reinterpret_cast<std::uint32_t*>(d_bad.data()),
                                   stream.get());
    ops::decode_jpeg_batch_device(view, images.data(), reinterpret_cast<std::uint8_t*>(d_out.data()), out_bytes,
                                  reinterpret_cast<std::uint8_t*>(d_scratch.data()), scratch, stream.get());
  };
  once();
  PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) once();
    PINFEED_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    rates.push_back(10.0 * static_cast<double>(packed.size()) /
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_of(rates);
}

/// One loader's pass over the bench's files on the GPU with rrc(224),hflip.
struct loader_pass {
  double images_per_s = 0;
  std::vector<std::uint8_t> first_epoch;  ///< epoch 0's images, copied back
  std::string decoded;
  bool nvjpeg_used = false;  ///< device_inexact: whether nvJPEG decoded
  std::string nvjpeg;  ///< device_inexact: nvJPEG's backend, or why it was not used
};

/// `files` through a loader on the GPU decoding at `place`: images/s over `repeats` epochs after
/// an untimed first one (whose images it keeps).
loader_pass loader_run(const std::vector<loaders::image_file>& files, loaders::decode_place place, int repeats) {
  loaders::pipeline_source_options po;
  po.decode = place;
  po.device_tail = true;
  auto src = std::make_shared<loaders::pipeline_source>(loaders::make_image_files_reader(files),
                                                        loaders::parse_pipeline("rrc(224),hflip"), po);
  loader_options lo;
  lo.batch_size = 32;
  lo.device = "cuda";
  lo.seed = 7;
  loader l(src, lo);
  loader_pass r;
  std::vector<double> rates;
  for (int e = 0; e <= repeats; ++e) {
    l.start_epoch(static_cast<std::uint32_t>(e));
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t n = 0;
    while (auto b = l.next()) {
      n += b->size();
      if (e > 0) continue;
      const auto v = b->field("image");
      const std::size_t at = r.first_epoch.size();
      r.first_epoch.resize(at + v.bytes());
      PINFEED_CUDA_TRY(cudaMemcpyAsync(r.first_epoch.data() + at, v.data, v.bytes(), cudaMemcpyDeviceToHost, b->stream()));
      PINFEED_CUDA_TRY(cudaStreamSynchronize(b->stream()));
    }
    PINFEED_CUDA_TRY(cudaStreamSynchronize(l.stream()));
    if (e > 0) rates.push_back(static_cast<double>(n) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  r.images_per_s = median_of(rates);
  r.decoded = src->decoded().to_string();
  r.nvjpeg = src->decoded().nvjpeg;
  r.nvjpeg_used = src->decoded().nvjpeg_used();
  return r;
}

/// The samples as files, through a loader decoding on the host and one decoding on the device.
void compare_loaders(const std::vector<sample>& samples, int repeats, nlohmann::json& row) {
  const fs::path dir = fs::temp_directory_path() / ("pinfeed-bench-decode-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<loaders::image_file> files;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const fs::path f = dir / (std::to_string(i) + ".jpg");
    std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(samples[i].jpeg.data()),
                                             static_cast<std::streamsize>(samples[i].jpeg.size()));
    files.push_back({f.string(), 0});
  }
  try {
    const loader_pass host = loader_run(files, loaders::decode_place::host, repeats);
    const loader_pass device = loader_run(files, loaders::decode_place::device, repeats);
    row["loader_host_images_per_s"] = host.images_per_s;
    row["loader_device_images_per_s"] = device.images_per_s;
    row["loader_same_images"] = host.first_epoch == device.first_epoch;
    row["loader_decoded"] = device.decoded;
    // nvJPEG (device-inexact), where the GPU runner has libnvjpeg: its rate, and how far its
    // images are from the host path's (mean absolute difference per sample, of 255).
    const loader_pass nv = loader_run(files, loaders::decode_place::device_inexact, repeats);
    row["loader_nvjpeg"] = nv.nvjpeg;
    row["loader_nvjpeg_decoded"] = nv.decoded;
    if (nv.nvjpeg_used && nv.first_epoch.size() == host.first_epoch.size()) {
      row["loader_nvjpeg_images_per_s"] = nv.images_per_s;
      double diff = 0;
      for (std::size_t i = 0; i < nv.first_epoch.size(); ++i) diff += std::abs(int(nv.first_epoch[i]) - int(host.first_epoch[i]));
      row["loader_nvjpeg_mean_abs_diff"] = nv.first_epoch.empty() ? 0.0 : diff / static_cast<double>(nv.first_epoch.size());
    }
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
}
#endif

/// The images encoded at `quality`, with their windows and flips drawn.
std::vector<sample> encode_all(const std::vector<picture>& pictures, int quality, std::uint64_t& file_bytes) {
  const auto rrc = loaders::make_random_resized_crop(224);
  std::vector<sample> samples;
  file_bytes = 0;
  for (std::size_t i = 0; i < pictures.size(); ++i) {
    const picture& p = pictures[i];
    loaders::jpeg_encode_options e;
    e.quality = quality;
    sample s;
    s.jpeg = loaders::encode_jpeg_with(p.rgb, p.width, p.height, e);
    s.plan = *rrc->window(p.height, p.width, philox_stream(7, 0, i * 2));
    s.flip_rng = philox_stream(7, 0, i * 2 + 1);
    file_bytes += s.jpeg.size();
    samples.push_back(std::move(s));
  }
  return samples;
}

/// What the host half makes of each sample: its packed blocks, or the host path.
struct packing {
  std::vector<loaders::jpeg_packed> packed;
  std::vector<bool> to_host;
  std::size_t walked = 0, fallbacks = 0;
  std::uint64_t slot_total = 0, slot_most = 0;
};

/// The host half's options for `s`: its window at the DCT scale the host path decodes it at.
loaders::jpeg_pack_options pack_options(const sample& s) {
  loaders::jpeg_pack_options po;
  po.window = s.plan.window;
  po.scale_denom = loaders::region_decode_denom(s.plan.window, std::min(s.plan.out_height, s.plan.out_width));
  return po;
}

packing pack_all(const std::vector<sample>& samples) {
  packing k;
  k.packed.resize(samples.size());
  k.to_host.assign(samples.size(), false);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const loaders::jpeg_pack_options po = pack_options(samples[i]);
    const bool ok = loaders::pack_jpeg(samples[i].jpeg, "bench", po, k.packed[i]).fallback == loaders::jpeg_fallback::none;
    k.to_host[i] = !ok;
    k.fallbacks += ok ? 0 : 1;
    if (!ok) continue;
    k.walked += k.packed[i].walked ? 1 : 0;
    k.slot_total += k.packed[i].slot_bytes();
    k.slot_most = std::max<std::uint64_t>(k.slot_most, k.packed[i].slot_bytes());
  }
  return k;
}

/// Median CPU seconds per pass of the host path and of the host half, passes in turn.
pass_result time_passes(const std::vector<sample>& samples, const packing& k, int repeats) {
  const auto flip = loaders::make_random_hflip();
  std::vector<double> host_t, half_t;
  std::vector<std::byte> px, resized, flipped;
  loaders::jpeg_packed scratch;
  for (int r = 0; r < repeats + 1; ++r) {  // the first pass warms the caches and is not counted
    double t0 = thread_cpu_seconds();
    for (const sample& s : samples) host_path(s, *flip, px, resized, flipped);
    const double host = thread_cpu_seconds() - t0;
    t0 = thread_cpu_seconds();
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (k.to_host[i])
        host_path(samples[i], *flip, px, resized, flipped);
      else
        (void)loaders::pack_jpeg(samples[i].jpeg, "bench", pack_options(samples[i]), scratch);
    }
    const double half = thread_cpu_seconds() - t0;
    if (r > 0) host_t.push_back(host), half_t.push_back(half);
  }
  return {median_of(host_t), median_of(half_t)};
}

/// The entropy decoder's own figures over the walked images: median CPU seconds (and cycles) of a
/// pass of jpeg_entropy_probe::decode() over them all, and their blocks, symbols and bits.
struct entropy_pass {
  double seconds = 0, cycles = 0;
  loaders::jpeg_entropy_counts counts;
  std::size_t images = 0;
};

entropy_pass time_entropy(const std::vector<sample>& samples, const packing& k, int repeats, const cycle_counter& cycles) {
  std::vector<std::unique_ptr<loaders::jpeg_entropy_probe>> probes;
  entropy_pass r;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (k.to_host[i] || !k.packed[i].walked) continue;
    probes.push_back(std::make_unique<loaders::jpeg_entropy_probe>(samples[i].jpeg, "bench", pack_options(samples[i])));
    const loaders::jpeg_entropy_counts n = probes.back()->count();
    r.counts.blocks += n.blocks;
    r.counts.symbols += n.symbols;
    r.counts.bits += n.bits;
  }
  r.images = probes.size();
  std::vector<double> t, c;
  for (int rep = 0; rep < repeats + 1; ++rep) {  // the first pass warms the caches and is not counted
    const std::uint64_t c0 = cycles.read();
    const double t0 = thread_cpu_seconds();
    for (const auto& p : probes) p->decode();
    const double seconds = thread_cpu_seconds() - t0;
    const std::uint64_t c1 = cycles.read();
    if (rep > 0) t.push_back(seconds), c.push_back(static_cast<double>(c1 - c0));
  }
  r.seconds = median_of(t);
  r.cycles = median_of(c);
  return r;
}

void run_quality(const decode_bench_options& o, const std::vector<picture>& pictures, int quality, std::ostream& out) {
  std::uint64_t file_bytes = 0;
  const std::vector<sample> samples = encode_all(pictures, quality, file_bytes);
  const packing k = pack_all(samples);
  const pass_result t = time_passes(samples, k, o.repeats);
  const cycle_counter cycles;
  const entropy_pass e = time_entropy(samples, k, o.repeats, cycles);
  const double n = static_cast<double>(samples.size());
  const double host_us = t.host / n * 1e6, half_us = t.half / n * 1e6;
  const std::size_t device = samples.size() - k.fallbacks;
  char line[160];
  std::snprintf(line, sizeof line, "host half: %.2fx of the host path's CPU time (q%d); entropy decoding %.2f ns a symbol", half_us / host_us,
                quality, e.counts.symbols ? e.seconds * 1e9 / static_cast<double>(e.counts.symbols) : 0.0);
  nlohmann::json row{{"bench", "decode"}, {"quality", quality}, {"images", samples.size()}, {"transforms", "rrc(224),hflip"},
                     {"file_bytes_mean", static_cast<double>(file_bytes) / n}, {"host_path_cpu_us", host_us},
                     {"host_half_cpu_us", half_us}, {"host_half_ratio", half_us / host_us}, {"images_per_core_gain", host_us / half_us},
                     {"slot_bytes_mean", device ? static_cast<double>(k.slot_total) / static_cast<double>(device) : 0.0},
                     {"slot_bytes_most", k.slot_most}, {"device_images", device}, {"walked_images", k.walked},
                     {"host_images", k.fallbacks}, {"summary", line}, {"device_half_images_per_s", nullptr},
                     {"loader_host_images_per_s", nullptr}, {"loader_device_images_per_s", nullptr},
                     {"loader_same_images", nullptr}, {"loader_decoded", nullptr}};
  // The entropy decoder alone (the walk of the host half, storing nothing), per Huffman symbol.
  const auto symbols = static_cast<double>(e.counts.symbols);
  row["entropy_images"] = e.images;
  row["entropy_symbols_per_image"] = e.images ? symbols / static_cast<double>(e.images) : 0.0;
  row["entropy_bits_per_symbol"] = symbols > 0 ? static_cast<double>(e.counts.bits) / symbols : 0.0;
  row["entropy_ns_per_symbol"] = symbols > 0 ? e.seconds * 1e9 / symbols : 0.0;
  row["entropy_cycles_per_symbol"] = cycles.readable() && symbols > 0 ? nlohmann::json(e.cycles / symbols) : nlohmann::json(nullptr);
  if (!cycles.readable()) row["entropy_cycles_unreadable"] = cycles.why_not();
  row["entropy_cpu_us"] = e.images ? e.seconds / static_cast<double>(e.images) * 1e6 : 0.0;
  // The share of the host half's time spent outside the entropy decoder (header, tables, stores
  // in the compact form), where the walk took every image (none to the host path, none read by
  // libjpeg's reader), so that both times are over the same images.
  row["half_outside_entropy_share"] =
      e.images == samples.size() && t.half > 0 ? nlohmann::json(1.0 - e.seconds / t.half) : nlohmann::json(nullptr);
#if PINFEED_WITH_CUDA
  if (cuda_devices().usable) {
    std::vector<loaders::jpeg_packed> on_device;
    for (std::size_t i = 0; i < samples.size(); ++i)
      if (!k.to_host[i]) on_device.push_back(k.packed[i]);
    row["device_half_images_per_s"] = device_half_images_per_s(on_device, o.repeats);
    compare_loaders(samples, o.repeats, row);
  }
#endif
  out << with_host(std::move(row)).dump() << std::endl;
}

}  // namespace

void run_decode_bench(const decode_bench_options& o, std::ostream& out) {
  if (o.images == 0 || o.repeats <= 0) throw std::invalid_argument("bench decode: images and repeats must be positive");
  for (const int q : o.qualities)
    if (q < 1 || q > 100) throw std::invalid_argument("bench decode: quality " + std::to_string(q) + " is not in 1..100");
  const std::vector<picture> pictures = cut_photos(o.photos_dir, o.images);
  for (const int q : o.qualities) run_quality(o, pictures, q, out);
}

}  // namespace pinfeed::bench
