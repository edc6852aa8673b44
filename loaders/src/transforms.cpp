#include "pinfeed/loaders/transforms.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "pinfeed/ops/normalize.hpp"
#include "pinfeed/runtime/random.hpp"

namespace pinfeed::loaders {
namespace {

std::string shape_text(const image_spec& s) {
  return std::to_string(s.height) + "x" + std::to_string(s.width) + "x" + std::to_string(s.channels) + " " +
         std::string(dtype_name(s.type));
}

void require_type(const transform& t, const image_spec& in, bool allow_float) {
  if (in.type != dtype::u8 && !(allow_float && in.type == dtype::f32))
    throw std::invalid_argument(t.name() + ": unsupported input " + shape_text(in));
}

/// Shortest text that reads back as the same float (names must round-trip through the parser).
std::string format_number(double v) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    if (std::stod(os.str()) == v || static_cast<float>(std::stod(os.str())) == static_cast<float>(v)) return os.str();
  }
  return std::to_string(v);
}

/// Copies the window [y0, y0 + h) x [x0, x0 + w) of `in` to `out`.
void copy_window(const image_view& in, const image_view& out, std::int64_t y0, std::int64_t x0) {
  const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
  for (std::int64_t y = 0; y < out.spec.height; ++y)
    std::memcpy(out.data + static_cast<std::size_t>(y * out.spec.width) * px,
                in.data + (static_cast<std::size_t>((y0 + y) * in.spec.width + x0)) * px,
                static_cast<std::size_t>(out.spec.width) * px);
}

class crop_transform final : public transform {
 public:
  crop_transform(std::int64_t size, bool random) : size_(size), random_(random) {
    if (size <= 0)
      throw std::invalid_argument(std::string(random ? "crop" : "center_crop") + ": size must be positive, got " +
                                  std::to_string(size));
  }
  std::string name() const override {
    return std::string(random_ ? "crop(" : "center_crop(") + std::to_string(size_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (in.fixed() && (in.height < size_ || in.width < size_))
      throw std::invalid_argument(name() + ": input " + shape_text(in) + " is smaller than the crop");
    return {size_, size_, in.channels, in.type};
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    if (in.spec.height < size_ || in.spec.width < size_)
      throw std::runtime_error(name() + ": image " + std::to_string(in.spec.height) + "x" +
                               std::to_string(in.spec.width) + " is smaller than the crop");
    const auto w = *window(in.spec.height, in.spec.width, rng);
    copy_window(in, out, w.window.y, w.window.x);
  }
  std::optional<window_plan> window(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    if (height < size_ || width < size_) return std::nullopt;  // apply() reports it
    std::int64_t y0 = (height - size_) / 2, x0 = (width - size_) / 2;
    if (random_) {
      y0 = rng.below(static_cast<std::uint32_t>(height - size_ + 1));
      x0 = rng.below(static_cast<std::uint32_t>(width - size_ + 1));
    }
    return window_plan{{y0, x0, size_, size_}, size_, size_};
  }

 private:
  std::int64_t size_;
  bool random_;
};

/// Bilinear resize of an 8-bit (or float) HWC window to out's shape (OpenCV, fixed point for uint8).
void resize_window(const image_view& in, std::int64_t y0, std::int64_t x0, std::int64_t h, std::int64_t w,
                   const image_view& out) {
  const int type = CV_MAKETYPE(in.spec.type == dtype::u8 ? CV_8U : CV_32F, static_cast<int>(in.spec.channels));
  const cv::Mat src(static_cast<int>(in.spec.height), static_cast<int>(in.spec.width), type, in.data);
  cv::Mat dst(static_cast<int>(out.spec.height), static_cast<int>(out.spec.width), type, out.data);
  cv::resize(src(cv::Rect(static_cast<int>(x0), static_cast<int>(y0), static_cast<int>(w), static_cast<int>(h))), dst,
             dst.size(), 0, 0, cv::INTER_LINEAR);
}

}  // namespace

void resize_into(const image_view& in, const image_view& out) {
  if (in.spec.height == out.spec.height && in.spec.width == out.spec.width) {
    std::memcpy(out.data, in.data, out.spec.bytes());
    return;
  }
  resize_window(in, 0, 0, in.spec.height, in.spec.width, out);
}

