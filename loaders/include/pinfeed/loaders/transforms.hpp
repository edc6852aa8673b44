#pragma once
/// @file transforms.hpp
/// Per-sample image transforms, written straight into the sample's slot, each drawing its
/// randomness from the sample's (seed, epoch, index) stream so results never depend on threads.
///
/// A typical pipeline (the doctor's demo, see README): RandomCrop(256) -> RandomMask(0.25, 4-neighbour dilation) ->
/// ConvertColor (RGB -> YCbCr) -> Scale(1/255). Text spelling: "crop(256),mask(0.25),ycbcr,scale".
/// Float steps use the rounding rule of pinfeed::ops::normalize (fma, rounded once), so a pipeline
/// that stops at uint8 and finishes with the device op gives the same floats.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "pinfeed/ops/augment.hpp"
#include "pinfeed/ops/geometry.hpp"
#include "pinfeed/ops/mix.hpp"
#include "pinfeed/ops/policies.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/tensor.hpp"

namespace pinfeed::loaders {

/// Shape and element type of an HWC image. A negative extent means "varies per sample".
struct image_spec {
  std::int64_t height = -1, width = -1, channels = 3;
  dtype type = dtype::u8;  ///< u8 or f32
  [[nodiscard]] bool fixed() const noexcept { return height > 0 && width > 0; }
  [[nodiscard]] std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(height * width * channels) * dtype_size(type);
  }
};

/// A window of an image in full-resolution pixel coordinates.
struct image_region {
  std::int64_t y = 0, x = 0, height = 0, width = 0;
};

/// A non-owning HWC image (rows contiguous).
struct image_view {
  std::byte* data = nullptr;
  image_spec spec;
  template <class T>
  [[nodiscard]] T* as() const noexcept { return reinterpret_cast<T*>(data); }
};

/// What a pointwise step does (colour conversion, scale or normalization).
struct pointwise_step {
  enum class kind { ycbcr, scale, normalize } which = kind::scale;
  float factor = 1.0f;                      ///< scale
  std::array<float, 3> mean{0.f, 0.f, 0.f};  ///< normalize
  std::array<float, 3> std{1.f, 1.f, 1.f};   ///< normalize
};

/// What a batch op (mixup, cutmix, mixup_cutmix) does: its recipe (pinfeed/ops/mix.hpp) and the
/// number of classes of the soft labels (0: the source's).
struct batch_mix {
  ops::mix_recipe recipe{};
  std::int64_t classes = 0;
};

/// The part of a full-size image a step will use for a sample, and the size it turns it into.
struct window_plan {
  image_region window;
  std::int64_t out_height = 0, out_width = 0;
};

