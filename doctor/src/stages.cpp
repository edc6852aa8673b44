#include "analysis.hpp"
#include "pinfeed/doctor/stages.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed {

namespace {
/// `parts` and `part` after them (a wrapper's memory(): its base's parts, then its own).
std::vector<memory_use> with_part(std::vector<memory_use> parts, memory_use part) {
  parts.push_back(std::move(part));
  return parts;
}

using loaders::decode_planner;
using loaders::image_spec;
using loaders::image_view;
using loaders::image_reader;
using loaders::read_result;

using analysis::figure;

std::string gib(std::size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f GiB (%zu bytes)", static_cast<double>(bytes) / 1073741824.0, bytes);
  return text;
}

/// `pool` entries standing in for a dataset of `dataset` samples (capped at its size): sample i is
/// served by entry i mod size(), made by make(entry, i mod size()) on first use. An entry whose
/// making threw keeps the error for every sample it serves.
///
/// The entries together may hold at most `max_bytes` (0: half of this process's memory in the node plan). A pool
/// that would need more fails up front where its entries' size is known (check_up_front), or at
/// the entry that passes the budget, with a fatal_error (never a bad sample) naming the pool, the
/// bytes and the budget, instead of running the machine out of memory.
template <class Entry>
class once_pool {
 public:
  struct slot {
    std::once_flag once;
    Entry entry;
    std::exception_ptr error;
  };
  once_pool(std::size_t pool, std::uint64_t dataset, const char* what, std::size_t max_bytes) : what_(what) {
    if (pool == 0) throw pinfeed::invalid_argument(std::string(what) + ": the cache pool must be at least 1");
    size_ = static_cast<std::size_t>(std::min<std::uint64_t>(pool, std::max<std::uint64_t>(dataset, 1)));
    if (max_bytes != 0) {
      budget_ = max_bytes;
      budget_text_ = gib(budget_) + ", its max_bytes";
    } else if (const node_plan& plan = this_node_plan_without_gpu(); plan.rank_memory != 0) {
      budget_ = static_cast<std::size_t>(plan.rank_memory / 2);
      budget_text_ = gib(budget_) + ", half of this process's " + gib(plan.rank_memory) + " (" + plan.memory_source + ")";
    }
    slots_.reset(new slot[size_]);
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }

  /// Fails now if every entry takes `entry_bytes` and all of them would pass the budget.
  void check_up_front(std::size_t entry_bytes) const {
    std::size_t need = 0;
    if (__builtin_mul_overflow(entry_bytes, size_, &need) || need > budget_)
      throw fatal_error(what_ + ": a pool of " + std::to_string(size_) + " entries of " + std::to_string(entry_bytes) +
                        " bytes needs " + (need >= entry_bytes ? gib(need) : std::string("more than 2^64 bytes")) +
                        ", over its budget of " + budget_text_ + "; lower the pool (--cache-pool, sample_cache::pool) "
                        "or cache a later, smaller stage");
  }

  /// The entry of sample `index`; make(entry, position) fills it on first use and returns the bytes
  /// it holds.
  template <class Make>
  slot& get(std::uint64_t index, Make&& make) {
    const std::uint64_t p = index % size_;
    slot& s = slots_[p];
    std::call_once(s.once, [&] {
      try {
        charge(make(s.entry, p));
      } catch (...) {
        s.entry = Entry{};
        s.error = std::current_exception();
      }
    });
    return s;
  }

 private:
  void charge(std::size_t bytes) {
    const std::size_t held = held_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const std::size_t made = made_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (held > budget_)
      throw fatal_error(what_ + ": the cache pool holds " + gib(held) + " after " + std::to_string(made) + " of its " +
                        std::to_string(size_) + " entries, over its budget of " + budget_text_ +
                        "; lower the pool (--cache-pool, sample_cache::pool) or cache a later, smaller stage");
  }