namespace {

class resize_transform final : public transform {
 public:
  explicit resize_transform(std::int64_t shorter) : shorter_(shorter) {
    if (shorter <= 0) throw std::invalid_argument("resize: size must be positive, got " + std::to_string(shorter));
  }
  std::string name() const override { return "resize(" + std::to_string(shorter_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (!in.fixed()) return {-1, -1, in.channels, in.type};
    return shape_for(in);
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    resize_window(in, 0, 0, in.spec.height, in.spec.width, out);
  }
  std::int64_t min_short_side(std::int64_t, std::int64_t, philox_stream) const override { return shorter_; }

 private:
  image_spec shape_for(const image_spec& in) const {
    if (in.height <= in.width) return {shorter_, shorter_ * in.width / in.height, in.channels, in.type};
    return {shorter_ * in.height / in.width, shorter_, in.channels, in.type};
  }
  std::int64_t shorter_;
};

class rrc_transform final : public transform {
 public:
  rrc_transform(std::int64_t size, double smin, double smax, double rmin, double rmax)
      : size_(size), smin_(smin), smax_(smax), rmin_(rmin), rmax_(rmax) {
    if (size <= 0) throw std::invalid_argument("rrc: size must be positive, got " + std::to_string(size));
    if (!(smin > 0 && smin <= smax && smax <= 1))
      throw std::invalid_argument("rrc: scale range (" + format_number(smin) + ", " + format_number(smax) +
                                  ") must satisfy 0 < min <= max <= 1");
    if (!(rmin > 0 && rmin <= rmax))
      throw std::invalid_argument("rrc: ratio range (" + format_number(rmin) + ", " + format_number(rmax) +
                                  ") must satisfy 0 < min <= max");
  }
  std::string name() const override {
    return "rrc(" + std::to_string(size_) + "," + format_number(smin_) + "," + format_number(smax_) + "," +
           format_number(rmin_) + "," + format_number(rmax_) + ")";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return {size_, size_, in.channels, in.type};
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const box b = draw(in.spec.height, in.spec.width, rng);
    resize_window(in, b.y, b.x, b.h, b.w, out);
  }
  std::optional<window_plan> window(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    const box b = draw(height, width, rng);
    return window_plan{{b.y, b.x, b.h, b.w}, size_, size_};
  }
  std::int64_t min_short_side(std::int64_t height, std::int64_t width, philox_stream rng) const override {
    // Keep the drawn window at least `size` on its shorter side after the decoder shrinks the image.
    const box b = draw(height, width, rng);
    const double shrink = static_cast<double>(std::min(b.h, b.w)) / static_cast<double>(size_);
    if (shrink <= 1.0) return 0;
    return static_cast<std::int64_t>(std::ceil(static_cast<double>(std::min(height, width)) / shrink));
  }

 private:
  struct box {
    std::int64_t y, x, h, w;
  };
  /// torchvision's RandomResizedCrop.get_params, with the sample's stream.
  box draw(std::int64_t height, std::int64_t width, philox_stream& rng) const {
    const double area = static_cast<double>(height) * static_cast<double>(width);
    const double lr0 = std::log(rmin_), lr1 = std::log(rmax_);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * (smin_ + (smax_ - smin_) * rng.uniform());
      const double aspect = std::exp(lr0 + (lr1 - lr0) * rng.uniform());
      const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * aspect)));
      const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / aspect)));
      if (w > 0 && w <= width && h > 0 && h <= height) {
        const auto y = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(height - h + 1)));
        const auto x = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(width - w + 1)));
        return {y, x, h, w};
      }
    }
    const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
    std::int64_t w = width, h = height;
    if (in_ratio < rmin_) h = std::lround(static_cast<double>(w) / rmin_);
    else if (in_ratio > rmax_) w = std::lround(static_cast<double>(h) * rmax_);
    return {(height - h) / 2, (width - w) / 2, h, w};
  }
  std::int64_t size_;
  double smin_, smax_, rmin_, rmax_;
};

