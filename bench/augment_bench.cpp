// `pinfeed bench augment` (augment_bench.hpp).
#include "augment_bench.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <filesystem>
#include <thread>

#include "bench_rows.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/augment.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pipeline_bench.hpp"

namespace fs = std::filesystem;

namespace pinfeed::bench {
namespace {

/// A 224x224 RGB image: cut from the first photo found (resized so that its shorter side is 224),
/// else made (smooth fields and noise).
std::vector<std::uint8_t> test_image(const std::string& photos) {
  const std::int64_t n = 224;
  for (const char* name : {"astronaut.png", "coffee.png", "chelsea.png"}) {
    const auto bytes = pinfeed::detail::read_whole_file((fs::path(photos) / name).string());
    if (!bytes) continue;
    std::vector<std::byte> px;
    loaders::image_spec spec;
    try {
      spec = loaders::decode_image(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes->data()), bytes->size()), px,
                                   loaders::decode_options{}, name);
    } catch (const std::exception&) {  // a format this build does not decode (PNG without its module): the next
      continue;
    }
    const loaders::pipeline p = loaders::parse_pipeline("resize(224),center_crop(224)");
    loaders::image_spec cur = spec;
    for (const auto& step : p.steps()) {
      const auto next = step->output_spec(cur);
      std::vector<std::byte> out(next.bytes());
      step->apply({px.data(), cur}, {out.data(), next}, philox_stream(0, 0, 0));
      px = std::move(out);
      cur = next;
    }
    if (cur.channels == 3 && cur.height == n && cur.width == n)
      return {reinterpret_cast<const std::uint8_t*>(px.data()), reinterpret_cast<const std::uint8_t*>(px.data()) + px.size()};
  }
  std::vector<std::uint8_t> img(static_cast<std::size_t>(n * n * 3));
  philox_stream rng(3, 0, 0);
  for (std::int64_t i = 0; i < n * n * 3; ++i)
    img[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(((i / 3) % n + (i / (3 * n)) * 2 + rng.below(30)) % 256);
  return img;
}

/// Microseconds a call of `step` on `img` takes: the median of `repeats` timings of `seconds` each.
double op_microseconds(const loaders::transform& step, const std::vector<std::uint8_t>& img, int repeats, double seconds) {
  const loaders::image_spec spec{224, 224, 3, dtype::u8};
  const auto out_spec = step.output_spec(spec);
  std::vector<std::uint8_t> in = img, out(out_spec.bytes());
  std::vector<double> t;
  std::uint64_t index = 0;
  for (int r = 0; r <= repeats; ++r) {
    std::uint64_t calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      // A fresh input each call (an in-place step would otherwise work on its own output).
      std::copy(img.begin(), img.end(), in.begin());
      step.apply({reinterpret_cast<std::byte*>(in.data()), spec}, {reinterpret_cast<std::byte*>(out.data()), out_spec},
                 philox_stream(1, 0, index++));
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < seconds);
    if (r > 0) t.push_back(elapsed * 1e6 / static_cast<double>(calls));  // the first round warms up
  }
  return median_of(t);
}

