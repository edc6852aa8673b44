// The nvJPEG half of the device path (decode_place::device_inexact, hybrid_decode.hpp): whole
// files claimed into jpeg_files on the workers, decoded by nvJPEG on the copy stream.
#include <algorithm>
#include <cstring>
#include <vector>

#include "hybrid_decode.hpp"
#include "hybrid_layout.hpp"
#include "jpeg_scan.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders::detail {

namespace {

/// The files of a batch nvJPEG failed, one at a time; those it refuses alone decoded whole on the
/// host into their place in `full`. Returns how many the host decoded; throws for a file it cannot.
std::uint64_t decode_alone(const nvjpeg_decoder& nv, nvjpeg_decoder::state& st, const slot_view& slot,
                           const std::vector<const unsigned char*>& data, const std::vector<std::size_t>& lengths,
                           std::vector<nvjpeg::image>& outs, const std::vector<file_entry>& entry, unsigned char* full) {
  std::uint64_t on_host = 0;
  const std::uint64_t files = data.size();
  for (std::uint64_t k = 0; k < files; ++k) {
    try {
      nv.decode(st, &data[k], &lengths[k], &outs[k], 1, slot.stream);
      continue;
    } catch (const pinfeed::runtime_error&) {
    }
    const std::string what = "decode on the device with nvJPEG: batch " + std::to_string(slot.batch) + ", sample " +
                             std::to_string(entry[k].index);
    std::vector<std::byte> px;
    const image_spec spec =
        decode_image({reinterpret_cast<const std::byte*>(data[k]), lengths[k]}, px, decode_options{}, what);
    if (spec.width != std::int64_t{entry[k].width} || spec.height != std::int64_t{entry[k].height} || spec.channels != 3)
      throw pinfeed::runtime_error(what + ": the host decoded " + std::to_string(spec.width) + "x" + std::to_string(spec.height) +
                                   " pixels, not the " + std::to_string(entry[k].width) + "x" + std::to_string(entry[k].height) +
                                   " its header gives");
    // From pageable memory: the call returns once `px` has been staged, so it may go after.
    PINFEED_CUDA_TRY(cudaMemcpyAsync(full + entry[k].full_offset, px.data(), px.size(), cudaMemcpyHostToDevice, slot.stream));
    ++on_host;
  }
  return on_host;
}

}  // namespace