class mask_transform final : public transform {
 public:
  explicit mask_transform(double ratio) : ratio_(ratio) {
    if (!(ratio >= 0.0 && ratio <= 1.0))
      throw std::invalid_argument("mask: ratio must be in [0, 1], got " + format_number(ratio));
    threshold_ = ratio >= 1.0 ? 0xFFFFFFFFull + 1 : static_cast<std::uint64_t>(std::floor(ratio * 4294967296.0));
  }
  std::string name() const override { return "mask(" + format_number(ratio_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return in;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const auto pixels = static_cast<std::size_t>(h * w);
    thread_local std::vector<std::uint32_t> words;
    thread_local std::vector<std::uint8_t> pick;
    words.resize((pixels + 3) / 4 * 4);
    pick.resize(pixels);
    // Pixel p is picked when word p of the stream is below ratio * 2^32.
    philox_words(rng, 0, words.size() / 4, words.data());
    for (std::size_t p = 0; p < pixels; ++p) pick[p] = words[p] < threshold_;
    // 4-neighbour dilation, row by row, as byte ORs the compiler vectorises.
    thread_local std::vector<std::uint8_t> dilated;
    dilated.resize(pixels);
    for (std::int64_t y = 0; y < h; ++y) {
      const std::uint8_t* row = pick.data() + y * w;
      const std::uint8_t* up = y > 0 ? row - w : row;
      const std::uint8_t* down = y + 1 < h ? row + w : row;
      std::uint8_t* d = dilated.data() + y * w;
      for (std::int64_t x = 0; x < w; ++x) d[x] = row[x] | up[x] | down[x];
      for (std::int64_t x = 1; x < w; ++x) d[x] |= row[x - 1];
      for (std::int64_t x = 0; x + 1 < w; ++x) d[x] |= row[x + 1];
    }
    if (in.spec.type == dtype::u8 && in.spec.channels == 3) {
      const auto* src = in.as<std::uint8_t>();
      auto* dst = out.as<std::uint8_t>();
      for (std::size_t p = 0; p < pixels; ++p) {
        const std::uint8_t keep = static_cast<std::uint8_t>(dilated[p] - 1);  // 0xFF kept, 0x00 masked
        dst[3 * p] = src[3 * p] & keep;
        dst[3 * p + 1] = src[3 * p + 1] & keep;
        dst[3 * p + 2] = src[3 * p + 2] & keep;
      }
      return;
    }
    const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
    if (in.data != out.data) std::memcpy(out.data, in.data, pixels * px);
    for (std::size_t p = 0; p < pixels; ++p)
      if (dilated[p]) std::memset(out.data + p * px, 0, px);
  }
  bool in_place() const override { return true; }  // every element is read before it is written

 private:
  double ratio_;
  std::uint64_t threshold_;
};

class hflip_transform final : public transform {
 public:
  explicit hflip_transform(double p) : p_(p) {
    if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("hflip: probability must be in [0, 1], got " + format_number(p));
  }
  std::string name() const override { return "hflip(" + format_number(p_) + ")"; }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    return in;
  }
  void apply(const image_view& in, const image_view& out, philox_stream rng) const override {
    const bool flip = static_cast<double>(rng.next_u32()) < p_ * 4294967296.0;
    const std::int64_t h = in.spec.height, w = in.spec.width;
    const std::size_t px = static_cast<std::size_t>(in.spec.channels) * dtype_size(in.spec.type);
    if (!flip) {
      if (in.data != out.data) std::memcpy(out.data, in.data, static_cast<std::size_t>(h * w) * px);
      return;
    }
    if (in.data == out.data && px == 3) {  // in place, uint8 RGB: swap pixel x with pixel w - 1 - x
      for (std::int64_t y = 0; y < h; ++y) {
        std::byte* row = out.data + static_cast<std::size_t>(y * w) * 3;
        for (std::int64_t x = 0; x < w / 2; ++x) {
          std::byte* l = row + 3 * x;
          std::byte* r = row + 3 * (w - 1 - x);
          const std::byte l0 = l[0], l1 = l[1], l2 = l[2];
          l[0] = r[0];
          l[1] = r[1];
          l[2] = r[2];
          r[0] = l0;
          r[1] = l1;
          r[2] = l2;
        }
      }
      return;
    }
    if (in.data == out.data) {  // in place, any pixel size
      std::byte tmp[64];
      for (std::int64_t y = 0; y < h; ++y) {
        std::byte* row = out.data + static_cast<std::size_t>(y * w) * px;
        for (std::int64_t x = 0; x < w / 2; ++x) {
          std::byte* l = row + static_cast<std::size_t>(x) * px;
          std::byte* r = row + static_cast<std::size_t>(w - 1 - x) * px;
          if (px <= sizeof tmp) {
            std::memcpy(tmp, l, px);
            std::memcpy(l, r, px);
            std::memcpy(r, tmp, px);
          } else {
            std::swap_ranges(l, l + px, r);
          }
        }
      }
      return;
    }
    if (px == 3) {  // uint8 RGB: byte moves the compiler can keep in registers
      for (std::int64_t y = 0; y < h; ++y) {
        const std::byte* src = in.data + static_cast<std::size_t>(y * w) * 3;
        std::byte* dst = out.data + static_cast<std::size_t>(y * w) * 3;
        for (std::int64_t x = 0; x < w; ++x) {
          const std::byte* s = src + (w - 1 - x) * 3;
          dst[3 * x] = s[0];
          dst[3 * x + 1] = s[1];
          dst[3 * x + 2] = s[2];
        }
      }
      return;
    }
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        std::memcpy(out.data + static_cast<std::size_t>(y * w + x) * px,
                    in.data + static_cast<std::size_t>(y * w + (w - 1 - x)) * px, px);
  }
  bool in_place() const override { return true; }