/// One step of a pipeline. Implementations are immutable after construction and thread-safe.
class transform {
 public:
  virtual ~transform() = default;
  /// The canonical spelling, e.g. "crop(256)".
  [[nodiscard]] virtual std::string name() const = 0;
  /// The output shape for an input shape; throws std::invalid_argument (naming the transform and
  /// the shape) when the input cannot be handled.
  [[nodiscard]] virtual image_spec output_spec(const image_spec& in) const = 0;
  /// Writes the transformed `in` to `out` (shaped by output_spec(in.spec)). `rng` is this
  /// transform's stream for the sample. Throws std::runtime_error for an input it cannot handle.
  virtual void apply(const image_view& in, const image_view& out, philox_stream rng) const = 0;
  /// True when apply() also accepts out.data == in.data (the output has the input's shape): a
  /// pipeline then runs the step in place and saves a pass over the image.
  [[nodiscard]] virtual bool in_place() const { return false; }
  /// For a step that only changes pixel values per channel (colour conversion, scale,
  /// normalization), what it does: those can run on the GPU instead (see pipeline::device_tail()).
  [[nodiscard]] virtual std::optional<pointwise_step> pointwise() const { return std::nullopt; }
  /// As the first step of a pipeline over encoded images: the shortest side the decoded image
  /// needs for this sample, given the full size (0: full resolution). Lets JPEGs decode at 1/2,
  /// 1/4 or 1/8 when the step will shrink the image anyway. Same stream as apply().
  [[nodiscard]] virtual std::int64_t min_short_side(std::int64_t height, std::int64_t width, philox_stream rng) const {
    (void)height;
    (void)width;
    (void)rng;
    return 0;
  }
  /// As the first step: when the step only looks at one window of the image and resizes it (a
  /// crop, RandomResizedCrop), that window and the output size for this sample, so a JPEG reader
  /// can decode just the window. The plan draws from the same stream as apply(), so the window is
  /// the one apply() would cut.
  [[nodiscard]] virtual std::optional<window_plan> window(std::int64_t height, std::int64_t width,
                                                          philox_stream rng) const {
    (void)height;
    (void)width;
    (void)rng;
    return std::nullopt;
  }
  /// What this step does to this sample, as a pipeline of deterministic steps that gives the same
  /// pixels ("" for the image as it is), drawn from the same stream as apply(): a random step names
  /// the parameters it drew ("rotate(-12.25,0)"), a policy the ops it chose. By default the step's
  /// own name.
  [[nodiscard]] virtual std::string explain(const image_spec& in, philox_stream rng) const {
    (void)in;
    (void)rng;
    return name();
  }
  /// For a step that only mirrors the image left to right or leaves it as it is (a random flip):
  /// whether it mirrors this sample, drawn from the same stream as apply(). nullopt for any other
  /// step. Lets the device path of decoding fold it into its resize.
  [[nodiscard]] virtual std::optional<bool> mirrors(philox_stream rng) const {
    (void)rng;
    return std::nullopt;
  }
  /// For a step the GPU can run on uint8 images (pipeline_source_options::augment_on): the jobs
  /// it gives this sample on an image shaped `in`, drawn from the same stream as apply(), in order
  /// (pinfeed/ops/augment.hpp; offsets 0): the same pixels as apply(). At most device_rounds()
  /// jobs; none for the image as it is. nullopt: no device form for this input.
  [[nodiscard]] virtual std::optional<std::vector<ops::aug_job>> device_jobs(const image_spec& in, philox_stream rng) const {
    (void)in;
    (void)rng;
    return std::nullopt;
  }
  /// The most jobs device_jobs() gives a sample; 0 for a step without a device form.
  [[nodiscard]] virtual int device_rounds() const { return 0; }
  /// For a batch op (mixup, cutmix, mixup_cutmix), what it does to each batch; nullopt for a step
  /// on samples. A batch op is the last step of a pipeline and works on whole batches: a
  /// pipeline_source runs it once a batch's samples are all produced (on the host, or on the GPU
  /// after the copy), and leaves each sample as the steps before it made it.
  [[nodiscard]] virtual std::optional<batch_mix> batch_op() const { return std::nullopt; }
};

/// The most jobs a sample takes from `steps` on the device: their device_rounds() together, 1 at
/// least (a round of copies where none has a device form).
[[nodiscard]] std::size_t device_rounds_of(std::span<const std::shared_ptr<transform>> steps);
/// One sample's device jobs for `steps` (each with a device form for `in`), sample-major: step k's
/// drawn from rng(k), then copies up to device_rounds_of(steps). Throws pinfeed::runtime_error
/// naming a step that gives none, or more than its device_rounds().
[[nodiscard]] std::vector<ops::aug_job> device_jobs_of(std::span<const std::shared_ptr<transform>> steps, const image_spec& in,
                                                       const std::function<philox_stream(std::size_t)>& rng);

/// RandomCrop: a uniformly placed size x size window. Throws when the image is smaller.
[[nodiscard]] std::shared_ptr<transform> make_random_crop(std::int64_t size);
/// CenterCrop: the centred size x size window.
[[nodiscard]] std::shared_ptr<transform> make_center_crop(std::int64_t size);
/// Resize so the shorter side is `shorter` (the longer side keeps the aspect ratio, truncated),
/// bilinear (uint8: pinfeed's integer arithmetic, pinfeed/ops/resize.hpp; float: OpenCV's INTER_LINEAR).
[[nodiscard]] std::shared_ptr<transform> make_resize(std::int64_t shorter);
/// RandomResizedCrop(size, scale, ratio) as torchvision draws it (10 tries, then a centred
/// fallback), resized bilinearly to size x size.
[[nodiscard]] std::shared_ptr<transform> make_random_resized_crop(std::int64_t size, double scale_min = 0.08,
                                                             double scale_max = 1.0, double ratio_min = 3.0 / 4.0,
                                                             double ratio_max = 4.0 / 3.0);