  std::string what_;
  std::size_t size_ = 1;
  std::size_t budget_ = SIZE_MAX;
  std::string budget_text_ = "unlimited";
  std::atomic<std::size_t> held_{0}, made_{0};
  std::unique_ptr<slot[]> slots_;
};

/// The error an entry's failure gives each sample it serves: the original, naming the sample.
[[noreturn]] void rethrow_for(const std::exception_ptr& error, std::uint64_t index, std::uint64_t entry) {
  try {
    std::rethrow_exception(error);
  } catch (const sample_error& e) {
    if (e.index() == index) throw;
    throw sample_error(index, e.stage(), e.path(),
                       e.message() + " (cached from sample " + std::to_string(e.index()) + ", pool entry " +
                           std::to_string(entry) + ")");
  }
}

class cached_reader final : public image_reader {
 public:
  cached_reader(std::shared_ptr<image_reader> base, cache_stage stage, std::size_t pool, loaders::pipeline before,
                std::size_t max_bytes)
      : base_(std::move(base)), before_(std::move(before)),
        entries_(pool, base_ ? base_->size() : 0, "cached reader", max_bytes) {
    if (!base_) throw pinfeed::invalid_argument("cached reader: the base reader is null");
    if (stage != cache_stage::raw && stage != cache_stage::decoded && stage != cache_stage::steps)
      throw pinfeed::invalid_argument("cached reader: the stage must be raw, decoded or steps");
    if (stage == cache_stage::steps) stage = cache_stage::decoded;  // then the steps in `before` run once
    if (!before_.empty() && stage != cache_stage::decoded)
      throw pinfeed::invalid_argument("cached reader: transforms before the cache need a cache of decoded images");
    raw_ = stage == cache_stage::raw && base_->stores_encoded();
    shape_ = base_->image_shape();
    for (const auto& t : before_.steps()) shape_ = t->output_spec(shape_);  // validates each step
    if (!raw_ && shape_.fixed()) entries_.check_up_front(shape_.bytes());
  }

  std::uint64_t size() const override { return base_->size(); }
  image_spec image_shape() const override { return shape_; }
  std::vector<field_spec> extra_fields() const override { return base_->extra_fields(); }
  std::string name() const override {
    return base_->name() + " (a pool of " + std::to_string(entries_.size()) + " cached " + cached_what() + ")";
  }
  [[nodiscard]] std::string cached_what() const {
    return raw_ ? "stored bytes" : before_.empty() ? "decoded images" : "images after " + before_.to_string();
  }
  bool stores_encoded() const override { return raw_; }
  loaders::decode_options decoding() const override { return base_->decoding(); }
  loaders::storage_kind storage() const override { return base_->storage(); }
  std::optional<loaders::remote_counters> fetch_counters() const override { return base_->fetch_counters(); }
  /// The base's, and the pool: its entries' bytes where their size is known (fixed images), else
  /// its budget (sample_cache::max_bytes, or half of the machine's memory).
  std::vector<memory_use> memory() const override { return with_part(base_->memory(), pool_memory()); }
  void limit_memory(std::uint64_t bytes) override { base_->limit_memory(bytes - std::min(bytes, pool_memory().bytes)); }
  [[nodiscard]] memory_use pool_memory() const {
    const bool known = !raw_ && shape_.fixed();
    return {"sample cache (a pool of " + std::to_string(entries_.size()) + " cached " + cached_what() +
                (known ? ")" : ", at most its max_bytes)"),
            known ? entries_.size() * shape_.bytes() : entries_.budget()};
  }

  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    const entry& e = filled(s);
    if (raw_) return base_->decode_stored(s, e.bytes, image, plan);  // storage skipped: decode as a read would
    read_result r;
    r.spec = e.spec;
    r.stored_bytes = e.stored_bytes;
    r.data = e.bytes.data();  // lent: the pipeline reads it in place and never writes to it
    return r;
  }
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) override {
    if (!raw_) return image_reader::read_stored(s, storage);
    return filled(s).bytes;
  }
  read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                            const decode_planner& plan) override {
    if (!raw_) return image_reader::decode_stored(s, bytes, image, plan);
    return base_->decode_stored(s, bytes, image, plan);
  }

 private:
  struct entry {
    std::vector<std::byte> bytes;                // stored bytes (raw), or the image
    image_spec spec;
    std::size_t stored_bytes = 0;
    std::vector<field_spec> specs;               // the sample's fields (the extras are served from them)
    std::vector<std::vector<std::byte>> fields;  // fields 1.. as the base reader wrote them
    std::string origin;
  };

  /// Entry s.index() mod pool, made on first use from that sample; its extra fields and origin
  /// are written into s.
  const entry& filled(sample& s) {
    auto& slot = entries_.get(s.index(), [&](entry& e, std::uint64_t p) {
      fill(e, p, s);
      std::size_t bytes = e.bytes.capacity();
      for (const auto& f : e.fields) bytes += f.capacity();
      return bytes;
    });
    if (slot.error) rethrow_for(slot.error, s.index(), s.index() % entries_.size());
    const entry& e = slot.entry;
    if (!e.origin.empty()) s.set_origin(e.origin);
    for (std::size_t f = 1; f < e.fields.size() && f < s.field_count(); ++f)
      if (!s.spec(f).variable && !s.spec(f).scratch && !s.spec(f).device_only)  // a reader writes none of them
        std::memcpy(s.bytes(f).data(), e.fields[f].data(), std::min(e.fields[f].size(), s.bytes(f).size()));
    return e;
  }

  void fill(entry& e, std::uint64_t p, const sample& like) {
    for (std::size_t f = 0; f < like.field_count(); ++f) e.specs.push_back(like.spec(f));
    e.fields.resize(e.specs.size());
    std::vector<std::byte*> buffers(e.specs.size(), nullptr);  // field 0 is the pipeline's: a reader never writes it
    for (std::size_t f = 1; f < e.specs.size(); ++f) {
      if (e.specs[f].variable || e.specs[f].scratch) continue;
      e.fields[f].resize(e.specs[f].bytes());
      buffers[f] = e.fields[f].data();
    }
    sample s(p, like.epoch(), like.seed(), e.specs, buffers, like.stats(), like.trace());
    if (raw_) {
      std::vector<std::byte> storage;
      const auto stored = base_->read_stored(s, storage);
      e.bytes.assign(stored.begin(), stored.end());
      e.stored_bytes = e.bytes.size();
      e.origin = s.origin();
      // Decoded once now, so an entry that cannot decode fails here, naming its file.
      std::vector<std::byte> trial;
      (void)base_->decode_stored(s, e.bytes, trial, {});
      return;
    }
    std::vector<std::byte> image, other;
    read_result r;
    try {
      r = base_->read(s, image, {});  // the full image: no plan, so every sample can take its own window
    } catch (...) {
      rethrow_as_sample_error(p, "read", s.origin());
    }
    image_view cur{r.data != nullptr ? const_cast<std::byte*>(r.data) : image.data(), r.spec};
    for (std::size_t k = 0; k < before_.steps().size(); ++k) {
      const auto& step = before_.steps()[k];
      try {
        const image_spec next = step->output_spec(cur.spec);
        std::vector<std::byte>& to = cur.data == image.data() ? other : image;
        to.resize(next.bytes());
        step->apply(cur, {to.data(), next}, s.rng(100 + static_cast<std::uint32_t>(k)));
        cur = {to.data(), next};
      } catch (...) {
        rethrow_as_sample_error(p, "transform " + step->name(), s.origin());
      }
    }
    e.spec = cur.spec;
    e.bytes.assign(cur.data, cur.data + cur.spec.bytes());
    e.stored_bytes = r.stored_bytes;
    e.origin = s.origin();
  }

  std::shared_ptr<image_reader> base_;
  loaders::pipeline before_;
  once_pool<entry> entries_;
  bool raw_ = false;
  image_spec shape_;
};

