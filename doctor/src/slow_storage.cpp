// Emulated slow storage (make_slow_storage): a reader's reads, delayed as a link of the given latency
// and bandwidth would delay them.
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>

#include "analysis.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed {

namespace {

using loaders::decode_planner;
using loaders::image_reader;
using loaders::image_spec;
using loaders::read_result;

using analysis::figure;

class slow_storage_reader final : public image_reader {
 public:
  slow_storage_reader(std::shared_ptr<image_reader> base, storage_emulation e) : base_(std::move(base)), e_(e) {
    if (!base_) throw pinfeed::invalid_argument("slow storage: the base reader is null");
    if (!(e_.latency_ms >= 0.0) || !std::isfinite(e_.latency_ms))
      throw pinfeed::invalid_argument("slow storage: latency_ms must be a finite number >= 0, got " + figure(e_.latency_ms));
    if (!(e_.bandwidth_mb_s >= 0.0) || !std::isfinite(e_.bandwidth_mb_s))
      throw pinfeed::invalid_argument("slow storage: bandwidth_mb_s must be a finite number >= 0 (0: unlimited), got " +
                                  figure(e_.bandwidth_mb_s));
  }
  std::uint64_t size() const override { return base_->size(); }
  image_spec image_shape() const override { return base_->image_shape(); }
  std::vector<field_spec> extra_fields() const override { return base_->extra_fields(); }
  std::string name() const override {
    return base_->name() + " (storage emulated: " + figure(e_.latency_ms) + " ms, " +
           (e_.bandwidth_mb_s > 0 ? figure(e_.bandwidth_mb_s) + " MB/s" : std::string("unlimited")) + ")";
  }
  bool stores_encoded() const override { return base_->stores_encoded(); }
  loaders::decode_options decoding() const override { return base_->decoding(); }
  // The same data, only slower: the same identity and storage groups.
  std::string identity() const override { return base_->identity(); }
  std::shared_ptr<const sample_groups> groups() const override { return base_->groups(); }
  loaders::storage_kind storage() const override { return base_->storage(); }
  std::optional<loaders::remote_counters> fetch_counters() const override { return base_->fetch_counters(); }
  std::shared_ptr<image_reader> with_remote(const loaders::remote_change& change) const override {
    auto remade = base_->with_remote(change);
    return remade ? std::make_shared<slow_storage_reader>(std::move(remade), e_) : nullptr;
  }
  std::vector<memory_use> memory() const override { return base_->memory(); }
  void limit_memory(std::uint64_t bytes) override { base_->limit_memory(bytes); }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    const read_result r = base_->read(s, image, plan);
    wait(r.stored_bytes);
    return r;
  }
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) override {
    const auto bytes = base_->read_stored(s, storage);
    wait(bytes.size());
    return bytes;
  }
  read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                            const decode_planner& plan) override {
    return base_->decode_stored(s, bytes, image, plan);
  }

 private:
  void wait(std::size_t bytes) {
    using clock = std::chrono::steady_clock;
    auto until = clock::now() + std::chrono::duration_cast<clock::duration>(
                                    std::chrono::duration<double, std::milli>(e_.latency_ms));
    if (e_.bandwidth_mb_s > 0.0) {
      const auto hold = std::chrono::duration_cast<clock::duration>(
          std::chrono::duration<double>(static_cast<double>(bytes) / (e_.bandwidth_mb_s * 1e6)));
      std::lock_guard lock(link_mutex_);
      const auto start = std::max(link_free_, clock::now());
      link_free_ = start + hold;
      until = std::max(until, link_free_);
    }
    std::this_thread::sleep_until(until);
  }

  std::shared_ptr<image_reader> base_;
  storage_emulation e_;
  std::mutex link_mutex_;
  std::chrono::steady_clock::time_point link_free_{};
};

}  // namespace

std::shared_ptr<image_reader> make_slow_storage(std::shared_ptr<image_reader> base, storage_emulation storage) {
  return std::make_shared<slow_storage_reader>(std::move(base), storage);
}

}  // namespace pinfeed