/// RandomMask: each pixel is picked with probability `ratio`, the picks are dilated to their 4
/// neighbours (the same as convolve2d with a cross kernel > 0), and picked pixels become 0 in every
/// channel.
[[nodiscard]] std::shared_ptr<transform> make_random_mask(double ratio);
/// RandomHorizontalFlip with probability p.
[[nodiscard]] std::shared_ptr<transform> make_random_hflip(double p = 0.5);
/// Colour and histogram steps on uint8 images of 1 or 3 channels, each torchvision v2's
/// (transforms.v2.functional) arithmetic on a uint8 tensor, stated in pinfeed/ops/colour.hpp:
/// adjust_brightness, adjust_contrast, adjust_saturation, adjust_sharpness (factors >= 0), adjust_hue,
/// posterize (bits 1..8), solarize (threshold in [0, 255]), autocontrast, equalize, invert, and
/// rgb_to_grayscale (1 or 3 output channels). Each throws std::invalid_argument for a bad value.
[[nodiscard]] std::shared_ptr<transform> make_brightness(double factor);
[[nodiscard]] std::shared_ptr<transform> make_contrast(double factor);
[[nodiscard]] std::shared_ptr<transform> make_saturation(double factor);
[[nodiscard]] std::shared_ptr<transform> make_hue(double factor);  ///< in [-0.5, 0.5]; 3 channels
[[nodiscard]] std::shared_ptr<transform> make_sharpness(double factor);
[[nodiscard]] std::shared_ptr<transform> make_posterize(int bits);
[[nodiscard]] std::shared_ptr<transform> make_solarize(double threshold);
[[nodiscard]] std::shared_ptr<transform> make_autocontrast();
[[nodiscard]] std::shared_ptr<transform> make_equalize();
[[nodiscard]] std::shared_ptr<transform> make_invert();
[[nodiscard]] std::shared_ptr<transform> make_grayscale(int channels = 1);
/// The affine warps on uint8 images of 1 or 3 channels, each torchvision v2's arithmetic on a uint8
/// tensor (affine, rotate, and the auto-augment policies' ShearX, ShearY, TranslateX, TranslateY),
/// stated in pinfeed/ops/geometry.hpp: nearest (torchvision's default) or bilinear; without a fill
/// the outside is 0 (torchvision's None), with one (in [0, 255]) torchvision's mask blend. `angle`
/// in degrees (affine: clockwise; rotate: counter-clockwise), shears in degrees (affine) or as
/// factors (shear_x, shear_y: about the top-left corner), translations in pixels (translate_x and
/// translate_y truncate them). Each throws bad_transform_argument for a bad value.
[[nodiscard]] std::shared_ptr<transform> make_rotate(double degrees, std::optional<double> fill = std::nullopt,
                                                     ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_affine(double angle, double tx, double ty, double scale, double shear_x,
                                                     double shear_y, std::optional<double> fill = std::nullopt,
                                                     ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_shear_x(double factor, std::optional<double> fill = std::nullopt,
                                                      ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_shear_y(double factor, std::optional<double> fill = std::nullopt,
                                                      ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_translate_x(double pixels, std::optional<double> fill = std::nullopt,
                                                          ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_translate_y(double pixels, std::optional<double> fill = std::nullopt,
                                                          ops::interpolation mode = ops::interpolation::nearest);
/// The random steps, each drawing its parameters from the sample's stream as torchvision v2's
/// transforms draw them (their distributions; the streams are pinfeed's own):
/// ColorJitter(brightness, contrast, saturation, hue) (factors from [max(0, 1 - x), 1 + x], hue from
/// [-h, h], 0: off; an order drawn as randperm(4); hue skips a grey image); RandomGrayscale(p);
/// RandomRotation(degrees) and RandomAffine(degrees, translate, scale, shear) (fill 0 by default,
/// as torchvision's); GaussianBlur(kernel, (sigma_min, sigma_max)); RandomErasing(p, scale, ratio,
/// value) (torchvision's box search, 10 tries; value: one for every channel, one per channel, or
/// empty for torchvision's "random", N(0, 1) noise (ops::normal_noise of the sample's stream) truncated to
/// uint8 modulo 256; on uint8 images it has a device form). Each throws
/// bad_transform_argument for a bad value.
[[nodiscard]] std::shared_ptr<transform> make_color_jitter(double brightness, double contrast = 0.0, double saturation = 0.0,
                                                           double hue = 0.0);
[[nodiscard]] std::shared_ptr<transform> make_random_grayscale(double p = 0.1);
[[nodiscard]] std::shared_ptr<transform> make_random_rotation(double degrees, std::optional<double> fill = 0.0,
                                                              ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_random_affine(double degrees, double translate_x, double translate_y,
                                                            double scale_min, double scale_max, double shear,
                                                            std::optional<double> fill = 0.0,
                                                            ops::interpolation mode = ops::interpolation::nearest);
[[nodiscard]] std::shared_ptr<transform> make_random_gaussian_blur(int kernel, double sigma_min = 0.1, double sigma_max = 2.0);
/// erase(i, j, h, w, value): torchvision's F.erase, the box of h x w pixels from row i, column j
/// set to `value` (one for every channel, or one per channel; truncated to uint8).
/// A batch op (transform::batch_op): MixUp, CutMix or one of the two a batch, on float images
/// (after normalize or scale), with soft labels of `classes` classes (0: the source's count).
/// Throws pinfeed::invalid_argument for an alpha that is not finite and > 0, or classes below 0.
[[nodiscard]] std::shared_ptr<transform> make_batch_mix(const ops::mix_recipe& recipe, std::int64_t classes = 0);
[[nodiscard]] std::shared_ptr<transform> make_erase(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t w,
                                                    std::vector<double> value = {0.0});
[[nodiscard]] std::shared_ptr<transform> make_random_erasing(double p = 0.5, double scale_min = 0.02, double scale_max = 0.33,
                                                             double ratio_min = 0.3, double ratio_max = 3.3,
                                                             std::vector<double> value = {0.0});
/// One op a policy applies to a sample: the op, its magnitude bin (-1: the op takes none) and the
/// magnitude it drew (signed; what pinfeed/ops/policies.hpp's apply_aug_op_u8 takes).
struct augment_choice {
  ops::aug_op op = ops::aug_op::identity;
  int bin = -1;
  double magnitude = 0.0;
};
/// An augmentation policy: a step that draws ops and magnitudes from the sample's stream.
class augment_policy : public transform {
 public:
  /// The ops this sample gets, in order: what apply() draws from the same stream and applies.
  [[nodiscard]] virtual std::vector<augment_choice> choices(std::int64_t height, std::int64_t width,
                                                            philox_stream rng) const = 0;
};
/// An op of a policy of your own: its table (pinfeed/ops/policies.hpp; linspace or none) and
/// whether its sign is drawn.
struct policy_op {
  ops::aug_op op = ops::aug_op::identity;
  ops::magnitude_table table;
  bool signed_magnitude = false;
};
/// A policy of your own: `num_ops` times, one of `ops` uniformly, then its magnitude: entry
/// `fixed_bin` of its table of `bins` (or, with fixed_bin -1, a bin drawn uniformly), negated with
/// probability 1/2 where signed (RandAugment's shape; TrivialAugment's with num_ops 1 and no
/// fixed bin). Throws bad_transform_argument for no ops, num_ops outside 0..64, bins outside
/// 1..10^6, a fixed bin not below bins, or a fill outside [0, 255].
[[nodiscard]] std::shared_ptr<augment_policy> make_augment_policy(
    std::vector<policy_op> ops, int num_ops, int bins, int fixed_bin = -1,
    ops::interpolation mode = ops::interpolation::nearest, std::optional<double> fill = std::nullopt);
/// TrivialAugmentWide(num_magnitude_bins): one of its 14 ops, a bin uniformly, the wide tables.
[[nodiscard]] std::shared_ptr<augment_policy> make_trivial_augment(
    int bins = 31, ops::interpolation mode = ops::interpolation::nearest, std::optional<double> fill = std::nullopt);
/// RandAugment(num_ops, magnitude, num_magnitude_bins): num_ops of its 14 ops at bin `magnitude`.
[[nodiscard]] std::shared_ptr<augment_policy> make_rand_augment(
    int num_ops = 2, int magnitude = 9, int bins = 31, ops::interpolation mode = ops::interpolation::nearest,
    std::optional<double> fill = std::nullopt);
/// AutoAugment's learned policies: one of 25 sub-policies, each op of it with its probability.
enum class auto_augment_policy { imagenet, cifar10, svhn };
[[nodiscard]] std::shared_ptr<augment_policy> make_auto_augment(
    auto_augment_policy policy = auto_augment_policy::imagenet, ops::interpolation mode = ops::interpolation::nearest,
    std::optional<double> fill = std::nullopt);
/// A policy's 25 sub-policies: (op, probability, magnitude bin or -1) twice each, torchvision's order.
[[nodiscard]] std::vector<std::array<std::tuple<ops::aug_op, float, int>, 2>> auto_augment_subpolicies(
    auto_augment_policy policy);
/// GaussianBlur with a kx x ky kernel (odd, kx across) and sigmas sx, sy (> 0; <= 0: torchvision's
/// default 0.15 k + 0.35), on uint8 images of 1 or 3 channels: torchvision v2's gaussian_blur,
/// stated in pinfeed/ops/blur.hpp. Throws bad_transform_argument for a bad value (index 0: the
/// kernel, 1: sigma).
[[nodiscard]] std::shared_ptr<transform> make_gaussian_blur(int kx, int ky, double sx = 0.0, double sy = 0.0);
/// ConvertColor: RGB -> YCbCr with the full-range BT.601 matrix and [0, 128, 128] offset; float output.
[[nodiscard]] std::shared_ptr<transform> make_convert_ycbcr();
/// Scale: x * factor (default 1/255); float output.
[[nodiscard]] std::shared_ptr<transform> make_scale(float factor = 1.0f / 255.0f);
/// Normalize: (x - mean[c]) / std[c] on values already scaled; float output.
[[nodiscard]] std::shared_ptr<transform> make_normalize(std::array<float, 3> mean, std::array<float, 3> std);

/// Bilinear resize of `in` to out's shape (uint8: pinfeed/ops/resize.hpp; float: OpenCV's INTER_LINEAR); a copy
/// when the shapes are equal.
void resize_into(const image_view& in, const image_view& out);

/// An ordered list of transforms with a fixed output shape.
class pipeline {
 public:
  pipeline() = default;
  explicit pipeline(std::vector<std::shared_ptr<transform>> steps);

  [[nodiscard]] const std::vector<std::shared_ptr<transform>>& steps() const noexcept { return steps_; }
  [[nodiscard]] bool empty() const noexcept { return steps_.empty(); }
  /// Output shape for an input shape; throws std::invalid_argument naming the step that fails or
  /// saying that the output shape is not fixed (end with a crop for variable-size inputs).
  [[nodiscard]] image_spec output_spec(const image_spec& in) const;
  /// "crop(256),mask(0.25),ycbcr,scale"
  [[nodiscard]] std::string to_string() const;
  /// The trailing pointwise steps (colour, scale, normalize) that a GPU consumer can run instead,
  /// and the pipeline without them (which then ends in uint8: 4x fewer bytes to copy).
  [[nodiscard]] pipeline host_part() const;
  [[nodiscard]] pipeline device_tail() const;

 private:
  std::vector<std::shared_ptr<transform>> steps_;
};

/// How the parser and the pipeline-file loader make a transform from its name and arguments.
/// What a transform_kind's make (or a factory) throws for one bad argument: the parser quotes the
/// text with its caret under that argument (index from 0).
class bad_transform_argument : public pinfeed::invalid_argument {
 public:
  bad_transform_argument(std::size_t index, const std::string& what) : pinfeed::invalid_argument(what), index_(index) {}
  [[nodiscard]] std::size_t index() const noexcept { return index_; }

 private:
  std::size_t index_;
};

/// A named argument of a transform kind, spelled NAME=VALUE after the positional ones, in any order:
/// a number, or one of `words` (given to make as its index in the list).
struct transform_option {
  std::string name;
  std::vector<std::string> words;  ///< empty: the value is a number
  double fallback = 0;             ///< its value when it is not given (may be NaN: "none")
  /// A number or one of `words`: a word is then given as -1 - its index (value=random: -1).
  bool numbers_too = false;
};

struct transform_kind {
  std::vector<std::string> names;  ///< its name and aliases ("crop", "random_crop"): letters, digits, _
  std::size_t min_args = 0, max_args = 0;
  std::string usage;               ///< for messages, e.g. "crop(N)"
  /// Makes the step from min_args..max_args numbers, followed by one value per option (in the
  /// order of `options`); throws std::invalid_argument for a bad value (bad_transform_argument
  /// with the index in that list puts the parser's caret under it).
  std::function<std::shared_ptr<transform>(std::span<const double> args)> make;
  std::vector<transform_option> options;
  /// Words a positional argument may be (auto_augment(imagenet)): given to make as their index.
  std::vector<std::string> words;
};
/// Makes a transform of the trainer's own known to parse_pipeline() and load_pipeline_file() by
/// its names. Thread-safe. Throws std::invalid_argument for a name taken (by a built-in too), an
/// empty or malformed name, no make function or min_args > max_args.
void register_transform(transform_kind kind);
/// Every name the parser knows, built-in and registered.
[[nodiscard]] std::vector<std::string> transform_names();

/// Parses "crop(256),mask(0.25),ycbcr,scale". Names: crop|random_crop(N), center_crop(N),
/// resize(N), rrc|random_resized_crop(N[, smin, smax[, rmin, rmax]]),
/// mask|random_mask(R), hflip|random_hflip[(P)], ycbcr|convert_color, scale[(F)],
/// normalize(m0,m1,m2,s0,s1,s2), brightness(F), contrast(F), saturation(F), hue(F), sharpness(F),
/// posterize(BITS), solarize(THRESHOLD), autocontrast, equalize, invert, grayscale[(CHANNELS)],
/// gaussian_blur(KERNEL[, SIGMA]) or (KX, SX, KY, SY), rotate(DEGREES[, FILL]),
/// affine(ANGLE, TX, TY, SCALE, SHEAR_X, SHEAR_Y[, FILL]), shear_x(F[, FILL]), shear_y(F[, FILL]),
/// translate_x(PX[, FILL]), translate_y(PX[, FILL]) (the warps take interpolation=nearest|bilinear),
/// trivial_augment[(BINS)], rand_augment[(N, M[, BINS])], auto_augment[(imagenet|cifar10|svhn)] (the
/// policies take interpolation= and fill=), and as the last step a batch op: mixup(ALPHA),
/// cutmix(ALPHA), mixup_cutmix(MIXUP_ALPHA, CUTMIX_ALPHA) (each takes num_classes=N).
/// Options are NAME=VALUE after the numbers. Throws std::invalid_argument quoting the text with a
/// caret under the bad token.
[[nodiscard]] pipeline parse_pipeline(std::string_view text);
/// Reads a JSON pipeline file: {"transforms": ["crop(256)", ...]} or a bare list of such strings.
/// Throws std::invalid_argument naming the file and the bad entry.
[[nodiscard]] pipeline load_pipeline_file(const std::string& path);
/// The same for a pipeline file's text already in memory; `origin` names it in errors.
[[nodiscard]] pipeline parse_pipeline_json(std::string_view text, const std::string& origin);

}  // namespace pinfeed::loaders
