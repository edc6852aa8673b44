// The augmentation policies: trivial_augment (TrivialAugmentWide), rand_augment (RandAugment),
// auto_augment (AutoAugment's ImageNet, CIFAR-10 and SVHN policies) and a trainer's own
// (make_augment_policy): torchvision v2's op sets, tables and draws (pinfeed/ops/policies.hpp),
// each draw from the sample's own stream.
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>

#include "common.hpp"
#include "kinds.hpp"
#include "pinfeed/ops/policies.hpp"

namespace pinfeed::loaders {
using namespace detail;
using ops::aug_op;
namespace {

struct aa_step {
  aug_op op;
  float probability;
  int bin;  // -1: the op takes no magnitude
};
using aa_pair = std::array<aa_step, 2>;

constexpr aug_op kPosterize = aug_op::posterize, kRotate = aug_op::rotate, kSolarize = aug_op::solarize,
                 kAutoContrast = aug_op::autocontrast, kEqualize = aug_op::equalize, kColor = aug_op::saturation,
                 kInvert = aug_op::invert, kContrast = aug_op::contrast, kSharpness = aug_op::sharpness,
                 kShearX = aug_op::shear_x, kShearY = aug_op::shear_y, kTranslateX = aug_op::translate_x,
                 kTranslateY = aug_op::translate_y, kBrightness = aug_op::brightness;

// torchvision's AutoAugment policies, in its order (tests/loaders/policies_test.cpp checks them
// against torchvision's own lists).
const std::array<aa_pair, 25> kImageNet{{
    {{{kPosterize, 0.4f, 8}, {kRotate, 0.6f, 9}}}, {{{kSolarize, 0.6f, 5}, {kAutoContrast, 0.6f, -1}}},
    {{{kEqualize, 0.8f, -1}, {kEqualize, 0.6f, -1}}}, {{{kPosterize, 0.6f, 7}, {kPosterize, 0.6f, 6}}},
    {{{kEqualize, 0.4f, -1}, {kSolarize, 0.2f, 4}}}, {{{kEqualize, 0.4f, -1}, {kRotate, 0.8f, 8}}},
    {{{kSolarize, 0.6f, 3}, {kEqualize, 0.6f, -1}}}, {{{kPosterize, 0.8f, 5}, {kEqualize, 1.0f, -1}}},
    {{{kRotate, 0.2f, 3}, {kSolarize, 0.6f, 8}}}, {{{kEqualize, 0.6f, -1}, {kPosterize, 0.4f, 6}}},
    {{{kRotate, 0.8f, 8}, {kColor, 0.4f, 0}}}, {{{kRotate, 0.4f, 9}, {kEqualize, 0.6f, -1}}},
    {{{kEqualize, 0.0f, -1}, {kEqualize, 0.8f, -1}}}, {{{kInvert, 0.6f, -1}, {kEqualize, 1.0f, -1}}},
    {{{kColor, 0.6f, 4}, {kContrast, 1.0f, 8}}}, {{{kRotate, 0.8f, 8}, {kColor, 1.0f, 2}}},
    {{{kColor, 0.8f, 8}, {kSolarize, 0.8f, 7}}}, {{{kSharpness, 0.4f, 7}, {kInvert, 0.6f, -1}}},
    {{{kShearX, 0.6f, 5}, {kEqualize, 1.0f, -1}}}, {{{kColor, 0.4f, 0}, {kEqualize, 0.6f, -1}}},
    {{{kEqualize, 0.4f, -1}, {kSolarize, 0.2f, 4}}}, {{{kSolarize, 0.6f, 5}, {kAutoContrast, 0.6f, -1}}},
    {{{kInvert, 0.6f, -1}, {kEqualize, 1.0f, -1}}}, {{{kColor, 0.6f, 4}, {kContrast, 1.0f, 8}}},
    {{{kEqualize, 0.8f, -1}, {kEqualize, 0.6f, -1}}},
}};
const std::array<aa_pair, 25> kCifar10{{
    {{{kInvert, 0.1f, -1}, {kContrast, 0.2f, 6}}}, {{{kRotate, 0.7f, 2}, {kTranslateX, 0.3f, 9}}},
    {{{kSharpness, 0.8f, 1}, {kSharpness, 0.9f, 3}}}, {{{kShearY, 0.5f, 8}, {kTranslateY, 0.7f, 9}}},
    {{{kAutoContrast, 0.5f, -1}, {kEqualize, 0.9f, -1}}}, {{{kShearY, 0.2f, 7}, {kPosterize, 0.3f, 7}}},
    {{{kColor, 0.4f, 3}, {kBrightness, 0.6f, 7}}}, {{{kSharpness, 0.3f, 9}, {kBrightness, 0.7f, 9}}},
    {{{kEqualize, 0.6f, -1}, {kEqualize, 0.5f, -1}}}, {{{kContrast, 0.6f, 7}, {kSharpness, 0.6f, 5}}},
    {{{kColor, 0.7f, 7}, {kTranslateX, 0.5f, 8}}}, {{{kEqualize, 0.3f, -1}, {kAutoContrast, 0.4f, -1}}},
    {{{kTranslateY, 0.4f, 3}, {kSharpness, 0.2f, 6}}}, {{{kBrightness, 0.9f, 6}, {kColor, 0.2f, 8}}},
    {{{kSolarize, 0.5f, 2}, {kInvert, 0.0f, -1}}}, {{{kEqualize, 0.2f, -1}, {kAutoContrast, 0.6f, -1}}},
    {{{kEqualize, 0.2f, -1}, {kEqualize, 0.6f, -1}}}, {{{kColor, 0.9f, 9}, {kEqualize, 0.6f, -1}}},
    {{{kAutoContrast, 0.8f, -1}, {kSolarize, 0.2f, 8}}}, {{{kBrightness, 0.1f, 3}, {kColor, 0.7f, 0}}},
    {{{kSolarize, 0.4f, 5}, {kAutoContrast, 0.9f, -1}}}, {{{kTranslateY, 0.9f, 9}, {kTranslateY, 0.7f, 9}}},
    {{{kAutoContrast, 0.9f, -1}, {kSolarize, 0.8f, 3}}}, {{{kEqualize, 0.8f, -1}, {kInvert, 0.1f, -1}}},
    {{{kTranslateY, 0.7f, 9}, {kAutoContrast, 0.9f, -1}}},
}};
const std::array<aa_pair, 25> kSvhn{{
    {{{kShearX, 0.9f, 4}, {kInvert, 0.2f, -1}}}, {{{kShearY, 0.9f, 8}, {kInvert, 0.7f, -1}}},
    {{{kEqualize, 0.6f, -1}, {kSolarize, 0.6f, 6}}}, {{{kInvert, 0.9f, -1}, {kEqualize, 0.6f, -1}}},
    {{{kEqualize, 0.6f, -1}, {kRotate, 0.9f, 3}}}, {{{kShearX, 0.9f, 4}, {kAutoContrast, 0.8f, -1}}},
    {{{kShearY, 0.9f, 8}, {kInvert, 0.4f, -1}}}, {{{kShearY, 0.9f, 5}, {kSolarize, 0.2f, 6}}},
    {{{kInvert, 0.9f, -1}, {kAutoContrast, 0.8f, -1}}}, {{{kEqualize, 0.6f, -1}, {kRotate, 0.9f, 3}}},
    {{{kShearX, 0.9f, 4}, {kSolarize, 0.3f, 3}}}, {{{kShearY, 0.8f, 8}, {kInvert, 0.7f, -1}}},
    {{{kEqualize, 0.9f, -1}, {kTranslateY, 0.6f, 6}}}, {{{kInvert, 0.9f, -1}, {kEqualize, 0.6f, -1}}},
    {{{kContrast, 0.3f, 3}, {kRotate, 0.8f, 4}}}, {{{kInvert, 0.8f, -1}, {kTranslateY, 0.0f, 2}}},
    {{{kShearY, 0.7f, 6}, {kSolarize, 0.4f, 8}}}, {{{kInvert, 0.6f, -1}, {kRotate, 0.8f, 4}}},
    {{{kShearY, 0.3f, 7}, {kTranslateX, 0.9f, 3}}}, {{{kShearX, 0.1f, 6}, {kInvert, 0.6f, -1}}},
    {{{kSolarize, 0.7f, 2}, {kTranslateY, 0.6f, 7}}}, {{{kShearY, 0.8f, 4}, {kInvert, 0.8f, -1}}},
    {{{kShearX, 0.7f, 9}, {kTranslateY, 0.8f, 3}}}, {{{kShearY, 0.8f, 5}, {kAutoContrast, 0.7f, -1}}},
    {{{kShearX, 0.7f, 2}, {kInvert, 0.1f, -1}}},
}};

const char* const kAutoAugmentNames[] = {"imagenet", "cifar10", "svhn"};

/// TrivialAugmentWide's and RandAugment's 14 ops, in torchvision's order.
std::vector<aug_op> wide_ops() {
  return {aug_op::identity,   aug_op::shear_x,    aug_op::shear_y,  aug_op::translate_x, aug_op::translate_y,
          aug_op::rotate,     aug_op::brightness, aug_op::saturation, aug_op::contrast,  aug_op::sharpness,
          aug_op::posterize,  aug_op::solarize,   aug_op::autocontrast, aug_op::equalize};
}

/// A policy: one of four shapes that share the drawing and the applying.
class policy_transform final : public augment_policy {
 public:
  policy_transform(std::string name, std::string args, std::vector<policy_op> ops, int num_ops, int bins, int fixed_bin,
                   const std::array<aa_pair, 25>* subs, ops::interpolation mode, std::optional<double> fill)
      : name_(std::move(name)), args_(std::move(args)), ops_(std::move(ops)), num_ops_(num_ops), bins_(bins), fixed_bin_(fixed_bin), subs_(subs),
        mode_(mode), fill_(fill) {}

