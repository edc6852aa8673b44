#include "hybrid_decode.hpp"
#include "device_augment.hpp"
#include "hybrid_layout.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>

#include "pinfeed/loaders/jpeg_coefficients.hpp"
#include "pinfeed/ops/jpeg_planes.hpp"
#include "pinfeed/ops/resize.hpp"
#include "jpeg_scan.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed::loaders::detail {
namespace {

bool is_jpeg(std::span<const std::byte> b) {
  return b.size() >= 2 && b[0] == std::byte{0xFF} && b[1] == std::byte{0xD8};
}

constexpr const char* kReasonNames[] = {"",         "not_jpeg",  "arithmetic", "precision", "colour", "sampling",
                                        "quantization", "corrupt", "too_large", "range", "no_window"};
static_assert(std::size(kReasonNames) == static_cast<std::size_t>(host_reason::count_));
static_assert(static_cast<int>(jpeg_fallback::range) == static_cast<int>(host_reason::range));

/// The window of a sample on the device path and what becomes of it, or why the host decodes it.
struct window_choice {
  image_region window{};  ///< in the image's pixels
  image_size full{};      ///< the image's size (its header's)
  unsigned denom = 1;     ///< the DCT scale the host path decodes it at (1/denom)
  std::uint32_t out_h = 0, out_w = 0;
  bool flip = false;
  host_reason refused{};
};

/// The first step's window (as decode_image_region() clamps it), the DCT scale the host path
/// decodes it at, its output size and the flips after it, from the streams the host path draws from.
window_choice choose_window(sample& s, std::span<const std::byte> bytes, const pipeline& steps, const decode_options& decoding) {
  window_choice c;
  if (!is_jpeg(bytes)) return c.refused = host_reason::not_jpeg, c;
  const image_size full = c.full = peek_size(bytes);
  if (full.width <= 0 || full.height <= 0) return c.refused = host_reason::corrupt, c;
  const auto& all = steps.steps();
  const auto plan = all.front()->window(full.height, full.width, s.rng(100));
  if (!plan) return c.refused = host_reason::no_window, c;
  image_region& r = c.window = plan->window;
  r.y = std::clamp<std::int64_t>(r.y, 0, full.height - 1);
  r.x = std::clamp<std::int64_t>(r.x, 0, full.width - 1);
  r.height = std::clamp<std::int64_t>(r.height, 1, full.height - r.y);
  r.width = std::clamp<std::int64_t>(r.width, 1, full.width - r.x);
  const std::int64_t need = std::min(plan->out_height, plan->out_width);
  c.denom = region_decode_denom(r, need == 0 ? 0 : std::max(need, decoding.min_short_side));
  c.out_h = static_cast<std::uint32_t>(plan->out_height);
  c.out_w = static_cast<std::uint32_t>(plan->out_width);
  for (std::size_t k = 1; k < all.size(); ++k) c.flip ^= *all[k]->mirrors(s.rng(100 + static_cast<std::uint32_t>(k)));
  return c;
}

/// pack_jpeg() of window `w`, throwing sample_error (stage decode) as the host path would.
host_reason pack_window(sample& s, std::span<const std::byte> bytes, const window_choice& w, const decode_options& decoding,
                        std::uint64_t max_bytes, jpeg_packed& packed) {
  jpeg_pack_result result;
  try {
    result = pack_jpeg(bytes, s.origin(), {w.window, max_bytes, decoding.max_pixels, w.denom}, packed);
  } catch (...) {
    rethrow_as_sample_error(s.index(), "decode", s.origin());
  }
  return static_cast<host_reason>(result.fallback);
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

}  // namespace

hybrid_decoder::hybrid_decoder(std::size_t first_field, std::size_t image_bytes, std::uint64_t bytes_per_sample, bool files, std::size_t pixel_field)
    : plan_(first_field), image_bytes_(image_bytes), bytes_per_sample_(bytes_per_sample), files_(files), pixel_field_(pixel_field) {}

hybrid_decoder::~hybrid_decoder() = default;

std::vector<field_spec> hybrid_decoder::fields(std::uint64_t bytes_per_sample, bool files) {
  if (bytes_per_sample < 1024 || bytes_per_sample > (std::uint64_t{1} << 30))
    throw pinfeed::invalid_argument("pipeline_source: device_bytes_per_sample must be 1 KiB to 1 GiB, got " +
                                    std::to_string(bytes_per_sample));
  const auto most = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  std::vector<field_spec> f{{"jpeg_plan", dtype::u8, {static_cast<std::int64_t>(kPlanBytes)}, false, true},
                            {"jpeg_bytes", dtype::u8, {most(bytes_per_sample)}, true, true},
                            {"jpeg_starts", dtype::u32, {most(bytes_per_sample / 4)}, true, true},
                            {"jpeg_quant", dtype::u16, {most(kTablesMost)}, true, true}};
  if (files) f.push_back({"jpeg_files", dtype::u8, {most(bytes_per_sample)}, true, true});
  return f;
}

std::string hybrid_decoder::refusal(const pipeline& steps, const image_reader& reader) {
  if (!reader.stores_encoded()) return "the reader '" + reader.name() + "' does not read encoded files";
  if (reader.decoding().fast_dct) return "the reader decodes with fast_dct, which the device does not";
  if (reader.decoding().apply_exif_orientation)
    return "the reader applies EXIF orientation (apply_exif_orientation), which the device path does not";
  if (steps.empty()) return "the pipeline has no steps: the device path needs a first step that decodes a window";
  const auto& all = steps.steps();
  if (!all.front()->window(4096, 4096, philox_stream(0, 0, 0, 100)))
    return "its first step, " + all.front()->name() + ", does not decode a window (random_resized_crop or a crop does)";
  for (std::size_t k = 1; k < all.size(); ++k)
    if (!all[k]->mirrors(philox_stream(0, 0, 0, 100)))
      return "step " + all[k]->name() +
             " runs after the window: only flips may follow it in the decode (augment_on device or auto moves the steps with a "
             "device form after them to the GPU)";
  return {};
}

bool hybrid_decoder::pack(sample& s, std::span<const std::byte> bytes, const pipeline& steps, const decode_options& decoding) {
  const std::span<std::byte> record = s.bytes(plan_);
  plan_record rec;
  std::memcpy(record.data(), &rec, sizeof rec);  // host, unless every check below passes
  const auto refuse = [&](host_reason r) {
    count(r);
    return false;
  };
  const window_choice w = choose_window(s, bytes, steps, decoding);
  if (w.refused != host_reason{}) return refuse(w.refused);
  if (files_ && pack_file(s, bytes, w.full, w.window, w.denom, w.flip, w.out_h, w.out_w, decoding.max_pixels)) return true;
  auto& packed = pinfeed::detail::thread_scratch<jpeg_packed, struct hybrid_packed>();
  if (const host_reason why = pack_window(s, bytes, w, decoding, bytes_per_sample_, packed); why != host_reason{})
    return refuse(why);
  // The device unpacks block b from starts[b] to starts[b + 1]: the blocks and their starts are
  // claimed together, in the same order in both arenas, or neither is (claims that do not fit take
  // nothing, so the arenas have no gaps). Tables first: a sample refused for them claims nothing (one
  // refused for its blocks leaves its tables unused in their arena, which is harmless).
  const auto quant = s.claim<std::uint16_t>("jpeg_quant", packed.quant.size());
  if (quant.empty()) return refuse(host_reason::too_large);
  std::memcpy(quant.data(), packed.quant.data(), packed.quant.size() * sizeof(std::uint16_t));
  std::span<std::byte> b;
  std::span<std::uint32_t> starts;
  {
    std::lock_guard lock(claim_mutex_);
    if (s.room(plan_ + 1) < packed.bytes.size() || s.room(plan_ + 2) < packed.starts.size())
      return refuse(host_reason::too_large);
    b = s.claim(plan_ + 1, packed.bytes.size());
    starts = s.claim<std::uint32_t>("jpeg_starts", packed.starts.size());
  }
  const std::uint64_t first_byte = s.claimed(plan_ + 1).first;
  std::memcpy(b.data(), packed.bytes.data(), packed.bytes.size());
  for (std::size_t k = 0; k < starts.size(); ++k) starts[k] = static_cast<std::uint32_t>(first_byte + packed.starts[k]);

  rec.device = 1;
  rec.image = packed.image;
  const std::uint64_t first_block = s.claimed(plan_ + 2).first;
  for (int k = 0; k < rec.image.components; ++k) rec.image.comp[k].first_block += first_block;
  rec.image.first_quant = static_cast<std::uint32_t>(s.claimed(plan_ + 3).first / 64);
  rec.job.in_h = rec.image.crop_height;
  rec.job.in_w = rec.image.crop_width;
  rec.job.out_h = w.out_h;
  rec.job.out_w = w.out_w;
  rec.job.flip = w.flip ? 1 : 0;
  std::memcpy(record.data(), &rec, sizeof rec);
  device_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void hybrid_decoder::before_copy(const slot_view& slot) const {
  struct gathered {
    std::vector<ops::jpeg_image> images;
    std::vector<ops::resize_job> jobs, file_jobs;
    std::vector<file_entry> files;
    std::vector<std::size_t> order;
  };
  auto& g = pinfeed::detail::thread_scratch<gathered, struct hybrid_gathered>();
  g.images.clear();
  g.jobs.clear();
  g.file_jobs.clear();
  g.files.clear();
  std::byte* region = slot.host[plan_];
  std::uint64_t full_bytes = 0;
  for (std::size_t j = 0; j < slot.count; ++j) {
    plan_record rec;
    std::memcpy(&rec, region + j * kPlanBytes, sizeof rec);
    if (rec.device == 0) continue;
    rec.job.out_offset = j * image_bytes_;  // the sample's place in the pixel field
    if (rec.device == 2) {  // a whole file for nvJPEG: its window read from its RGB image, rows apart
      const file_entry e{rec.file_first, rec.file_size, rec.image.width, rec.image.height, full_bytes, rec.index};
      rec.job.in_offset = full_bytes + (std::uint64_t{rec.image.crop_y} * rec.image.width + rec.image.crop_x) * 3;
      full_bytes += std::uint64_t{rec.image.width} * rec.image.height * 3;
      g.files.push_back(e);
      g.file_jobs.push_back(rec.job);
      continue;
    }
    g.images.push_back(rec.image);
    g.jobs.push_back(rec.job);
  }
  // The batch's images go in the order of their blocks (the order the workers claimed them in).
  g.order.resize(g.images.size());
  for (std::size_t k = 0; k < g.order.size(); ++k) g.order[k] = k;
  std::sort(g.order.begin(), g.order.end(), [&](std::size_t a, std::size_t b) {
    return g.images[a].comp[0].first_block < g.images[b].comp[0].first_block;
  });
  plan_header h;
  h.images = g.images.size();
  h.files = g.files.size();
  h.full_bytes = full_bytes;
  for (std::size_t k = 0; k < g.files.size(); ++k) {
    std::memcpy(region + jobs_at(h.images) + (h.images + k) * sizeof(ops::resize_job), &g.file_jobs[k], sizeof(ops::resize_job));
    std::memcpy(region + files_at(h.images, h.files) + k * sizeof(file_entry), &g.files[k], sizeof(file_entry));
  }
  for (std::size_t k = 0; k < g.order.size(); ++k) {
    ops::jpeg_image im = g.images[g.order[k]];
    ops::resize_job job = g.jobs[g.order[k]];
    im.out_offset = h.window_bytes;
    im.plane_offset = h.plane_bytes;
    h.window_bytes += ops::jpeg_output_bytes(im);
    h.plane_bytes += ops::jpeg_plane_bytes(im);
    job.in_offset = im.out_offset;
    std::memcpy(region + kHeaderBytes + k * sizeof im, &im, sizeof im);
    std::memcpy(region + jobs_at(h.images) + k * sizeof job, &job, sizeof job);
  }
  std::memcpy(region, &h, sizeof h);  // the records were read before the loop overwrote them
}

hybrid_decoder::scratch& hybrid_decoder::scratch_for(int device, cudaStream_t stream) {
  std::lock_guard lock(scratch_mutex_);
  auto& s = scratch_[{device, stream}];
  if (!s) s = std::make_unique<scratch>();
  return *s;
}

void hybrid_decoder::after_copy(const slot_view& slot) {
  plan_header h;
  std::memcpy(&h, slot.host[plan_], sizeof h);
  if (h.images == 0 && h.files == 0) return;
  if (slot.used[plan_ + 1] > std::numeric_limits<std::uint32_t>::max())
    throw pinfeed::runtime_error("decode on the device: batch " + std::to_string(slot.batch) + " packed " +
                                 std::to_string(slot.used[plan_ + 1]) +
                                 " bytes, past the 4 GiB its block starts reach: lower batch_size or device_bytes_per_sample");
  const std::uint64_t bytes = slot.used[plan_ + 1], blocks = slot.used[plan_ + 2], tables = slot.used[plan_ + 3] / 64;
  scratch& sc = scratch_for(slot.device_index, slot.stream);
  std::lock_guard queueing(sc.queueing);
  const auto fit = [&](device_buffer& b, std::uint64_t need) {
    if (b.size() >= need && b.size() > 0) return;
    PINFEED_CUDA_TRY(cudaStreamSynchronize(slot.stream));  // the batch before may still read it
    b = device_buffer(std::max<std::uint64_t>(need + need / 4, 256));
  };
  const auto* host_jobs = reinterpret_cast<const ops::resize_job*>(slot.host[plan_] + jobs_at(h.images));
  const auto* device_jobs = reinterpret_cast<const ops::resize_job*>(slot.device[plan_] + jobs_at(h.images));
  auto* out = reinterpret_cast<std::uint8_t*>(slot.device[pixel_field_]);
  if (h.files > 0) {  // nvJPEG's whole images, then their windows resized and flipped
    fit(sc.full, h.full_bytes);
    decode_files(slot, sc, h.files, h.full_bytes, slot.host[plan_] + files_at(h.images, h.files));
    ops::resize_bilinear_u8_device(device_jobs + h.images, host_jobs + h.images, h.files,
                                   reinterpret_cast<const std::uint8_t*>(sc.full.data()), h.full_bytes, out,
                                   slot.count * image_bytes_, slot.stream);
  }
  if (h.images == 0) return;
  fit(sc.blocks, blocks * 64 * sizeof(std::int16_t));
  fit(sc.window, h.window_bytes);
  fit(sc.planes, h.plane_bytes);
  if (sc.malformed.size() == 0) {  // counts blocks the unpack refused (none: the workers packed them)
    sc.malformed = device_buffer(sizeof(std::uint32_t));
    PINFEED_CUDA_TRY(cudaMemsetAsync(sc.malformed.data(), 0, sizeof(std::uint32_t), slot.stream));
  }
  const auto* host_images = reinterpret_cast<const ops::jpeg_image*>(slot.host[plan_] + kHeaderBytes);
  auto* d_blocks = reinterpret_cast<std::int16_t*>(sc.blocks.data());
  auto* d_window = reinterpret_cast<std::uint8_t*>(sc.window.data());
  ops::unpack_jpeg_blocks_device(reinterpret_cast<const std::uint8_t*>(slot.device[plan_ + 1]), bytes,
                                 reinterpret_cast<const std::uint32_t*>(slot.device[plan_ + 2]), blocks, d_blocks,
                                 reinterpret_cast<std::uint32_t*>(sc.malformed.data()), slot.stream);
  const ops::jpeg_batch_view view{reinterpret_cast<const ops::jpeg_image*>(slot.device[plan_] + kHeaderBytes), h.images,
                                  d_blocks, blocks, reinterpret_cast<const std::uint16_t*>(slot.device[plan_ + 3]), tables};
  ops::decode_jpeg_batch_device(view, host_images, d_window, h.window_bytes,
                                reinterpret_cast<std::uint8_t*>(sc.planes.data()), h.plane_bytes, slot.stream);
  ops::resize_bilinear_u8_device(device_jobs, host_jobs, h.images, d_window, h.window_bytes, out, slot.count * image_bytes_,
                                 slot.stream);
}

std::vector<std::pair<std::string, std::uint64_t>> hybrid_decoder::host_counts() const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (std::size_t r = 1; r < host_.size(); ++r)
    if (const auto n = host_[r].load(std::memory_order_relaxed); n > 0) out.emplace_back(kReasonNames[r], n);
  return out;
}

}  // namespace pinfeed::loaders::detail

