#include "pinfeed/runtime/source.hpp"

#include <algorithm>
#include <stdexcept>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {

void sample::variable_field(std::size_t i) const {
  throw pinfeed::invalid_argument("field '" + specs_[i].name + "' is variable-size: claim() its bytes (sample " +
                                  std::to_string(index_) + ")");
}

const detail::field_arena& sample::arena(std::size_t i) const {
  if (!specs_[checked(i)].variable)
    throw pinfeed::invalid_argument("field '" + specs_[i].name + "' is not variable-size: write its bytes() (sample " +
                                    std::to_string(index_) + ")");
  if (arenas_ == nullptr || arenas_[i].data == nullptr)
    throw pinfeed::logic_error("sample " + std::to_string(index_) + ": variable-size field '" + specs_[i].name +
                           "' has no arena here (a sample made outside a loader)");
  return arenas_[i];
}

std::span<std::byte> sample::claim(std::size_t i, std::size_t n) {
  const detail::field_arena& a = arena(i);
  std::uint64_t* extent = a.extents + 2 * slot_position_;
  extent[0] = extent[1] = 0;
  if (n == 0 || n > static_cast<std::uint64_t>(specs_[i].shape[0])) return {};
  // A claim that does not fit takes nothing: the arena's claims stay one after another, no gap.
  std::uint64_t first = a.used->load(std::memory_order_relaxed);
  do {
    if (first > a.capacity || n > a.capacity - first) return {};
  } while (!a.used->compare_exchange_weak(first, first + n, std::memory_order_relaxed));
  extent[0] = first;
  extent[1] = n;
  const std::size_t size = dtype_size(specs_[i].type);
  return {a.data + first * size, n * size};
}

std::uint64_t sample::room(std::size_t i) const {
  const detail::field_arena& a = arena(i);
  const std::uint64_t used = a.used->load(std::memory_order_relaxed);
  return std::min<std::uint64_t>(used >= a.capacity ? 0 : a.capacity - used, static_cast<std::uint64_t>(specs_[i].shape[0]));
}

std::pair<std::uint64_t, std::uint64_t> sample::claimed(std::size_t i) const {
  const detail::field_arena& a = arena(i);
  return {a.extents[2 * slot_position_], a.extents[2 * slot_position_ + 1]};
}

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
