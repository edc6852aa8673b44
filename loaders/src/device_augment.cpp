#include "device_augment.hpp"

#include "pinfeed/loaders/pipeline_source.hpp"
#include "transforms/common.hpp"

#include <algorithm>
#include <cstring>

#include "pinfeed/ops/augment.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::loaders::detail {

/// A loader's copy stream's scratch: the second image field the rounds alternate with, and the
/// counts and tables. Each batch's launches hold the mutex from the first to the last, so that no
/// other batch's kernels come between its rounds on the stream and overwrite what they read.
struct device_augmenter::scratch {
  std::mutex queueing;
  std::size_t samples = 0;  ///< the most images a batch may have
  device_buffer spare, counts;
};

device_augmenter::device_augmenter(pipeline steps, std::size_t first_index, const image_spec& image, std::size_t jobs_field,
                                   std::size_t pixel_field)
    : steps_(std::move(steps)), first_(first_index), field_(jobs_field), pixel_field_(pixel_field), image_(image),
      image_bytes_(image.bytes()) {
  rounds_ = device_rounds_of(steps_.steps());
}

device_augmenter::~device_augmenter() = default;

field_spec device_augmenter::jobs_field(std::size_t rounds) {
  return {"aug_jobs", dtype::u8, {static_cast<std::int64_t>(rounds * sizeof(ops::aug_job))}, false, true};
}

std::string device_augmenter::refusal(const pipeline& steps, std::size_t first, const image_spec& image) {
  const auto& all = steps.steps();
  for (std::size_t k = first; k < all.size(); ++k) {
    const auto& step = all[k];
    if (step->device_rounds() <= 0) return "step " + step->name() + " has no device form";
    const image_spec out = step->output_spec(image);
    if (out.height != image.height || out.width != image.width || out.channels != image.channels || out.type != image.type)
      return "step " + step->name() + " changes the image's shape, which the device's steps keep";
    if (!step->device_jobs(image, philox_stream(0, 0, 0, 100)))
      return "step " + step->name() + " has no device form for " + std::to_string(image.channels) + "-channel images";
  }
  return {};
}

namespace {
std::vector<ops::aug_job> sample_jobs(sample& s, const pipeline& steps, std::size_t first, const image_spec& image) {
  return device_jobs_of(steps.steps(), image, [&](std::size_t k) { return s.rng(100 + static_cast<std::uint32_t>(first + k)); });
}
}  // namespace

void write_sample_jobs(sample& s, std::size_t field, const pipeline& steps, std::size_t first, const image_spec& image) {
  const auto jobs = sample_jobs(s, steps, first, image);
  std::memcpy(s.bytes(field).data(), jobs.data(), jobs.size() * sizeof(ops::aug_job));
}

void jobs_in_rounds(const slot_view& slot, std::size_t field, std::size_t rounds, std::uint64_t per_image) {
  auto& tmp = pinfeed::detail::thread_scratch<std::vector<ops::aug_job>, struct jobs_in_rounds_scratch>();
  tmp.resize(slot.count * rounds);
  auto* jobs = reinterpret_cast<ops::aug_job*>(slot.host[field]);
  ops::round_major_jobs(jobs, slot.count, rounds, per_image, tmp.data());
  std::memcpy(jobs, tmp.data(), tmp.size() * sizeof(ops::aug_job));
}

void device_augmenter::write_jobs(sample& s) const { write_sample_jobs(s, field_, steps_, first_, image_); }

void device_augmenter::before_copy(const slot_view& slot) const { jobs_in_rounds(slot, field_, rounds_, image_bytes_); }

void device_augmenter::after_copy(const slot_view& slot) {
  if (slot.count == 0) return;
  scratch* sc = nullptr;
  {
    std::lock_guard lock(scratch_mutex_);
    auto& p = scratch_[{slot.device_index, slot.stream}];
    if (!p) p = std::make_unique<scratch>();
    sc = p.get();
  }
  std::lock_guard queueing(sc->queueing);
  if (sc->samples < slot.count) {  // the first batch (the batch size); a larger one after a smaller first
    if (sc->samples > 0) PINFEED_CUDA_TRY(cudaStreamSynchronize(slot.stream));  // the batch before may still read it
    sc->spare = device_buffer(slot.count * image_bytes_);
    sc->counts = device_buffer(ops::aug_scratch_bytes(slot.count));
    sc->samples = slot.count;
  }
  const auto* host_jobs = reinterpret_cast<const ops::aug_job*>(slot.host[field_]);
  const auto* device_jobs = reinterpret_cast<const ops::aug_job*>(slot.device[field_]);
  ops::augment_batch_device(device_jobs, host_jobs, slot.count, rounds_, reinterpret_cast<std::uint8_t*>(slot.device[pixel_field_]),
                            reinterpret_cast<std::uint8_t*>(sc->spare.data()), slot.count * image_bytes_, sc->counts.data(),
                            sc->counts.size(), slot.stream);
}