  std::string name() const override {
    std::string opts;
    if (mode_ == ops::interpolation::bilinear) opts += ",interpolation=bilinear";
    if (fill_) opts += ",fill=" + format_number(*fill_);
    if (args_.empty() && opts.empty()) return name_;
    return name_ + "(" + (args_.empty() ? opts.substr(1) : args_ + opts) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_grey_or_rgb(*this, in);
    return in;
  }

  std::vector<augment_choice> choices(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    std::vector<augment_choice> out;
    const auto draw_magnitude = [&](const ops::magnitude_table& table, bool sign, int bins, int bin) -> augment_choice {
      augment_choice c{aug_op::identity, -1, 0.0};
      if (table.type == ops::magnitude_table::kind::none) return c;
      c.bin = bin >= 0 ? bin : static_cast<int>(rng.below(static_cast<std::uint32_t>(bins)));
      c.magnitude = static_cast<double>(table.at(bins, c.bin, height, width));
      if (sign && rng.uniform() <= 0.5f) c.magnitude = -c.magnitude;
      return c;
    };
    if (subs_ != nullptr) {
      const aa_pair& sub = (*subs_)[rng.below(static_cast<std::uint32_t>(subs_->size()))];
      for (const aa_step& step : sub) {
        if (!(rng.uniform() <= step.probability)) continue;
        const ops::magnitude_table table = ops::policy_table(ops::policy_family::auto_augment, step.op);
        augment_choice c = draw_magnitude(table, ops::aug_op_signed(step.op), 10, step.bin);
        c.op = step.op;
        out.push_back(c);
      }
      return out;
    }
    for (int k = 0; k < num_ops_; ++k) {
      const policy_op& op = ops_[rng.below(static_cast<std::uint32_t>(ops_.size()))];
      augment_choice c = draw_magnitude(op.table, op.signed_magnitude, bins_, fixed_bin_);
      c.op = op.op;
      out.push_back(c);
    }
    return out;
  }