bool hybrid_decoder::pack_file(sample& s, std::span<const std::byte> bytes, image_size full, const image_region& window,
                               unsigned denom, bool flip, std::uint32_t out_h, std::uint32_t out_w, std::int64_t max_pixels) {
  const nvjpeg_decoder* nv = nvjpeg_now_.load(std::memory_order_acquire);
  if (nv == nullptr) return false;
  const auto pixels = static_cast<std::uint64_t>(full.width) * static_cast<std::uint64_t>(full.height);
  if (pixels * 3 > kMostFullBytes || (max_pixels > 0 && pixels > static_cast<std::uint64_t>(max_pixels))) return false;
  if (bytes.size() > bytes_per_sample_ || bytes.size() > s.room(plan_ + 4) || !nvjpeg_takes(bytes, nv->hardware())) return false;
  // The entropy-coded data walked first: nvJPEG (its hardware backend) can report success for a
  // file whose headers parse but whose data is corrupt, and write garbage. A file that does not
  // walk takes the exact path, where the host decode names it as the host path does (on_error).
  if (std::string why; !jpeg_scan_intact(bytes, why)) {
    not_walked_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const std::span<std::byte> room = s.claim(plan_ + 4, bytes.size());
  if (room.empty()) return false;  // the arena filled up in the meantime
  std::memcpy(room.data(), bytes.data(), bytes.size());
  plan_record rec;
  rec.device = 2;
  rec.image.width = static_cast<std::uint32_t>(full.width);
  rec.image.height = static_cast<std::uint32_t>(full.height);
  rec.image.crop_x = static_cast<std::uint32_t>(window.x);
  rec.image.crop_y = static_cast<std::uint32_t>(window.y);
  rec.image.crop_width = static_cast<std::uint32_t>(window.width);
  rec.image.crop_height = static_cast<std::uint32_t>(window.height);
  rec.job.in_h = rec.image.crop_height;
  rec.job.in_w = rec.image.crop_width;
  rec.job.in_stride = rec.image.width * 3;
  if (denom > 1) {
    // The host path decodes this window at 1/denom (libjpeg's reduced IDCTs), each of its pixels
    // from a denom x denom square of the image: nvJPEG's whole image is reduced by the same
    // squares (box means) and the window of that reduction resized, not the full-size window
    // point-sampled by the bilinear taps. The record's crop is where its first square starts.
    const image_region sw = scaled_region(window, full.width, full.height, denom);
    rec.image.crop_x = static_cast<std::uint32_t>(sw.x * denom);
    rec.image.crop_y = static_cast<std::uint32_t>(sw.y * denom);
    rec.job.in_h = static_cast<std::uint32_t>(sw.height);
    rec.job.in_w = static_cast<std::uint32_t>(sw.width);
    rec.job.box = denom;
    rec.job.box_h = rec.image.height - rec.image.crop_y;
    rec.job.box_w = rec.image.width - rec.image.crop_x;
    rec.image.crop_width = std::min<std::uint32_t>(rec.job.in_w * denom, rec.job.box_w);  // what the boxes read
    rec.image.crop_height = std::min<std::uint32_t>(rec.job.in_h * denom, rec.job.box_h);
  }
  rec.job.out_h = out_h;
  rec.job.out_w = out_w;
  rec.job.flip = flip ? 1 : 0;
  rec.file_first = s.claimed(plan_ + 4).first;
  rec.file_size = bytes.size();
  rec.index = s.index();
  std::memcpy(s.bytes(plan_).data(), &rec, sizeof rec);
  device_.fetch_add(1, std::memory_order_relaxed);
  inexact_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::string hybrid_decoder::open_nvjpeg(int device) {
  std::lock_guard lock(scratch_mutex_);
  std::string why;
  auto& d = nvjpeg_[device];
  if (!d) {
    try {
      d = nvjpeg_decoder::open(device);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  nvjpeg_now_.store(d.get(), std::memory_order_release);
  nvjpeg_status_ = d ? d->backend() : "not used: " + why;
  if (!d) nvjpeg_.erase(device);
  return why;
}

std::string hybrid_decoder::nvjpeg_status() const {
  std::lock_guard lock(scratch_mutex_);
  std::string status = nvjpeg_status_;
  if (const std::uint64_t n = not_walked_.load(std::memory_order_relaxed); n > 0)
    status += ", " + std::to_string(n) + " files whose entropy-coded data does not decode kept from it";
  if (const std::uint64_t refused = host_fallbacks_.load(std::memory_order_relaxed); refused > 0)
    status += ", " + std::to_string(refused) + " of its files decoded on the host after it refused them";
  return status;
}

void hybrid_decoder::decode_files(const slot_view& slot, scratch& sc, std::uint64_t files, std::uint64_t full_bytes,
                                  const std::byte* entries) {
  nvjpeg_decoder* nv = nullptr;
  {
    std::lock_guard lock(scratch_mutex_);
    const auto it = nvjpeg_.find(slot.device_index);
    if (it != nvjpeg_.end()) nv = it->second.get();
  }
  if (nv == nullptr) {  // packed for another loader's device: open it here (throws naming why)
    if (const std::string why = open_nvjpeg(slot.device_index); !why.empty())
      throw pinfeed::runtime_error("decode on the device with nvJPEG: batch " + std::to_string(slot.batch) + ": " + why);
    std::lock_guard lock(scratch_mutex_);
    nv = nvjpeg_.at(slot.device_index).get();
  }
  if (!sc.nvjpeg) sc.nvjpeg = nv->make_state();
  std::vector<const unsigned char*> data(files);
  std::vector<std::size_t> lengths(files);
  std::vector<nvjpeg::image> outs(files);
  std::vector<file_entry> entry(files);
  const auto* arena = reinterpret_cast<const unsigned char*>(slot.host[plan_ + 4]);
  auto* full = reinterpret_cast<unsigned char*>(sc.full.data());
  for (std::uint64_t k = 0; k < files; ++k) {
    file_entry& e = entry[k];
    std::memcpy(&e, entries + k * sizeof e, sizeof e);
    if (e.first + e.size > slot.used[plan_ + 4] || e.full_offset + std::uint64_t{e.width} * e.height * 3 > full_bytes)
      throw pinfeed::runtime_error("decode on the device with nvJPEG: batch " + std::to_string(slot.batch) + ": file " +
                                   std::to_string(k) + " lies outside its arena or image buffer");
    data[k] = arena + e.first;
    lengths[k] = e.size;
    outs[k] = nvjpeg::image{};
    outs[k].channel[0] = full + e.full_offset;
    outs[k].pitch[0] = std::size_t{e.width} * 3;
  }
  try {
    nv->decode(*sc.nvjpeg, data.data(), lengths.data(), outs.data(), files, slot.stream);
    return;
  } catch (const pinfeed::runtime_error&) {
    // nvJPEG answers for the batch as a whole: one file it cannot decode (its headers were read,
    // not its data) fails them all. Each alone, then; the files it still refuses are decoded
    // whole on the host into the same place (their windows are resized from there like the rest),
    // and a file the host cannot decode either fails the batch, named.
  }
  host_fallbacks_.fetch_add(decode_alone(*nv, *sc.nvjpeg, slot, data, lengths, outs, entry, full), std::memory_order_relaxed);
}

}  // namespace pinfeed::loaders::detail