/// Microseconds per image of the one step of `step` on the device, over batches of `batch` copies of `img`
/// (each sample its own draw): the median of `repeats` rounds of `seconds`, each launch after a
/// refresh of the batch from a pristine copy (timed alone and taken off). Nullopt: no device form.
std::optional<double> device_op_microseconds(const loaders::pipeline& step, const std::vector<std::uint8_t>& img,
                                             std::size_t batch, int repeats, double seconds, cudaStream_t stream) {
  const loaders::image_spec spec{224, 224, 3, dtype::u8};
  const auto& steps = step.steps();
  if (steps[0]->device_rounds() <= 0 || !steps[0]->device_jobs(spec, philox_stream(1, 0, 0, 100))) return std::nullopt;
  const std::size_t rounds = loaders::device_rounds_of(steps);
  const std::uint64_t per = img.size(), bytes = per * batch;
  std::vector<ops::aug_job> drawn, jobs(rounds * batch);
  for (std::size_t j = 0; j < batch; ++j) {
    const auto mine = loaders::device_jobs_of(steps, spec, [&](std::size_t) { return philox_stream(1, 0, j, 100); });
    drawn.insert(drawn.end(), mine.begin(), mine.end());
  }
  ops::round_major_jobs(drawn.data(), batch, rounds, per, jobs.data());
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t j = 0; j < batch; ++j) std::copy(img.begin(), img.end(), host.begin() + static_cast<std::ptrdiff_t>(j * per));
  device_buffer pristine(bytes), images(bytes), spare(bytes), scratch(ops::aug_scratch_bytes(batch)), d_jobs(jobs.size() * sizeof(ops::aug_job));
  PINFEED_CUDA_TRY(cudaMemcpy(pristine.data(), host.data(), bytes, cudaMemcpyHostToDevice));
  PINFEED_CUDA_TRY(cudaMemcpy(d_jobs.data(), jobs.data(), jobs.size() * sizeof(ops::aug_job), cudaMemcpyHostToDevice));
  const auto timed = [&](bool augment) {
    std::vector<double> t;
    for (int r = 0; r <= repeats; ++r) {
      std::uint64_t calls = 0;
      const auto t0 = std::chrono::steady_clock::now();
      double elapsed = 0;
      do {
        for (int k = 0; k < 8; ++k, ++calls) {
          PINFEED_CUDA_TRY(cudaMemcpyAsync(images.data(), pristine.data(), bytes, cudaMemcpyDeviceToDevice, stream));
          if (augment)
            ops::augment_batch_device(reinterpret_cast<const ops::aug_job*>(d_jobs.data()), jobs.data(), batch, rounds,
                                      reinterpret_cast<std::uint8_t*>(images.data()), reinterpret_cast<std::uint8_t*>(spare.data()),
                                      bytes, scratch.data(), scratch.size(), stream);
        }
        PINFEED_CUDA_TRY(cudaStreamSynchronize(stream));
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (elapsed < seconds);
      if (r > 0) t.push_back(elapsed * 1e6 / static_cast<double>(calls * batch));  // the first round warms up
    }
    return median_of(t);
  };
  const double refresh = timed(false);
  return std::max(0.0, timed(true) - refresh);
}

/// The recipe's images/s (its JPEG dataset, `o.recipe` or `o.device_recipe` with `options`) on a
/// loader on `device` ("cpu", "cuda"), the median of `o.repeats` epochs after one to warm up, and
/// the first epoch's checksum lines. On a GPU each batch's device work is waited for, as a
/// trainer's step would need it.
std::pair<double, std::vector<std::string>> recipe_rate(const augment_bench_options& o, const std::string& recipe,
                                                        loaders::pipeline_source_options options, const std::string& device,
                                                        std::size_t workers) {
  auto src = std::make_shared<loaders::pipeline_source>(
      loaders::make_image_files_reader(loaders::list_image_folder((fs::path(o.data_dir) / "jpeg").string()).files),
      loaders::parse_pipeline(recipe), options);
  loader_options lo;
  lo.batch_size = o.batch;
  lo.workers = workers;
  lo.prefetch = 4;
  lo.device = device;
  loader l(src, lo);
  std::vector<double> t;
  std::vector<std::string> lines;
  for (int r = 0; r <= o.repeats; ++r) {
    l.start_epoch(static_cast<std::uint32_t>(r));
    const auto t0 = std::chrono::steady_clock::now();
    while (auto b = l.next()) {
      if (r == 0) lines.push_back(checksum_line(*b));
      if (device != "cpu") PINFEED_CUDA_TRY(cudaStreamSynchronize(b->stream()));
    }
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return {static_cast<double>(o.images) / median_of(t), lines};
}

/// The device recipe on a CUDA loader, decoded and augmented where `decode` and `augment_on` say
/// (the tail on the consumer's device).
std::pair<double, std::vector<std::string>> recipe_on_gpu(const augment_bench_options& o, loaders::decode_place decode,
                                                          loaders::augment_place augment_on, std::size_t workers) {
  loaders::pipeline_source_options po;
  po.device_tail = true;
  po.decode = decode;
  po.augment_on = augment_on;
  return recipe_rate(o, o.device_recipe, po, "cuda", workers);
}

void run_device_bench(const augment_bench_options& o, const std::vector<std::uint8_t>& img, std::ostream& out) {
  PINFEED_CUDA_TRY(cudaSetDevice(0));
  const cuda_stream stream = cuda_stream::create();
  for (const auto& spelling : o.ops.empty() ? default_augment_ops() : o.ops) {
    const loaders::pipeline p = loaders::parse_pipeline(spelling);
    if (p.steps().size() != 1) throw pinfeed::invalid_argument("bench augment: '" + spelling + "' is not one step");
    const auto us = device_op_microseconds(p, img, o.batch, o.repeats, o.seconds, stream.get());
    nlohmann::json row{{"bench", "augment"}, {"device", "cuda"}, {"op", spelling}, {"image", "224x224x3"}, {"batch", o.batch}};
    if (us) row["us_per_image"] = *us;
    else row["skipped"] = "no device form";
    out << with_host(row).dump() << std::endl;
  }
  if (!o.run_recipe) return;
  ensure_jpeg_dataset(o.data_dir, o.images);
  const std::size_t workers = o.workers > 0 ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  const auto [host, host_lines] = recipe_on_gpu(o, loaders::decode_place::host, loaders::augment_place::host, workers);
  const auto [device, device_lines] = recipe_on_gpu(o, loaders::decode_place::device, loaders::augment_place::automatic, workers);
  out << with_host({{"bench", "augment"},
                    {"device", "cuda"},
                    {"workload", "recipe"},
                    {"transforms", o.device_recipe},
                    {"workers", workers},
                    {"images", o.images},
                    {"host_images_per_s", host},
                    {"device_images_per_s", device},
                    {"speedup", device / host},
                    {"same_checksums", host_lines == device_lines}})
             .dump()
      << std::endl;
}

}  // namespace