  std::string explain(const image_spec& in, philox_stream rng) const override {
    std::string out;
    for (const auto& c : choices(in.height, in.width, rng)) {
      const std::string step = spelled(c);
      if (!step.empty()) out += (out.empty() ? "" : ",") + step;
    }
    return out;
  }
  int device_rounds() const override { return subs_ != nullptr ? 2 : num_ops_; }
  std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const override {
    if (in.type != dtype::u8) return std::nullopt;
    std::vector<ops::aug_job> jobs;
    for (const auto& c : choices(in.height, in.width, rng))
      if (c.op != aug_op::identity)
        jobs.push_back(ops::aug_job_for(c.op, c.magnitude, static_cast<std::uint32_t>(in.height),
                                        static_cast<std::uint32_t>(in.width), static_cast<int>(in.channels), mode_, fill_));
    return jobs;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const int c = in.spec.channels;
    const auto bytes = static_cast<std::size_t>(h * w * c);
    const auto picked = choices(h, w, rng);
    if (picked.empty()) {
      std::memcpy(out.data, in.data, bytes);
      return;
    }
    // Each op from one buffer into the other, the last into `out`; a worker's scratch, grown once.
    thread_local std::vector<std::uint8_t> scratch;
    if (scratch.size() < bytes) scratch.resize(bytes);
    const std::uint8_t* src = in.as<std::uint8_t>();
    for (std::size_t k = 0; k < picked.size(); ++k) {
      // Out and scratch in turn, so that the last op writes to `out` (no op runs in place).
      std::uint8_t* dst = ((picked.size() - k) % 2 == 1) ? out.as<std::uint8_t>() : scratch.data();
      ops::apply_aug_op_u8(picked[k].op, picked[k].magnitude, src, h, w, c, mode_, fill_, dst);
      src = dst;
    }
  }