namespace pinfeed::loaders {

const char* to_string(decode_place p) noexcept {
  switch (p) {
    case decode_place::host: return "host";
    case decode_place::device: return "device";
    case decode_place::automatic: return "auto";
    case decode_place::device_inexact: return "device-inexact";
  }
  return "?";
}

decode_place parse_decode_place(std::string_view text) {
  for (const auto p : {decode_place::host, decode_place::device, decode_place::automatic, decode_place::device_inexact})
    if (text == to_string(p)) return p;
  throw pinfeed::invalid_argument("decode place '" + std::string(text) + "' is not one of host, device, auto, device-inexact");
}

std::string decode_counts::to_string() const {
  std::string s = "device " + std::to_string(device);
  if (inexact > 0 || nvjpeg_used())
    s += " (nvJPEG " + nvjpeg + ": " + std::to_string(inexact) + " inexact)";
  s += ", host " + std::to_string(host);
  std::string why;
  for (const auto& [reason, n] : host_by_reason) why += (why.empty() ? "" : ", ") + reason + " " + std::to_string(n);
  return why.empty() ? s : s + " (" + why + ")";
}

std::string decode_probe::to_string() const {
  char head[160];
  std::snprintf(head, sizeof head, "host half %.2fx the decode's CPU time (%.3f vs %.3f ms an image); ", ratio(), host_half_ms,
                host_decode_ms);
  std::string s = head + std::string("the device takes ") + std::to_string(device) + " of " + std::to_string(samples) + " files";
  std::string why;
  for (const auto& [reason, n] : host_by_reason) why += (why.empty() ? "" : ", ") + reason + " " + std::to_string(n);
  return why.empty() ? s : s + " (" + why + ")";
}

decode_probe probe_decode_paths(const std::shared_ptr<image_reader>& reader, const pipeline& steps,
                                std::span<const std::uint64_t> indices, std::uint64_t bytes_per_sample) {
  if (!reader) throw pinfeed::invalid_argument("probe_decode_paths: reader is null");
  if (const std::string why = detail::hybrid_decoder::refusal(steps, *reader); !why.empty())
    throw pinfeed::invalid_argument("probe_decode_paths: " + why);
  std::vector<field_spec> fields{{"image", dtype::u8, {1}}};
  for (auto& f : reader->extra_fields()) fields.push_back(f);
  std::vector<std::vector<std::byte>> storage(fields.size());
  std::vector<std::byte*> buffers;
  for (std::size_t i = 0; i < fields.size(); ++i) buffers.push_back((storage[i] = std::vector<std::byte>(fields[i].bytes())).data());
  const decode_options decoding = reader->decoding();
  const auto& first = steps.steps().front();
  std::array<std::uint64_t, static_cast<std::size_t>(detail::host_reason::count_)> refused{};
  decode_probe p;
  std::vector<std::byte> stored, image;
  jpeg_packed packed;
  for (const std::uint64_t index : indices) {
    sample s(index, 0, 0, fields, buffers);
    try {
      const auto bytes = reader->read_stored(s, stored);
      const detail::window_choice w = detail::choose_window(s, bytes, steps, decoding);
      auto why = w.refused;
      double half = 0;
      if (why == detail::host_reason{}) {
        const double t0 = detail::thread_cpu_ms();
        why = detail::pack_window(s, bytes, w, decoding, bytes_per_sample, packed);
        half = detail::thread_cpu_ms() - t0;
      }
      const double t0 = detail::thread_cpu_ms();
      (void)reader->decode_stored(s, bytes, image, [&](std::int64_t h, std::int64_t w2) -> decode_plan {
        return {first->min_short_side(h, w2, s.rng(100)), first->window(h, w2, s.rng(100))};
      });
      const double host = detail::thread_cpu_ms() - t0;
      ++p.samples;
      if (why != detail::host_reason{}) {
        ++refused[static_cast<std::size_t>(why)];
        continue;
      }
      ++p.device;
      p.host_half_ms += half;
      p.host_decode_ms += host;
    } catch (const sample_error&) {  // a bad file: the loader reports it
    }
  }
  if (p.device > 0) {
    p.host_half_ms /= static_cast<double>(p.device);
    p.host_decode_ms /= static_cast<double>(p.device);
  }
  for (std::size_t r = 1; r < refused.size(); ++r)
    if (refused[r] > 0) p.host_by_reason.emplace_back(detail::kReasonNames[r], refused[r]);
  return p;
}

void pipeline_source::choose_decode_path() {
  // A tail the host would fuse, or a batch op after it, runs on the device after the decode there.
  device_refusal_ = detail::hybrid_decoder::refusal(host_, *reader_);
  if (device_refusal_.empty() && batch_ && !finishable())
    device_refusal_ = "the batch op " + steps_.steps().back()->name() + " mixes the batches the host's steps make";
  place_ = options_.decode;
  if (place_ == decode_place::automatic) {
    const bool gpu = device_refusal_.empty() && cuda_devices().usable;
    place_ = gpu ? decode_place::device : decode_place::host;
  }
  if (place_ != decode_place::device && place_ != decode_place::device_inexact) return;
  if (!device_refusal_.empty())
    throw pinfeed::invalid_argument("pipeline_source: JPEGs cannot be decoded on the device: " + device_refusal_);
  decoding_ = reader_->decoding();
  if (needs_finish()) finish_on_device();
  const std::size_t first = fields_.size();
  const bool files = place_ == decode_place::device_inexact;
  for (auto& f : detail::hybrid_decoder::fields(options_.device_bytes_per_sample, files)) fields_.push_back(std::move(f));
  hybrid_ = std::make_unique<detail::hybrid_decoder>(first, fields_[pixel_field_].bytes(), options_.device_bytes_per_sample, files,
                                                     pixel_field_);
}

decode_counts pipeline_source::decoded() const {
  decode_counts c;
  c.host = host_decodes_->load(std::memory_order_relaxed);
  if (hybrid_) {
    c.device = hybrid_->device_count();
    c.inexact = hybrid_->inexact_count();
    c.host_by_reason = hybrid_->host_counts();
    if (place_ == decode_place::device_inexact) c.nvjpeg = hybrid_->nvjpeg_status();
  }
  return c;
}

void pipeline_source::on_loader(const device_choice& device) {
  if (augmenter_ && !device.is_cuda())
    throw pinfeed::invalid_argument("pipeline_source runs " + augmenter_->steps().to_string() + " on the device (augment_on " +
                                    std::string(to_string(options_.augment_on)) + "), but the loader's batches stay on the " +
                                    device.to_string() + ": use augment_on host");
  if (hybrid_ && !device.is_cuda())
    throw pinfeed::invalid_argument("pipeline_source decodes JPEGs on the device (decode " +
                                    std::string(to_string(options_.decode)) + "), but the loader's batches stay on the " +
                                    device.to_string() + ": use decode host");
  if (place_ != decode_place::device_inexact) return;
  if (const std::string why = hybrid_->open_nvjpeg(device.index); !why.empty())
    log(log_level::warn, "decode device-inexact: nvJPEG is not used on " + device.to_string() + " (" + why +
                             "): JPEGs are decoded on the device exactly, by pinfeed's kernels");
}

void pipeline_source::before_copy(const slot_view& slot) {
  if (hybrid_) hybrid_->before_copy(slot);
  if (augmenter_) augmenter_->before_copy(slot);
  if (device_finish_ && float_tail_) float_tail_->before_copy(slot);
}

void pipeline_source::after_copy(const slot_view& slot) {
  if (hybrid_) hybrid_->after_copy(slot);
  if (augmenter_) augmenter_->after_copy(slot);  // on the decoded (or copied) pixels, on the same stream
  if (device_finish_) {  // the fused tail: the pixels to the image field's float CHW
    const auto& px = fields_[pixel_field_].shape;
    const ops::image_batch_shape shape{slot.count, static_cast<std::size_t>(px[0]), static_cast<std::size_t>(px[1])};
    ops::normalize_hwc_to_chw_device({reinterpret_cast<const std::uint8_t*>(slot.device[pixel_field_]), slot.device[0], shape},
                                     *device_finish_, slot.stream);
    if (float_tail_) float_tail_->after_copy(slot, 0);  // erasing on the tail's floats
  }
  if (batch_) mix_batch(slot, true);  // on the copy stream, after the copy: the consumer's side
}

}  // namespace pinfeed::loaders
