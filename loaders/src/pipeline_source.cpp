#include "pinfeed/loaders/pipeline_source.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_set>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "device_augment.hpp"
#include "hybrid_decode.hpp"
#include "image_header.hpp"
#include "transforms/common.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::loaders {

namespace {
image_spec decode_planned(std::span<const std::byte> bytes, std::vector<std::byte>& out, const decode_options& options,
                          const decode_planner& plan, const std::string& what, bool& window_only, decode_report& report) {
  window_only = false;
  image_size full = plan ? peek_size(bytes) : image_size{};
  // The planner plans in the turned image's pixels where EXIF orientation is applied.
  if (options.apply_exif_orientation && full.width > 0 && detail::exif_orientation(bytes) >= 5) std::swap(full.width, full.height);
  if (full.width <= 0 || full.height <= 0) return decode_image(bytes, out, options, what, &report);
  const decode_plan p = plan(full.height, full.width);
  const auto floor = [&](std::int64_t need) { return need == 0 ? 0 : std::max(need, options.min_short_side); };
  if (p.window) {
    window_only = true;
    return decode_image_region(bytes, out, options, p.window->window,
                               floor(std::min(p.window->out_height, p.window->out_width)), what, &report);
  }
  decode_options o = options;
  o.min_short_side = floor(p.min_short_side);
  return decode_image(bytes, out, o, what, &report);
}
}  // namespace

read_result decode_sample(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                          const decode_options& options, const decode_planner& plan, const std::string& origin) {
  stage_timer timer(stage::decode, s.stats(), s.trace(), s.index());
  read_result r;
  r.stored_bytes = bytes.size();
  decode_report report;
  try {
    r.spec = decode_planned(bytes, image, options, plan, origin, r.window_only, report);
  } catch (...) {
    rethrow_as_sample_error(s.index(), "decode", origin);
  }
  if (report.warnings > 0) {
    if (s.stats() != nullptr) s.stats()->add_decode_warning();
    if (get_log_level() >= log_level::debug)
      log(log_level::debug, "sample " + std::to_string(s.index()) + " (" + origin + "): decoded past " +
                                std::to_string(report.warnings) + " corrupt-data warning(s) of libjpeg, the first: " +
                                report.first_warning);
  }
  return r;
}

std::span<const std::byte> image_reader::read_stored(sample& s, std::vector<std::byte>&) {
  throw sample_error(s.index(), "read", s.origin(), "reader '" + name() + "' does not store encoded images");
}

read_result image_reader::decode_stored(sample& s, std::span<const std::byte>, std::vector<std::byte>&,
                                        const decode_planner&) {
  throw sample_error(s.index(), "decode", s.origin(), "reader '" + name() + "' does not store encoded images");
}

namespace {

class source_reader final : public image_reader {
 public:
  source_reader(std::shared_ptr<source> base, const std::string& image_field) : base_(std::move(base)) {
    if (!base_) throw pinfeed::invalid_argument("pipeline_source: base source is null");
    fields_ = base_->fields();
    bool found = false;
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      if (fields_[i].name != image_field) {
        extras_.push_back(fields_[i]);
        continue;
      }
      const auto& f = fields_[i];
      if (f.type != dtype::u8 || f.shape.size() != 3)
        throw pinfeed::invalid_argument("pipeline_source: field '" + f.name + "' of '" + base_->name() +
                                    "' must be uint8 [H, W, C]");
      image_index_ = i;
      shape_ = {f.shape[0], f.shape[1], f.shape[2], dtype::u8};
      found = true;
    }
    if (!found) throw pinfeed::invalid_argument("pipeline_source: '" + base_->name() + "' has no field '" + image_field + "'");
  }
  std::uint64_t size() const override { return base_->size(); }
  image_spec image_shape() const override { return shape_; }
  std::vector<field_spec> extra_fields() const override { return extras_; }
  std::string name() const override { return base_->name(); }
  std::string identity() const override { return base_->identity(); }
  std::shared_ptr<const sample_groups> groups() const override { return base_->groups(); }
  storage_kind storage() const override { return storage_kind::generated; }
  std::vector<memory_use> memory() const override { return base_->memory(); }
  void limit_memory(std::uint64_t bytes) override { base_->limit_memory(bytes); }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner&) override {
    const pinfeed::detail::scratch_level<std::vector<std::byte*>, struct base_buffers> level;  // the base may be a pipeline_source
    auto& buffers = level.get();
    image.resize(shape_.bytes());
    buffers.resize(fields_.size());
    // Output field 0 is the pipeline's; the base's other fields map to output fields 1.. in order.
    std::size_t extra = 1;
    for (std::size_t i = 0; i < fields_.size(); ++i)
      buffers[i] = i == image_index_ ? image.data() : s.bytes(extra++).data();
    sample base(s.index(), s.epoch(), s.seed(), fields_, buffers, s.stats(), s.trace());
    base_->produce(base);
    if (!base.origin().empty()) s.set_origin(base.origin());
    return {shape_, shape_.bytes()};
  }

 private:
  std::shared_ptr<source> base_;
  std::vector<field_spec> fields_, extras_;
  std::size_t image_index_ = 0;
  image_spec shape_;
};

}  // namespace