 private:
  /// A choice as the deterministic step that gives its pixels ("" for identity).
  std::string spelled(const augment_choice& c) const {
    const double m = c.magnitude;
    std::string opts;
    if (fill_) opts += "," + format_number(*fill_);
    if (mode_ == ops::interpolation::bilinear) opts += ",interpolation=bilinear";
    switch (c.op) {
      case aug_op::identity: return "";
      case aug_op::shear_x:
      case aug_op::shear_y:
      case aug_op::translate_x:
      case aug_op::translate_y:
      case aug_op::rotate: return std::string(ops::aug_op_name(c.op)) + "(" + format_double(m) + opts + ")";
      case aug_op::brightness:
      case aug_op::saturation:
      case aug_op::contrast:
      case aug_op::sharpness: return std::string(ops::aug_op_name(c.op)) + "(" + format_double(1.0 + m) + ")";
      case aug_op::posterize: return "posterize(" + std::to_string(static_cast<int>(m)) + ")";
      case aug_op::solarize: return "solarize(" + format_double(255.0 * m) + ")";
      default: return ops::aug_op_name(c.op);
    }
  }

  std::string name_, args_;  // "rand_augment", "2,9,31"
  std::vector<policy_op> ops_;
  int num_ops_ = 1, bins_ = 31, fixed_bin_ = -1;
  const std::array<aa_pair, 25>* subs_ = nullptr;
  ops::interpolation mode_;
  std::optional<double> fill_;
};

std::vector<policy_op> family_ops(ops::policy_family family) {
  std::vector<policy_op> out;
  for (const aug_op op : wide_ops()) out.push_back({op, ops::policy_table(family, op), ops::aug_op_signed(op)});
  return out;
}

void check_fill(std::optional<double> fill, std::size_t index, const char* what) {
  if (fill && !(*fill >= 0.0 && *fill <= 255.0))
    throw bad_transform_argument(index, std::string(what) + ": the fill must be in [0, 255], got " + format_number(*fill));
}

}  // namespace

std::shared_ptr<augment_policy> make_augment_policy(std::vector<policy_op> policy_ops, int num_ops, int bins, int fixed_bin,
                                                    ops::interpolation mode, std::optional<double> fill) {
  if (policy_ops.empty()) throw bad_transform_argument(0, "augment policy: no ops");
  if (num_ops < 0 || num_ops > 64) throw bad_transform_argument(1, "augment policy: ops a sample from 0 to 64, got " + std::to_string(num_ops));
  if (bins < 1 || bins > 1000000) throw bad_transform_argument(2, "augment policy: bins from 1 to 1000000, got " + std::to_string(bins));
  if (fixed_bin >= bins) throw bad_transform_argument(3, "augment policy: the magnitude bin " + std::to_string(fixed_bin) + " is not below " + std::to_string(bins));
  check_fill(fill, 4, "augment policy");
  std::string args;
  for (const auto& op : policy_ops) args += std::string(args.empty() ? "" : " ") + ops::aug_op_name(op.op);
  for (const int v : {num_ops, bins, fixed_bin})
    if (v >= 0) args.append(",").append(std::to_string(v));
  return std::make_shared<policy_transform>("augment_policy", std::move(args), std::move(policy_ops), num_ops, bins, fixed_bin, nullptr, mode, fill);
}

std::shared_ptr<augment_policy> make_trivial_augment(int bins, ops::interpolation mode, std::optional<double> fill) {
  if (bins < 2 || bins > 1000000) throw bad_transform_argument(0, "trivial_augment: bins from 2 to 1000000, got " + std::to_string(bins));
  check_fill(fill, 1, "trivial_augment");
  return std::make_shared<policy_transform>("trivial_augment", bins == 31 ? "" : std::to_string(bins),
                                            family_ops(ops::policy_family::trivial_augment_wide), 1, bins, -1, nullptr, mode, fill);
}

std::shared_ptr<augment_policy> make_rand_augment(int num_ops, int magnitude, int bins, ops::interpolation mode,
                                                  std::optional<double> fill) {
  if (num_ops < 0 || num_ops > 64) throw bad_transform_argument(0, "rand_augment: ops a sample from 0 to 64, got " + std::to_string(num_ops));
  if (bins < 2 || bins > 1000000) throw bad_transform_argument(2, "rand_augment: bins from 2 to 1000000, got " + std::to_string(bins));
  if (magnitude < 0 || magnitude >= bins)
    throw bad_transform_argument(1, "rand_augment: the magnitude must be a bin from 0 to " + std::to_string(bins - 1) + ", got " + std::to_string(magnitude));
  check_fill(fill, 3, "rand_augment");
  return std::make_shared<policy_transform>(
      "rand_augment", std::to_string(num_ops) + "," + std::to_string(magnitude) + "," + std::to_string(bins),
      family_ops(ops::policy_family::rand_augment), num_ops, bins, magnitude, nullptr, mode, fill);
}

namespace {
/// A policy's number (the enum's value, or the parser's index of the word): 0, 1 or 2.
void check_policy(double p, const char* what) {
  if (!(p == 0.0 || p == 1.0 || p == 2.0))
    throw bad_transform_argument(0, std::string(what) + ": the policy must be imagenet, cifar10 or svhn, got " + format_number(p));
}
}  // namespace

std::shared_ptr<augment_policy> make_auto_augment(auto_augment_policy policy, ops::interpolation mode, std::optional<double> fill) {
  check_policy(static_cast<int>(policy), "auto_augment");
  check_fill(fill, 1, "auto_augment");
  const auto* subs = policy == auto_augment_policy::imagenet ? &kImageNet : policy == auto_augment_policy::cifar10 ? &kCifar10 : &kSvhn;
  return std::make_shared<policy_transform>("auto_augment", kAutoAugmentNames[static_cast<int>(policy)],
                                            std::vector<policy_op>{}, 0, 10, -1, subs, mode, fill);
}

std::vector<std::array<std::tuple<ops::aug_op, float, int>, 2>> auto_augment_subpolicies(auto_augment_policy policy) {
  check_policy(static_cast<int>(policy), "auto_augment_subpolicies");
  const auto& subs = policy == auto_augment_policy::imagenet ? kImageNet : policy == auto_augment_policy::cifar10 ? kCifar10 : kSvhn;
  std::vector<std::array<std::tuple<ops::aug_op, float, int>, 2>> out;
  for (const aa_pair& p : subs) out.push_back({{{p[0].op, p[0].probability, p[0].bin}, {p[1].op, p[1].probability, p[1].bin}}});
  return out;
}

void add_policy_kinds(std::vector<transform_kind>& kinds) {
  const std::vector<transform_option> options{{"interpolation", {"nearest", "bilinear"}, 0.0},
                                              {"fill", {}, std::numeric_limits<double>::quiet_NaN()}};
  // The options' values, last in `a`: interpolation, then fill (NaN: none).
  const auto mode_of = [](std::span<const double> a) {
    return a[a.size() - 2] == 0.0 ? ops::interpolation::nearest : ops::interpolation::bilinear;
  };
  const auto fill_of = [](std::span<const double> a) -> std::optional<double> {
    return std::isnan(a.back()) ? std::nullopt : std::optional<double>(a.back());
  };
  const auto whole = [](double v, std::size_t index, const char* what) {
    if (v != std::floor(v) || !(std::abs(v) < 2e9))
      throw bad_transform_argument(index, std::string(what) + " must be a whole number, got " + format_number(v));
    return static_cast<int>(v);
  };
  kinds.push_back({{"trivial_augment"}, 0, 1, "trivial_augment[(BINS)][, interpolation=nearest|bilinear, fill=F]",
                   [=](std::span<const double> a) -> std::shared_ptr<transform> {
                     const int bins = a.size() > 2 ? whole(a[0], 0, "trivial_augment: bins") : 31;
                     try {
                       return make_trivial_augment(bins, mode_of(a), fill_of(a));
                     } catch (const bad_transform_argument& e) {
                       throw bad_transform_argument(e.index() == 0 ? 0 : a.size() - 1, e.what());
                     }
                   },
                   options});
  kinds.push_back({{"rand_augment"}, 0, 3, "rand_augment[(N, M[, BINS])][, interpolation=nearest|bilinear, fill=F]",
                   [=](std::span<const double> a) -> std::shared_ptr<transform> {
                     const std::size_t given = a.size() - 2;
                     if (given == 1) throw bad_transform_argument(0, "rand_augment: N and M (and BINS), or none of them");
                     const int n = given > 0 ? whole(a[0], 0, "rand_augment: N") : 2;
                     const int m = given > 1 ? whole(a[1], 1, "rand_augment: M") : 9;
                     const int bins = given > 2 ? whole(a[2], 2, "rand_augment: BINS") : 31;
                     try {
                       return make_rand_augment(n, m, bins, mode_of(a), fill_of(a));
                     } catch (const bad_transform_argument& e) {
                       throw bad_transform_argument(e.index() < 3 ? e.index() : a.size() - 1, e.what());
                     }
                   },
                   options});
  kinds.push_back({{"auto_augment"}, 0, 1, "auto_augment[(imagenet|cifar10|svhn)][, interpolation=nearest|bilinear, fill=F]",
                   [=](std::span<const double> a) -> std::shared_ptr<transform> {
                     const std::size_t given = a.size() - 2;
                     if (given > 0) check_policy(a[0], "auto_augment");  // (before the try: its caret under the policy)
                     const auto policy = static_cast<auto_augment_policy>(given > 0 ? static_cast<int>(a[0]) : 0);
                     try {
                       return make_auto_augment(policy, mode_of(a), fill_of(a));
                     } catch (const bad_transform_argument& e) {
                       throw bad_transform_argument(a.size() - 1, e.what());
                     }
                   },
                   options, {"imagenet", "cifar10", "svhn"}});
}

}  // namespace pinfeed::loaders
