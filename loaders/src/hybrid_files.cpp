// The nvJPEG half of the device path (decode_place::device_inexact, hybrid_decode.hpp): whole
// files claimed into jpeg_files on the workers, decoded by nvJPEG on the copy stream.
#include <cstring>
#include <vector>

#include "hybrid_decode.hpp"
#include "hybrid_layout.hpp"
#include "jpeg_scan.hpp"
#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::loaders::detail {

bool hybrid_decoder::pack_file(sample& s, std::span<const std::byte> bytes, const image_region& window, bool flip,
                               std::uint32_t out_h, std::uint32_t out_w, std::int64_t max_pixels) {
  const nvjpeg_decoder* nv = nvjpeg_now_.load(std::memory_order_acquire);
  if (nv == nullptr) return false;
  const image_size full = peek_size(bytes);  // choose_window read it: a JPEG of a known size
  const auto pixels = static_cast<std::uint64_t>(full.width) * static_cast<std::uint64_t>(full.height);
  if (pixels * 3 > kMostFullBytes || (max_pixels > 0 && pixels > static_cast<std::uint64_t>(max_pixels))) return false;
  if (bytes.size() > s.room(plan_ + 4) || !nvjpeg_takes(bytes, nv->hardware())) return false;
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
  rec.job.out_h = out_h;
  rec.job.out_w = out_w;
  rec.job.flip = flip ? 1 : 0;
  rec.file_first = s.claimed(plan_ + 4).first;
  rec.file_size = bytes.size();
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
  return nvjpeg_status_;
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
  const auto* arena = reinterpret_cast<const unsigned char*>(slot.host[plan_ + 4]);
  auto* full = reinterpret_cast<unsigned char*>(sc.full.data());
  for (std::uint64_t k = 0; k < files; ++k) {
    file_entry e;
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
  nv->decode(*sc.nvjpeg, data.data(), lengths.data(), outs.data(), files, slot.stream);
}

}  // namespace pinfeed::loaders::detail
