#include "pinfeed/loaders/synthetic.hpp"

#include <stdexcept>
#include <string>

#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::loaders {
namespace {

class synthetic_source final : public source {
 public:
  explicit synthetic_source(const synthetic_options& o) : o_(o) {
    auto positive = [](std::int64_t v, const char* what) {
      if (v <= 0) throw pinfeed::invalid_argument(std::string("synthetic source: ") + what + " must be positive, got " +
                                              std::to_string(v));
    };
    positive(static_cast<std::int64_t>(o.samples), "samples");
    positive(o.height, "height");
    positive(o.width, "width");
    positive(o.classes, "classes");
    if (o.classes >= (std::int64_t{1} << 32)) throw pinfeed::invalid_argument("synthetic source: classes must be < 2^32");
  }
  std::uint64_t size() const override { return o_.samples; }
  std::vector<field_spec> fields() const override {
    return {{"image", dtype::u8, {o_.height, o_.width, 3}}, {"label", dtype::i64, {}}};
  }
  void produce(sample& s) override {
    fill_random_bytes(s.rng(0), s.bytes(0));
    s.as<std::int64_t>(1)[0] = s.rng(1).below(static_cast<std::uint32_t>(o_.classes));
  }
  std::string name() const override {
    return "synthetic " + std::to_string(o_.height) + "x" + std::to_string(o_.width) + "x3";
  }

 private:
  synthetic_options o_;
};

}  // namespace

std::shared_ptr<source> make_synthetic_source(const synthetic_options& options) {
  return std::make_shared<synthetic_source>(options);
}

}  // namespace pinfeed::loaders