std::shared_ptr<image_reader> make_reader_from_source(std::shared_ptr<source> base, const std::string& image_field) {
  return std::make_shared<source_reader>(std::move(base), image_field);
}

/// Under error_policy::skip, which samples were found bad: a bad sample is tried once per epoch
/// (for any worker count) and later stand-in searches pass over it without reading it again.
class detail::bad_samples {
 public:
  explicit bad_samples(std::size_t max_listed) : max_listed_(max_listed) {}

  /// Before trying `index` in `epoch`: false if it is known bad there; waits while another worker
  /// is trying it (so a bad sample is read exactly once per epoch); else marks it as being tried
  /// and returns true. Every true is followed by one finish().
  [[nodiscard]] bool claim(std::uint32_t epoch, std::uint64_t index) {
    std::unique_lock lock(m_);
    for (;;) {
      for (const auto& e : by_epoch_)
        if (e.epoch == epoch && e.indices.count(index) != 0) return false;
      if (trying_.insert({epoch, index}).second) return true;
      // Another worker is reading this sample now (its own slot, or a stand-in search): wait for
      // its outcome. That try never waits on anything itself, so this cannot deadlock.
      changed_.wait(lock);
    }
  }

  /// Ends a claimed try; a failed one records `index` as bad in `epoch`. Returns how many samples
  /// are known bad in that epoch.
  std::uint64_t finish(std::uint32_t epoch, std::uint64_t index, const sample_error* failure, stage_stats* stats) {
    struct wake {  // waiters learn of the released claim on every path, a throwing one included
      std::condition_variable& cv;
      ~wake() { cv.notify_all(); }
    } waker{changed_};
    std::lock_guard lock(m_);
    trying_.erase({epoch, index});
    auto it = std::find_if(by_epoch_.begin(), by_epoch_.end(), [&](const epoch_bad& e) { return e.epoch == epoch; });
    if (failure != nullptr) {
      if (it == by_epoch_.end()) {
        constexpr std::size_t kEpochsKept = 4;  // a loader runs one epoch at a time
        if (by_epoch_.size() == kEpochsKept) by_epoch_.pop_front();
        by_epoch_.push_back({epoch, {}});
        it = std::prev(by_epoch_.end());
      }
      it->indices.insert(index);
      if (stats != nullptr) stats->add_bad_sample();
      if (ever_.insert(index).second && listed_.size() < max_listed_) listed_.push_back(failure->what());
    }
    return it != by_epoch_.end() ? it->indices.size() : 0;
  }

