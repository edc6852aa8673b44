// pinfeed's bilinear resize on the host (pinfeed/ops/resize.hpp): each source row a column tap
// reads is taken across once (two rows kept), then the rows are blended down. The arithmetic is
// resize_math.hpp's, shared with the device.
#include <string>
#include <vector>

#include "pinfeed/ops/resize.hpp"
#include "pinfeed/runtime/detail/thread_scratch.hpp"
#include "pinfeed/runtime/error.hpp"
#include "resize_math.hpp"

namespace pinfeed::ops {

namespace {

void check_sides(const char* what, std::int64_t h, std::int64_t w) {
  if (h < 1 || w < 1 || h > resize::kMostSide || w > resize::kMostSide)
    throw pinfeed::invalid_argument(std::string("resize: ") + what + " " + std::to_string(w) + "x" + std::to_string(h) +
                                    ": sides must be 1 to " + std::to_string(resize::kMostSide));
}

struct row_scratch {
  std::vector<resize::tap> columns;
  std::vector<std::int32_t> rows[2];
  std::int64_t row_of[2] = {-1, -1};  ///< the source row each holds
};

}  // namespace

void resize_bilinear_u8(const std::uint8_t* in, std::size_t in_stride, std::int64_t in_h, std::int64_t in_w, int channels,
                        std::uint8_t* out, std::int64_t out_h, std::int64_t out_w, bool flip) {
  check_sides("input", in_h, in_w);
  check_sides("output", out_h, out_w);
  if (channels < 1 || channels > 4) throw pinfeed::invalid_argument("resize: " + std::to_string(channels) + " channels (1 to 4 taken)");
  auto& s = pinfeed::detail::thread_scratch<row_scratch, struct resize_rows>();
  s.columns.resize(static_cast<std::size_t>(out_w));
  for (std::int64_t d = 0; d < out_w; ++d) s.columns[static_cast<std::size_t>(d)] = resize::tap_at(d, in_w, out_w);
  const std::size_t values = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(channels);
  for (auto& r : s.rows) r.resize(values);
  s.row_of[0] = s.row_of[1] = -1;
  const auto across = [&](std::int64_t src) -> const std::int32_t* {  // source row `src` taken across
    for (int k = 0; k < 2; ++k)
      if (s.row_of[k] == src) return s.rows[k].data();
    const int k = s.row_of[0] < s.row_of[1] ? 0 : 1;  // the older row (rows come in order)
    const std::uint8_t* p = in + static_cast<std::size_t>(src) * in_stride;
    std::int32_t* dst = s.rows[k].data();
    for (std::int64_t d = 0; d < out_w; ++d) {
      const resize::tap t = s.columns[static_cast<std::size_t>(d)];
      const std::int64_t od = flip ? out_w - 1 - d : d;
      for (int c = 0; c < channels; ++c)
        dst[od * channels + c] = resize::across(p[t.i0 * channels + c], p[t.i1 * channels + c], t.w1);
    }
    s.row_of[k] = src;
    return dst;
  };
  for (std::int64_t y = 0; y < out_h; ++y) {
    const resize::tap t = resize::tap_at(y, in_h, out_h);
    const std::int32_t* top = across(t.i0);
    const std::int32_t* bottom = across(t.i1);
    std::uint8_t* o = out + static_cast<std::size_t>(y) * values;
    for (std::size_t i = 0; i < values; ++i) o[i] = resize::down(top[i], bottom[i], t.w1);
  }
}

void check_resize_jobs(const resize_job* jobs, std::size_t count, std::uint64_t in_bytes, std::uint64_t out_bytes) {
  if (count > 0 && jobs == nullptr) throw pinfeed::invalid_argument("resize batch: " + std::to_string(count) + " jobs but none given");
  for (std::size_t i = 0; i < count; ++i) {
    const resize_job& j = jobs[i];
    const std::string name = "resize batch: job " + std::to_string(i) + ": ";
    if (j.in_h < 1 || j.in_w < 1 || j.out_h < 1 || j.out_w < 1 || j.in_h > resize::kMostSide || j.in_w > resize::kMostSide ||
        j.out_h > resize::kMostSide || j.out_w > resize::kMostSide)
      throw pinfeed::invalid_argument(name + std::to_string(j.in_w) + "x" + std::to_string(j.in_h) + " to " + std::to_string(j.out_w) +
                                      "x" + std::to_string(j.out_h) + ": sides must be 1 to " + std::to_string(resize::kMostSide));
    const std::uint64_t in_size = std::uint64_t{j.in_h} * j.in_w * 3, out_size = std::uint64_t{j.out_h} * j.out_w * 3;
    if (j.in_offset > in_bytes || in_size > in_bytes - j.in_offset)
      throw pinfeed::invalid_argument(name + "its input [" + std::to_string(j.in_offset) + ", +" + std::to_string(in_size) +
                                      ") is past the " + std::to_string(in_bytes) + " bytes given");
    if (j.out_offset > out_bytes || out_size > out_bytes - j.out_offset)
      throw pinfeed::invalid_argument(name + "its output [" + std::to_string(j.out_offset) + ", +" + std::to_string(out_size) +
                                      ") is past the " + std::to_string(out_bytes) + " bytes given");
    if (j.flip > 1) throw pinfeed::invalid_argument(name + "flip " + std::to_string(j.flip) + " (0 or 1)");
  }
}

}  // namespace pinfeed::ops