std::vector<memory_use> device_augmenter::device_memory(std::size_t batch_size) const {
  return {{"device augmentation scratch (a second image field, the counts)",
           batch_size * image_bytes_ + ops::aug_scratch_bytes(batch_size)}};
}

float_tail::float_tail(pipeline steps, std::size_t first_index, const image_spec& image)
    : steps_(std::move(steps)), first_(first_index), rounds_(device_rounds_of(steps_.steps())), image_(image),
      floats_(static_cast<std::uint64_t>(image.height * image.width * image.channels)) {}

std::size_t float_tail::trailing(const pipeline& steps, const image_spec& in) {
  const auto& all = steps.steps();
  std::vector<image_spec> specs{in};  // specs[k]: what step k takes
  for (const auto& s : all) specs.push_back(s->output_spec(specs.back()));
  std::size_t k = all.size();
  const auto same = [](const image_spec& a, const image_spec& b) {
    return a.height == b.height && a.width == b.width && a.channels == b.channels && a.type == b.type;
  };
  while (k > 0 && specs[k - 1].type == dtype::f32 && specs[k - 1].channels == 3 && all[k - 1]->device_rounds() > 0 &&
         same(specs[k], specs[k - 1]) && all[k - 1]->device_jobs(specs[k - 1], philox_stream(0, 0, 0, 100)).has_value())
    --k;
  if (k == all.size()) return 0;
  const pipeline rest(std::vector<std::shared_ptr<transform>>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k)));
  return !rest.device_tail().empty() && fused_tail(rest) ? all.size() - k : 0;
}

field_spec float_tail::jobs_field() const {
  return {"tail_jobs", dtype::u8, {static_cast<std::int64_t>(rounds_ * sizeof(ops::aug_job))}, false, true};
}

void float_tail::run_host(sample& s, float* chw) const {
  for (const ops::aug_job& j : sample_jobs(s, steps_, first_, image_)) ops::erase_float_host(&j, 1, chw, floats_, ops::mix_layout::chw);
}

void float_tail::write_jobs(sample& s) const { write_sample_jobs(s, field_, steps_, first_, image_); }

void float_tail::before_copy(const slot_view& slot) const { jobs_in_rounds(slot, field_, rounds_, floats_); }  // offsets in floats

void float_tail::after_copy(const slot_view& slot, std::size_t image_field) const {
  const auto* host_jobs = reinterpret_cast<const ops::aug_job*>(slot.host[field_]);
  const auto* device_jobs = reinterpret_cast<const ops::aug_job*>(slot.device[field_]);
  for (std::size_t r = 0; r < rounds_; ++r)
    ops::erase_float_device(device_jobs + r * slot.count, host_jobs + r * slot.count, slot.count,
                            reinterpret_cast<float*>(slot.device[image_field]), slot.count * floats_, ops::mix_layout::chw, slot.stream);
}

}  // namespace pinfeed::loaders::detail

namespace pinfeed::loaders {

std::size_t device_rounds_of(std::span<const std::shared_ptr<transform>> steps) {
  std::size_t rounds = 0;
  for (const auto& s : steps) rounds += static_cast<std::size_t>(std::max(s->device_rounds(), 0));
  return std::max<std::size_t>(rounds, 1);
}

std::vector<ops::aug_job> device_jobs_of(std::span<const std::shared_ptr<transform>> steps, const image_spec& in,
                                         const std::function<philox_stream(std::size_t)>& rng) {
  std::vector<ops::aug_job> out;
  const std::size_t rounds = device_rounds_of(steps);
  out.reserve(rounds);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const auto jobs = steps[k]->device_jobs(in, rng(k));
    if (!jobs) throw pinfeed::runtime_error("step " + steps[k]->name() + " gave no device jobs");
    if (jobs->size() > static_cast<std::size_t>(std::max(steps[k]->device_rounds(), 0)))
      throw pinfeed::runtime_error("step " + steps[k]->name() + " gave " + std::to_string(jobs->size()) + " device jobs, past its " +
                                   std::to_string(steps[k]->device_rounds()));
    out.insert(out.end(), jobs->begin(), jobs->end());
  }
  const ops::aug_job copy = ops::aug_job_of(ops::aug_op::identity, 0.0, static_cast<std::uint32_t>(in.height),
                                            static_cast<std::uint32_t>(in.width), static_cast<int>(in.channels),
                                            ops::interpolation::nearest, std::nullopt);
  out.resize(rounds, copy);
  return out;
}