 private:
  double p_;
};

/// The pointwise steps, HWC in -> HWC float out, with the rounding rule of ops::normalize.
class pointwise_transform final : public transform {
 public:
  enum class kind { ycbcr, scale, normalize };
  pointwise_transform(kind k, float factor, std::array<float, 3> mean, std::array<float, 3> std)
      : kind_(k), factor_(factor), mean_(mean), std_(std) {
    if (k == kind::scale && !std::isfinite(factor)) throw std::invalid_argument("scale: factor must be finite");
    if (k == kind::normalize)
      for (int c = 0; c < 3; ++c)
        if (!(std[c] > 0.0f) || !std::isfinite(std[c]) || !std::isfinite(mean[c]))
          throw std::invalid_argument("normalize: std[" + std::to_string(c) + "] = " + format_number(std[c]) +
                                      " must be positive and finite");
  }
  std::string name() const override {
    switch (kind_) {
      case kind::ycbcr: return "ycbcr";
      case kind::scale: return "scale(" + format_number(factor_) + ")";
      case kind::normalize: {
        std::string s = "normalize(";
        for (int c = 0; c < 3; ++c) s += format_number(mean_[c]) + ",";
        for (int c = 0; c < 3; ++c) s += format_number(std_[c]) + (c < 2 ? "," : ")");
        return s;
      }
    }
    return "?";
  }
  image_spec output_spec(const image_spec& in) const override {
    require_type(*this, in, true);
    if (in.channels != 3) throw std::invalid_argument(name() + ": needs 3 channels, input is " + shape_text(in));
    return {in.height, in.width, 3, dtype::f32};
  }
  std::optional<pointwise_step> pointwise() const override {
    pointwise_step p;
    p.which = kind_ == kind::ycbcr ? pointwise_step::kind::ycbcr
              : kind_ == kind::scale ? pointwise_step::kind::scale : pointwise_step::kind::normalize;
    p.factor = factor_;
    p.mean = mean_;
    p.std = std_;
    return p;
  }
  void apply(const image_view& in, const image_view& out, philox_stream) const override {
    const auto pixels = static_cast<std::size_t>(in.spec.height * in.spec.width);
    float* dst = out.as<float>();
    float a[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    if (kind_ == kind::scale) a[0] = a[1] = a[2] = factor_;
    if (kind_ == kind::normalize)
      for (int c = 0; c < 3; ++c) {
        a[c] = 1.0f / std_[c];
        b[c] = -mean_[c] / std_[c];
      }
    for (std::size_t p = 0; p < pixels; ++p) {
      float v[3];
      for (int c = 0; c < 3; ++c)
        v[c] = in.spec.type == dtype::u8 ? static_cast<float>(in.as<std::uint8_t>()[3 * p + c]) : in.as<float>()[3 * p + c];
      if (kind_ == kind::ycbcr) {
        float t[3];
        for (int c = 0; c < 3; ++c)
          t[c] = std::fma(ops::detail::ycbcr_matrix(c, 0), v[0],
                          std::fma(ops::detail::ycbcr_matrix(c, 1), v[1],
                                   std::fma(ops::detail::ycbcr_matrix(c, 2), v[2], ops::detail::ycbcr_offset(c))));
        for (int c = 0; c < 3; ++c) dst[3 * p + c] = t[c];
      } else {
        for (int c = 0; c < 3; ++c) dst[3 * p + c] = std::fma(v[c], a[c], b[c]);
      }
    }
  }

 private:
  kind kind_;
  float factor_;
  std::array<float, 3> mean_, std_;
};

}  // namespace

