#include "pinfeed/runtime/source.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>

namespace pinfeed {
namespace {

class callable_source final : public source {
 public:
  callable_source(std::uint64_t size, std::vector<field_spec> fields, std::function<void(sample&)> fn,
                   std::string name)
      : size_(size), fields_(std::move(fields)), fn_(std::move(fn)), name_(std::move(name)) {
    validate_fields(fields_);
    if (!fn_) throw std::invalid_argument("make_source: the produce function is empty");
  }
  std::uint64_t size() const override { return size_; }
  std::vector<field_spec> fields() const override { return fields_; }
  void produce(sample& s) override { fn_(s); }
  std::string name() const override { return name_; }

 private:
  std::uint64_t size_;
  std::vector<field_spec> fields_;
  std::function<void(sample&)> fn_;
  std::string name_;
};

class pooled_source final : public source {
 public:
  pooled_source(std::shared_ptr<source> base, std::size_t pool) : base_(std::move(base)) {
    if (!base_) throw std::invalid_argument("pooled source: the base source is null");
    if (pool == 0) throw std::invalid_argument("pooled source: the cache pool must be at least 1");
    fields_ = base_->fields();
    pool_ = static_cast<std::size_t>(std::min<std::uint64_t>(pool, std::max<std::uint64_t>(base_->size(), 1)));
    entries_.reset(new entry[pool_]);
  }
  std::uint64_t size() const override { return base_->size(); }
  std::vector<field_spec> fields() const override { return fields_; }
  std::string name() const override { return base_->name() + " (a pool of " + std::to_string(pool_) + " finished samples)"; }
  void produce(sample& s) override {
    const std::uint64_t p = s.index() % pool_;
    entry& e = entries_[p];
    std::call_once(e.filled, [&] {
      try {
        std::vector<std::byte*> buffers;
        for (const auto& f : fields_) {
          e.fields.emplace_back(f.bytes());
          buffers.push_back(e.fields.back().data());
        }
        sample first(p, s.epoch(), s.seed(), fields_, buffers, s.stats(), s.trace());
        base_->produce(first);
        e.origin = first.origin();
      } catch (...) {
        e.error = std::current_exception();
      }
    });
    if (e.error) std::rethrow_exception(e.error);
    if (!e.origin.empty()) s.set_origin(e.origin);
    for (std::size_t f = 0; f < fields_.size(); ++f) std::memcpy(s.bytes(f).data(), e.fields[f].data(), e.fields[f].size());
  }

 private:
  struct entry {
    std::once_flag filled;
    std::vector<std::vector<std::byte>> fields;
    std::string origin;
    std::exception_ptr error;
  };
  std::shared_ptr<source> base_;
  std::vector<field_spec> fields_;
  std::unique_ptr<entry[]> entries_;
  std::size_t pool_ = 1;
};

}  // namespace

std::shared_ptr<source> make_pooled_source(std::shared_ptr<source> base, std::size_t pool) {
  return std::make_shared<pooled_source>(std::move(base), pool);
}

std::shared_ptr<source> make_source(std::uint64_t size, std::vector<field_spec> fields,
                                    std::function<void(sample&)> produce, std::string name) {
  return std::make_shared<callable_source>(size, std::move(fields), std::move(produce), std::move(name));
}

}  // namespace pinfeed