class pooled_source final : public source {
 public:
  pooled_source(std::shared_ptr<source> base, std::size_t pool, std::size_t max_bytes)
      : base_(std::move(base)), entries_(pool, base_ ? base_->size() : 0, "pooled source", max_bytes) {
    if (!base_) throw pinfeed::invalid_argument("pooled source: the base source is null");
    fields_ = base_->fields();
    for (const auto& f : fields_)
      if (f.variable)
        throw pinfeed::invalid_argument("pooled source: field '" + f.name + "' of '" + base_->name() +
                                        "' is variable-size; samples with such fields are not pooled");
    for (const auto& f : fields_) sample_bytes_ += f.device_only ? 0 : f.bytes();
    entries_.check_up_front(sample_bytes_);
  }
  std::uint64_t size() const override { return base_->size(); }
  std::vector<field_spec> fields() const override { return fields_; }
  std::string name() const override { return base_->name() + " (a pool of " + std::to_string(entries_.size()) + " finished samples)"; }
  std::vector<memory_use> memory() const override { return with_part(base_->memory(), pool_memory()); }
  void limit_memory(std::uint64_t bytes) override { base_->limit_memory(bytes - std::min(bytes, pool_memory().bytes)); }
  // The base's batch work runs on the pooled samples as on its own: its device steps after the
  // copy (from the jobs the pool kept), its batch op, and what it keeps on the device.
  std::vector<memory_use> device_memory(std::size_t batch_size) const override { return base_->device_memory(batch_size); }
  void on_loader(const device_choice& device) override { base_->on_loader(device); }
  void finish_batch(const slot_view& slot) override { base_->finish_batch(slot); }
  void before_copy(const slot_view& slot) override { base_->before_copy(slot); }
  void after_copy(const slot_view& slot) override { base_->after_copy(slot); }
  [[nodiscard]] memory_use pool_memory() const {
    return {"sample cache (a pool of " + std::to_string(entries_.size()) + " finished samples)", sample_bytes_ * entries_.size()};
  }
  void produce(sample& s) override {
    auto& slot = entries_.get(s.index(), [&](entry& e, std::uint64_t p) {
      std::vector<std::byte*> buffers;
      for (const auto& f : fields_) {  // a device_only field: made after the copy, nothing to keep
        e.fields.emplace_back(f.device_only ? 0 : f.bytes());
        buffers.push_back(f.device_only ? nullptr : e.fields.back().data());
      }
      sample first(p, s.epoch(), s.seed(), fields_, buffers, s.stats(), s.trace());
      base_->produce(first);
      e.origin = first.origin();
      std::size_t bytes = 0;
      for (const auto& f : e.fields) bytes += f.capacity();
      return bytes;
    });
    if (slot.error) std::rethrow_exception(slot.error);
    const entry& e = slot.entry;
    if (!e.origin.empty()) s.set_origin(e.origin);
    for (std::size_t f = 0; f < fields_.size(); ++f)
      if (!fields_[f].device_only) std::memcpy(s.bytes(f).data(), e.fields[f].data(), e.fields[f].size());
  }