  void replaced() noexcept { replaced_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t replaced_count() const noexcept { return replaced_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t failures() const {
    std::lock_guard lock(m_);
    return ever_.size();
  }
  [[nodiscard]] std::vector<std::string> failed() const {
    std::lock_guard lock(m_);
    return listed_;
  }

 private:
  struct epoch_bad {
    std::uint32_t epoch;
    std::unordered_set<std::uint64_t> indices;
  };
  std::size_t max_listed_;
  mutable std::mutex m_;
  std::condition_variable changed_;
  std::set<std::pair<std::uint32_t, std::uint64_t>> trying_;  // (epoch, index) being tried now
  std::deque<epoch_bad> by_epoch_;                            // the latest few epochs
  std::unordered_set<std::uint64_t> ever_;
  std::vector<std::string> listed_;
  std::atomic<std::uint64_t> replaced_{0};
};

pipeline_source::pipeline_source(std::shared_ptr<source> base, pipeline steps, pipeline_source_options options,
                                 const std::string& image_field)
    : pipeline_source(make_reader_from_source(std::move(base), image_field), std::move(steps), std::move(options)) {}

pipeline_source::pipeline_source(std::shared_ptr<image_reader> reader, pipeline steps, pipeline_source_options options)
    : reader_(std::move(reader)), options_(std::move(options)), steps_(steps),
      bad_(std::make_unique<detail::bad_samples>(options_.max_failed_paths)) {
  if (!reader_) throw pinfeed::invalid_argument("pipeline_source: reader is null");
  if (!(options_.max_bad_fraction >= 0.0 && options_.max_bad_fraction <= 1.0))
    throw pinfeed::invalid_argument("pipeline_source: max_bad_fraction must be in [0, 1], got " +
                                std::to_string(options_.max_bad_fraction));
  // A batch op: the last step, run on whole batches (finish_batch, after_copy); the steps before it
  // run on samples.
  const std::optional<batch_mix> mix = split_batch_op(steps);
  const image_spec in = reader_->image_shape();
  if (steps.empty() && !in.fixed())
    throw pinfeed::invalid_argument("pipeline_source: images of '" + reader_->name() +
                                "' vary in size: give a pipeline that ends in a fixed size (a crop)");
  if (!steps.empty()) (void)steps.output_spec(in);  // validates every step
  split_float_tail(steps, in);  // random_erasing after normalize: after the fused tail, on its CHW floats
  const auto tail = fused_tail(steps);
  if (!steps.device_tail().empty() && tail) {
    host_ = steps.host_part();
    (options_.device_tail ? consumer_tail_ : host_tail_) = tail;
  } else {
    host_ = steps;  // no tail, or one the fused op cannot express: every step on the host
  }
  const image_spec host_out = host_.empty() ? in : host_.output_spec(in);
  field_spec image{"image", host_out.type, {host_out.height, host_out.width, host_out.channels}};
  if (host_tail_) {
    if (host_out.channels != 3 || host_out.type != dtype::u8)
      throw pinfeed::invalid_argument("pipeline_source: the colour/scale tail needs uint8 RGB before it");
    image = {"image", dtype::f32, {3, host_out.height, host_out.width}};  // CHW, as the device op writes it
  }
  fields_.push_back(image);
  for (auto& f : reader_->extra_fields()) fields_.push_back(f);
  if (mix) plan_batch_op(*mix);
  choose_augment_path();  // (which resolves the decode path too, and where the tail runs)
  if ((batch_ || float_tail_) && consumer_tail_) {  // they take the tail's floats: it cannot be left to the consumer
    require_tail_input();
    const std::int64_t h = fields_[0].shape[0], w = fields_[0].shape[1];
    host_tail_ = consumer_tail_;
    consumer_tail_.reset();
    fields_[0] = field_spec{"image", dtype::f32, {3, h, w}};
  }
  // What the reader and the steps see: every field, the label as the reader writes it.
  reader_fields_ = fields_;
  if (batch_) reader_fields_[batch_->label_field] = field_spec{"label", batch_->label_type, {}};
  validate_fields(fields_);
}

std::string pipeline_source::name() const {
  std::string s = reader_->name() + " -> " + (host_.empty() ? std::string("(no host steps)") : host_.to_string());
  if (augmenter_) s += " -> on the device: " + augmenter_->steps().to_string();
  if (host_tail_) s += " -> fused tail (host, CHW float)";
  if (device_finish_) s += " -> fused tail (device, CHW float)";
  if (float_tail_) s += " -> " + float_tail_->steps().to_string();
  if (consumer_tail_) s += " -> tail on the consumer's device";
  return s;
}

pipeline_source::~pipeline_source() = default;

std::vector<std::string> pipeline_source::failed() const { return bad_->failed(); }
std::uint64_t pipeline_source::failures() const { return bad_->failures(); }
std::uint64_t pipeline_source::replaced() const noexcept { return bad_->replaced_count(); }

void pipeline_source::produce(sample& s) {
  // skip: the sample at sample::stand_in() serves instead, a pure function of (seed, epoch, index).
  const std::uint64_t n = reader_->size();
  const std::uint32_t epoch = s.epoch();
  const std::uint64_t epoch_size = s.order() ? s.order()->epoch_size() : n;
  stage_stats* const stats = s.stats();
  const bool skip = options_.on_error == error_policy::skip;
  const std::uint64_t tries = skip ? kStandInDraws + epoch_size + 1 : 1;
  for (std::uint64_t k = 0; k < tries; ++k) {
    const std::uint64_t index = k == 0 ? s.index() : s.stand_in(k, n);
    if (skip && !bad_->claim(epoch, index)) continue;  // known bad in this epoch: read once, never again
    try {
      // Isolated: a user source that waits inside TBB must not pick up another chunk on this thread
      // while it holds a claim, which that chunk's sample could then wait on forever.
      if (skip) oneapi::tbb::this_task_arena::isolate([&] { produce_one(s, index); });
      else produce_one(s, index);
      if (skip) bad_->finish(epoch, index, nullptr, stats);
      if (k > 0) {
        bad_->replaced();
        if (stats != nullptr) stats->add_replaced();
      }
      return;
    } catch (const sample_error& e) {
      if (!skip) throw;
      if (stats != nullptr) stats->add_error();
      const std::uint64_t bad = bad_->finish(epoch, index, &e, stats);
      const double cap = options_.max_bad_fraction;
      if (cap > 0.0 && static_cast<double>(bad) > cap * static_cast<double>(epoch_size))
        throw pinfeed::runtime_error(std::to_string(bad) + " of the epoch's " + std::to_string(epoch_size) +
                                 " samples are bad, more than max_bad_fraction " + std::to_string(cap) +
                                 " allows (the latest: " + e.what() + ")");
    } catch (...) {
      // Not a bad sample (out of memory, say): release the claim so no one waits on it, and fail.
      if (skip) bad_->finish(epoch, index, nullptr, stats);
      throw;
    }
  }
  throw sample_error(s.index(), "skip", "", "every one of the " + std::to_string(epoch_size) + " samples failed (epoch " +
                                               std::to_string(epoch) + ")");
}

decode_planner pipeline_source::planner(sample& s) const {
  // The first step may let the decoder shrink the image (JPEG DCT scaling) or decode only the window
  // it will use.
  return [this, &s](std::int64_t h, std::int64_t w) -> decode_plan {
    if (host_.empty()) return {};
    const auto& first = host_.steps().front();
    return {first->min_short_side(h, w, s.rng(100)), first->window(h, w, s.rng(100))};
  };
}

void pipeline_source::produce_one(sample& out, std::uint64_t index) {
  struct scratch {
    std::vector<std::byte> a, b, stored;
    std::vector<std::byte*> buffers;
    alignas(8) std::byte label[8];  ///< the reader's class index, where a batch op makes soft labels
  };
  // Per-thread scratch, a level a nesting (a pipeline_source read from runs inside); its TBB waits are isolated.
  const pinfeed::detail::scratch_level<scratch, struct pipeline_scratch> level;
  auto& t = level.get();
  // The stand-in sample keeps the output's buffers but reads index `index` with its own stream. A
  // batch op's reader writes its class index aside; the soft labels' row is its one-hot row.
  t.buffers.resize(fields_.size());
  for (std::size_t i = 0; i < fields_.size(); ++i)
    t.buffers[i] = batch_ && i == batch_->label_field ? t.label : fields_[i].variable ? nullptr : out.bytes(i).data();
  sample s(index, out.epoch(), out.seed(), reader_fields_, t.buffers, out.stats(), out.trace());
  s.share_place(out);  // readers that fetch ahead follow the epoch's order from here
  if (hybrid_) {  // the stored bytes first: packed for the device, else decoded here
    std::span<const std::byte> stored;
    {
      stage_timer timer(stage::read, s.stats(), s.trace(), index);
      try {
        stored = reader_->read_stored(s, t.stored);
      } catch (...) {
        rethrow_as_sample_error(index, "read", s.origin());
      }
    }
    out.set_origin(s.origin());
    const bool packed = [&] {
      stage_timer timer(stage::decode, s.stats(), s.trace(), index);
      return hybrid_->pack(s, stored, host_, decoding_);
    }();
    if (!packed) {
      host_decodes_->fetch_add(1, std::memory_order_relaxed);
      const read_result r = reader_->decode_stored(s, stored, t.a, planner(s));
      run_steps(s, image_view{const_cast<std::byte*>(r.data != nullptr ? r.data : t.a.data()), r.spec}, r.window_only, t.a, t.b);
    }
    if (batch_) write_soft_label(out, index, t.label, s.origin());
    return write_device_jobs(s);
  }
  if (reader_->stores_encoded()) host_decodes_->fetch_add(1, std::memory_order_relaxed);
  image_spec in;
  bool window_only = false;
  const std::byte* image = nullptr;
  {
    stage_timer timer(stage::read, s.stats(), s.trace(), index);
    try {
      const read_result r = reader_->read(s, t.a, planner(s));
      in = r.spec;
      window_only = r.window_only;
      image = r.data != nullptr ? r.data : t.a.data();
    } catch (...) {
      rethrow_as_sample_error(index, "read", s.origin());
    }
  }
  out.set_origin(s.origin());
  // A lent image is read in place and never written: run_steps writes only into its own buffers.
  run_steps(s, image_view{const_cast<std::byte*>(image), in}, window_only, t.a, t.b);
  if (batch_) write_soft_label(out, index, t.label, s.origin());
  write_device_jobs(s);
}

void pipeline_source::run_steps(sample& s, image_view cur, bool window_only, std::vector<std::byte>& a,
                                std::vector<std::byte>& b) {
  stage_timer timer(stage::transform, s.stats(), s.trace(), s.index());
  const auto& steps = host_.steps();
  std::byte* slot_image = s.bytes(pixel_field_).data();
  const auto same = [](const image_spec& x, const image_spec& y) {
    return x.height == y.height && x.width == y.width && x.channels == y.channels && x.type == y.type;
  };
  // A window's resize takes along the flip that follows it (drawn from the flip's own stream, as
  // the flip would draw it): one pass over the pixels, not two.
  std::optional<bool> flip_along;
  if (window_only && steps.size() >= 2) flip_along = steps[1]->mirrors(s.rng(101));
  const auto after = [&](std::size_t k) { return k == 0 && flip_along ? k + 2 : k + 1; };  // the next step run
  for (std::size_t k = 0; k < steps.size(); k = after(k)) {
    const std::size_t then = after(k);
    const bool last = then >= steps.size() && !host_tail_;
    try {
      // A reader that decoded only the first step's window leaves that step a resize.
      const bool resize_only = k == 0 && window_only;
      const image_spec next = resize_only ? steps[0]->output_spec({-1, -1, cur.spec.channels, cur.spec.type})
                                          : steps[k]->output_spec(cur.spec);
      // Where the step writes. In place when it can and the image is this sample's own (never a
      // cached image other samples read); straight into the slot when it is the last step, or
      // when the last step follows and will run in place there.
      const bool own = cur.data == a.data() || cur.data == b.data() || cur.data == slot_image;
      const bool in_place = !resize_only && steps[k]->in_place() && own && same(next, cur.spec) &&
                            (!last || cur.data == slot_image);
      const bool feeds_slot = !host_tail_ && then + 1 == steps.size() && steps[then]->in_place() &&
                              same(steps[then]->output_spec(next), next);
      std::vector<std::byte>& other = cur.data == a.data() ? b : a;
      std::byte* target = (last || feeds_slot) ? slot_image : in_place ? cur.data : nullptr;
      if (target == nullptr) {
        other.resize(next.bytes());
        target = other.data();
      }
      const image_view dst{target, next};
      if (resize_only && flip_along) detail::resize_window(cur, 0, 0, cur.spec.height, cur.spec.width, dst, *flip_along);
      else if (resize_only) resize_into(cur, dst);
      else steps[k]->apply(cur, dst, s.rng(100 + static_cast<std::uint32_t>(k)));
      cur = dst;
    } catch (...) {
      rethrow_as_sample_error(s.index(), "transform " + steps[k]->name(), s.origin());
    }
  }
  if (host_tail_) {
    const ops::image_batch_shape one{1, static_cast<std::size_t>(cur.spec.height), static_cast<std::size_t>(cur.spec.width)};
    ops::normalize_hwc_to_chw_host({cur.as<std::uint8_t>(), slot_image, one}, *host_tail_);
    if (float_tail_) {
      try {
        float_tail_->run_host(s, reinterpret_cast<float*>(slot_image));
      } catch (...) {
        rethrow_as_sample_error(s.index(), "transform " + float_tail_->steps().to_string(), s.origin());
      }
    }
  } else if (steps.empty()) {
    if (cur.spec.bytes() != fields_[pixel_field_].bytes())
      throw sample_error(s.index(), "read", s.origin(), "image size differs from the declared shape");
    std::memcpy(slot_image, cur.data, cur.spec.bytes());
  }
}

}  // namespace pinfeed::loaders