std::shared_ptr<transform> random_crop(std::int64_t size) { return std::make_shared<crop_transform>(size, true); }
std::shared_ptr<transform> center_crop(std::int64_t size) { return std::make_shared<crop_transform>(size, false); }
std::shared_ptr<transform> random_mask(double ratio) { return std::make_shared<mask_transform>(ratio); }
std::shared_ptr<transform> resize(std::int64_t shorter) { return std::make_shared<resize_transform>(shorter); }
std::shared_ptr<transform> random_resized_crop(std::int64_t size, double smin, double smax, double rmin, double rmax) {
  return std::make_shared<rrc_transform>(size, smin, smax, rmin, rmax);
}
std::shared_ptr<transform> random_hflip(double p) { return std::make_shared<hflip_transform>(p); }
std::shared_ptr<transform> convert_ycbcr() {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::ycbcr, 1.0f, std::array<float, 3>{},
                                               std::array<float, 3>{1, 1, 1});
}
std::shared_ptr<transform> scale(float factor) {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::scale, factor, std::array<float, 3>{},
                                               std::array<float, 3>{1, 1, 1});
}
std::shared_ptr<transform> normalize(std::array<float, 3> mean, std::array<float, 3> std) {
  return std::make_shared<pointwise_transform>(pointwise_transform::kind::normalize, 1.0f, mean, std);
}

pipeline::pipeline(std::vector<std::shared_ptr<transform>> steps) : steps_(std::move(steps)) {
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (!steps_[i]) throw std::invalid_argument("pipeline step " + std::to_string(i) + " is null");
}

image_spec pipeline::output_spec(const image_spec& in) const {
  image_spec s = in;
  for (const auto& t : steps_) s = t->output_spec(s);
  if (!s.fixed())
    throw std::invalid_argument("pipeline '" + to_string() + "' has no fixed output shape for input " +
                                std::to_string(in.height) + "x" + std::to_string(in.width) +
                                ": end it with a crop when image sizes vary");
  return s;
}

std::string pipeline::to_string() const {
  std::string s;
  for (const auto& t : steps_) {
    if (!s.empty()) s += ',';
    s += t->name();
  }
  return s;
}

pipeline pipeline::host_part() const {
  std::size_t end = steps_.size();
  while (end > 0 && steps_[end - 1]->pointwise().has_value()) --end;
  return pipeline({steps_.begin(), steps_.begin() + static_cast<std::ptrdiff_t>(end)});
}

pipeline pipeline::device_tail() const {
  std::size_t end = steps_.size();
  while (end > 0 && steps_[end - 1]->pointwise().has_value()) --end;
  return pipeline({steps_.begin() + static_cast<std::ptrdiff_t>(end), steps_.end()});
}