 private:
  struct entry {
    std::vector<std::vector<std::byte>> fields;
    std::string origin;
  };
  std::shared_ptr<source> base_;
  once_pool<entry> entries_;
  std::vector<field_spec> fields_;
  std::size_t sample_bytes_ = 0;  // of one sample's fields
};

}  // namespace

std::shared_ptr<image_reader> make_cached_reader(std::shared_ptr<image_reader> base, cache_stage stage,
                                                 std::size_t pool, loaders::pipeline before, std::size_t max_bytes) {
  return std::make_shared<cached_reader>(std::move(base), stage, pool, std::move(before), max_bytes);
}

std::shared_ptr<source> make_pooled_source(std::shared_ptr<source> base, std::size_t pool, std::size_t max_bytes) {
  return std::make_shared<pooled_source>(std::move(base), pool, max_bytes);
}

cached_pipeline make_cached_pipeline(const std::shared_ptr<loaders::pipeline_source>& full, const sample_cache& cache) {
  if (!full) throw pinfeed::invalid_argument("cache: the pipeline is null");
  if (cache.pool == 0) throw pinfeed::invalid_argument("cache: the pool must be at least 1");
  // Decoding on the device: where a cache keeps encoded bytes, still there; where it keeps images
  // (decoded, after steps, finished samples), those are decoded once on the host.
  auto options = full->options();
  if (options.decode == loaders::decode_place::device || options.decode == loaders::decode_place::device_inexact)
    options.decode = loaders::decode_place::automatic;
  const auto over = [&](std::shared_ptr<image_reader> reader, loaders::pipeline steps) -> cached_pipeline {
    auto p = std::make_shared<loaders::pipeline_source>(std::move(reader), std::move(steps), options);
    return {p, p};
  };
  switch (cache.stage) {
    case cache_stage::none:
      return {full, full};
    case cache_stage::finished:
      if (full->decode_path() == loaders::decode_place::device || full->decode_path() == loaders::decode_place::device_inexact) {
        options.decode = loaders::decode_place::host;
        auto twin = std::make_shared<loaders::pipeline_source>(full->reader(), full->steps(), options);
        return {make_pooled_source(twin, cache.pool, cache.max_bytes), twin};
      }
      return {make_pooled_source(full, cache.pool, cache.max_bytes), full};
    case cache_stage::raw:
    case cache_stage::decoded:
      return over(make_cached_reader(full->reader(), cache.stage, cache.pool, {}, cache.max_bytes), full->steps());
    case cache_stage::steps: {
      // The host transforms are a prefix of the steps (the rest is a tail fused on the host or left
      // to the device): the first after_steps of them run once per pool entry, the rest per sample.
      const std::size_t host = full->host_steps().steps().size();
      if (cache.after_steps > host)
        throw pinfeed::invalid_argument("cache after " + std::to_string(cache.after_steps) +
                                    " steps, but the host pipeline has " + std::to_string(host));
      const auto& all = full->steps().steps();
      const auto cut = all.begin() + static_cast<std::ptrdiff_t>(cache.after_steps);
      loaders::pipeline before(std::vector<std::shared_ptr<loaders::transform>>(all.begin(), cut));
      loaders::pipeline rest(std::vector<std::shared_ptr<loaders::transform>>(cut, all.end()));
      return over(make_cached_reader(full->reader(), cache_stage::decoded, cache.pool, std::move(before), cache.max_bytes),
                  std::move(rest));
    }
  }
  throw pinfeed::invalid_argument("cache: unknown stage");
}

std::function<void(std::size_t, cudaStream_t)> throttle_copy(double mb_s) {
  if (!(mb_s > 0.0) || !std::isfinite(mb_s))
    throw pinfeed::invalid_argument("copy throttle: the link rate must be a finite number of MB/s > 0, got " + figure(mb_s));
  return [mb_s](std::size_t bytes, cudaStream_t copy_stream) {
    busy_kernel_ms(static_cast<double>(bytes) / (mb_s * 1e3), copy_stream);
  };
}

void busy_wait_ms(double ms) noexcept {
  if (!(ms > 0)) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double, std::milli>(ms));
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace pinfeed
