#include "pinfeed/runtime/source.hpp"

#include <stdexcept>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {
namespace {

class callable_source final : public source {
 public:
  callable_source(std::uint64_t size, std::vector<field_spec> fields, std::function<void(sample&)> fn,
                   std::string name)
      : size_(size), fields_(std::move(fields)), fn_(std::move(fn)), name_(std::move(name)) {
    validate_fields(fields_);
    if (!fn_) throw pinfeed::invalid_argument("make_source: the produce function is empty");
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

}  // namespace

std::shared_ptr<source> make_source(std::uint64_t size, std::vector<field_spec> fields,
                                    std::function<void(sample&)> produce, std::string name) {
  return std::make_shared<callable_source>(size, std::move(fields), std::move(produce), std::move(name));
}

}  // namespace pinfeed