namespace {

[[noreturn]] void parse_error(std::string_view text, std::size_t at, const std::string& what) {
  throw std::invalid_argument("transforms: " + what + " at character " + std::to_string(at) + "\n  " +
                              std::string(text) + "\n  " + std::string(at, ' ') + "^");
}

std::shared_ptr<transform> make_step(std::string_view text, std::size_t at, const std::string& name,
                                     const std::vector<double>& args, std::size_t args_at) {
  auto want = [&](std::size_t lo, std::size_t hi) {
    if (args.size() < lo || args.size() > hi)
      parse_error(text, args_at, name + " takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                                     " argument(s), got " + std::to_string(args.size()));
  };
  auto integer = [&](double v) {
    if (v != std::floor(v) || v <= 0 || v > 1e9) parse_error(text, args_at, name + " needs a positive integer size");
    return static_cast<std::int64_t>(v);
  };
  try {
    if (name == "crop" || name == "random_crop") return want(1, 1), random_crop(integer(args[0]));
    if (name == "center_crop") return want(1, 1), center_crop(integer(args[0]));
    if (name == "resize") return want(1, 1), resize(integer(args[0]));
    if (name == "rrc" || name == "random_resized_crop") {
      if (args.size() != 1 && args.size() != 3 && args.size() != 5)
        parse_error(text, args_at, name + " takes 1, 3 or 5 arguments (size[, scale min, max[, ratio min, max]]), got " +
                                       std::to_string(args.size()));
      return random_resized_crop(integer(args[0]), args.size() > 1 ? args[1] : 0.08, args.size() > 1 ? args[2] : 1.0,
                                 args.size() > 3 ? args[3] : 3.0 / 4.0, args.size() > 3 ? args[4] : 4.0 / 3.0);
    }
    if (name == "mask" || name == "random_mask") return want(1, 1), random_mask(args[0]);
    if (name == "hflip" || name == "random_hflip") return want(0, 1), random_hflip(args.empty() ? 0.5 : args[0]);
    if (name == "ycbcr" || name == "convert_color") return want(0, 0), convert_ycbcr();
    if (name == "scale") return want(0, 1), scale(args.empty() ? 1.0f / 255.0f : static_cast<float>(args[0]));
    if (name == "normalize") {
      want(6, 6);
      return normalize({static_cast<float>(args[0]), static_cast<float>(args[1]), static_cast<float>(args[2])},
                       {static_cast<float>(args[3]), static_cast<float>(args[4]), static_cast<float>(args[5])});
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("transforms:", 0) == 0) throw;
    parse_error(text, args_at, e.what());
  }
  parse_error(text, at, "unknown transform '" + name +
                            "' (known: crop, center_crop, resize, rrc, mask, hflip, ycbcr, scale, normalize)");
}

}  // namespace

pipeline parse_pipeline(std::string_view text) {
  std::vector<std::shared_ptr<transform>> steps;
  std::size_t i = 0;
  auto skip_ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_ws();
  if (i == text.size()) return pipeline();
  for (;;) {
    skip_ws();
    const std::size_t at = i;
    std::string name;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) name += text[i++];
    if (name.empty()) parse_error(text, at, "expected a transform name");
    skip_ws();
    std::vector<double> args;
    std::size_t args_at = i;
    if (i < text.size() && text[i] == '(') {
      ++i;
      args_at = i;
      for (;;) {
        skip_ws();
        if (i < text.size() && text[i] == ')' && args.empty()) {
          ++i;
          break;
        }
        const std::size_t num_at = i;
        std::size_t used = 0;
        double v = 0;
        try {
          v = std::stod(std::string(text.substr(i)), &used);
        } catch (const std::exception&) {
          parse_error(text, num_at, "expected a number");
        }
        if (!std::isfinite(v)) parse_error(text, num_at, "expected a finite number");
        args.push_back(v);
        i += used;
        skip_ws();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == ')') {
          ++i;
          break;
        }
        parse_error(text, i, "expected ',' or ')'");
      }
    }
    steps.push_back(make_step(text, at, name, args, args_at));
    skip_ws();
    if (i == text.size()) break;
    if (text[i] != ',') parse_error(text, i, "expected ',' between transforms");
    ++i;
  }
  return pipeline(std::move(steps));
}

pipeline load_pipeline_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("pipeline file '" + path + "' cannot be opened");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("pipeline file '" + path + "' is not JSON: " + e.what());
  }
  if (j.is_object()) {
    if (!j.contains("transforms"))
      throw std::invalid_argument("pipeline file '" + path + "' has no \"transforms\" list");
    j = j["transforms"];
  }
  if (!j.is_array()) throw std::invalid_argument("pipeline file '" + path + "': transforms must be a list of strings");
  std::vector<std::shared_ptr<transform>> steps;
  for (std::size_t k = 0; k < j.size(); ++k) {
    if (!j[k].is_string())
      throw std::invalid_argument("pipeline file '" + path + "': entry " + std::to_string(k) + " (" + j[k].dump() +
                                  ") is not a string");
    try {
      const pipeline one = parse_pipeline(j[k].get<std::string>());
      steps.insert(steps.end(), one.steps().begin(), one.steps().end());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("pipeline file '" + path + "', entry " + std::to_string(k) + ": " + e.what());
    }
  }
  return pipeline(std::move(steps));
}

}  // namespace pinfeed::loaders