std::vector<std::string> default_augment_ops() {
  return {"brightness(1.3)",      "contrast(1.3)",         "saturation(1.3)",
          "hue(0.1)",             "sharpness(1.5)",        "posterize(4)",
          "solarize(128)",        "autocontrast",          "equalize",
          "invert",               "grayscale(3)",          "gaussian_blur(9,2)",    "gaussian_blur(23,2)",
          "rotate(30)",           "rotate(30,interpolation=bilinear)", "affine(10,5,-5,1.1,8,0)",
          "affine(10,5,-5,1.1,8,0,interpolation=bilinear)",  "shear_x(0.3)", "translate_x(20)",
          "trivial_augment",      "rand_augment(2,9)",     "auto_augment(imagenet)",
          "color_jitter(0.4,0.4,0.4,0.1)", "random_erasing(1)"};
}

void run_augment_bench(const augment_bench_options& o, std::ostream& out) {
  if (o.device == "cuda") {
    if (!cuda_devices().usable) {
      out << with_host({{"bench", "augment"}, {"device", "cuda"}, {"skipped", "gpu"}, {"reason", cuda_devices().reason}}).dump()
          << std::endl;
      return;
    }
    return run_device_bench(o, test_image(o.photos_dir), out);
  }
  const auto img = test_image(o.photos_dir);
  if (o.device != "cpu") throw pinfeed::invalid_argument("bench augment: --device must be cpu or cuda, not '" + o.device + "'");
  for (const auto& spelling : o.ops.empty() ? default_augment_ops() : o.ops) {
    const loaders::pipeline p = loaders::parse_pipeline(spelling);
    if (p.steps().size() != 1) throw pinfeed::invalid_argument("bench augment: '" + spelling + "' is not one step");
    out << with_host({{"bench", "augment"},
                      {"op", spelling},
                      {"image", "224x224x3"},
                      {"threads", 1},
                      {"repeats", o.repeats},
                      {"us_per_image", op_microseconds(*p.steps()[0], img, o.repeats, o.seconds)}})
               .dump()
        << std::endl;
  }
  if (!o.run_recipe) return;
  ensure_jpeg_dataset(o.data_dir, o.images);
  const std::size_t workers = o.workers > 0 ? o.workers : std::max(1u, std::thread::hardware_concurrency());
  const double rate = recipe_rate(o, o.recipe, {}, "cpu", workers).first;
  out << with_host({{"bench", "augment"},
                    {"workload", "recipe"},
                    {"transforms", o.recipe},
                    {"workers", workers},
                    {"images", o.images},
                    {"median_s", static_cast<double>(o.images) / rate},
                    {"images_per_s", rate}})
             .dump()
      << std::endl;
}

}  // namespace pinfeed::bench