const char* to_string(augment_place p) noexcept {
  switch (p) {
    case augment_place::host: return "host";
    case augment_place::device: return "device";
    case augment_place::automatic: return "auto";
  }
  return "?";
}

augment_place parse_augment_place(std::string_view text) {
  for (const auto p : {augment_place::host, augment_place::device, augment_place::automatic})
    if (text == to_string(p)) return p;
  throw pinfeed::invalid_argument("augment place '" + std::string(text) + "' is not one of host, device, auto");
}

augment_place pipeline_source::augment_path() const noexcept { return augmenter_ ? augment_place::device : augment_place::host; }

pipeline pipeline_source::device_steps() const { return augmenter_ ? augmenter_->steps() : pipeline(); }

std::vector<memory_use> pipeline_source::device_memory(std::size_t batch_size) const {
  return augmenter_ ? augmenter_->device_memory(batch_size) : std::vector<memory_use>{};
}

void pipeline_source::write_device_jobs(sample& s) const {
  const bool tail_jobs = device_finish_ && float_tail_;
  if (!augmenter_ && !tail_jobs) return;
  stage_timer timer(stage::transform, s.stats(), s.trace(), s.index());
  try {
    if (augmenter_) augmenter_->write_jobs(s);
    if (tail_jobs) float_tail_->write_jobs(s);
  } catch (...) {
    rethrow_as_sample_error(s.index(), "transform (the device's jobs)", s.origin());
  }
}

void pipeline_source::choose_augment_path() {
  const auto all = host_.steps();
  // The decode's part: the first step (a window, a crop, a resize) and the flips right after it.
  std::size_t split = all.empty() ? 0 : 1;
  while (split < all.size() && all[split]->mirrors(philox_stream(0, 0, 0, 100))) ++split;
  const augment_place want = options_.augment_on;
  image_spec mid{};
  bool moved = false;
  if (split < all.size()) {
    after_decode_ = pipeline(std::vector<std::shared_ptr<transform>>(all.begin() + static_cast<std::ptrdiff_t>(split), all.end()));
    const pipeline prefix(std::vector<std::shared_ptr<transform>>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split)));
    try {
      mid = prefix.output_spec(reader_->image_shape());
    } catch (const std::invalid_argument&) {  // sizes that vary after them (a resize of varied images)
      mid = image_spec{};
    }
    // A tail the host would fuse, or a batch op after it, runs on the device after the steps there.
    if (batch_ && !finishable())
      augment_refusal_ = "the batch op " + steps_.steps().back()->name() + " mixes floats no fused tail makes on the device";
    else if (mid.type != dtype::u8 || !mid.fixed())
      augment_refusal_ = "the steps before them (" + prefix.to_string() + ") give " + detail::shape_text(mid) +
                         ", not uint8 images of one size";
    else augment_refusal_ = detail::device_augmenter::refusal(host_, split, mid);
    if (want == augment_place::device && !augment_refusal_.empty())
      throw pinfeed::invalid_argument("pipeline_source: augment_on device: " + augment_refusal_);
    // auto follows the decode: a pipeline decoded on the host keeps its steps there.
    moved = want != augment_place::host && augment_refusal_.empty() &&
            (want == augment_place::device || options_.decode != decode_place::host);
    if (moved) host_ = prefix;
  }
  const pipeline full(all);
  choose_decode_path();  // sees only the host's steps
  if (moved && want == augment_place::automatic && place_ == decode_place::host) {
    host_ = full;  // the decode resolved to the host: so do the steps
    moved = false;
  }
  if (!moved) return;
  if (needs_finish()) finish_on_device();
  const std::size_t field = fields_.size();
  augmenter_ = std::make_unique<detail::device_augmenter>(after_decode_, split, mid, field, pixel_field_);
  fields_.push_back(detail::device_augmenter::jobs_field(augmenter_->rounds()));
}

}  // namespace pinfeed::loaders
