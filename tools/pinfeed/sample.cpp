// pinfeed sample: the balanced sampler on labels from an .npy file, on the CPU or a GPU.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "commands.hpp"
#include "pinfeed/ops/detail/sampler_checks.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/device.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/host_memory.hpp"
#include "pinfeed/runtime/npy.hpp"

namespace pinfeed::tool {
namespace {

struct sample_args {
  std::string labels, out, valid, mode = "topup", device = "cpu";
  std::int64_t k = -1;
  double fraction = 0.5;
  std::uint64_t seed = 0;
  std::uint32_t offset = 0;
  std::int64_t negative_label = 0, ignore_label = -1;
};

int cmd_sample(const sample_args& s) {
  const npy_array labels = read_npy(s.labels);
  if (labels.type != dtype::i32 && labels.type != dtype::i64)
    throw pinfeed::invalid_argument("labels '" + s.labels + "' have dtype " + std::string(dtype_name(labels.type)) +
                                "; int32 or int64 expected");
  if (labels.shape.size() != 1 && labels.shape.size() != 2)
    throw pinfeed::invalid_argument("labels '" + s.labels + "' have " + std::to_string(labels.shape.size()) +
                                " dimensions; shape [N] or [B, N] expected");
  ops::sampler_params p;
  p.k = s.k;
  p.positive_fraction = s.fraction;
  p.seed = s.seed;
  p.offset = s.offset;
  p.negative_label = s.negative_label;
  p.ignore_label = s.ignore_label;
  if (s.mode == "topup") p.mode = ops::sampler_mode::topup;
  else if (s.mode == "detectron2") p.mode = ops::sampler_mode::detectron2;
  else throw pinfeed::invalid_argument("unknown mode '" + s.mode + "' (topup or detectron2)");
  ops::sampler_args a;
  a.rows = labels.shape.size() == 2 ? labels.shape[0] : 1;
  a.n = labels.shape.back();
  a.label_type = labels.type;
  npy_array out, valid;
  out.type = dtype::i64;
  out.shape = {a.rows, std::max<std::int64_t>(p.k, 0)};
  valid.type = dtype::i32;
  valid.shape = {a.rows};
  ops::detail::validate_shapes(a, p);
  out.data.resize(static_cast<std::size_t>(a.rows * p.k) * 8);
  valid.data.resize(static_cast<std::size_t>(a.rows) * 4);
  const device_choice dev = resolve_device(s.device);
  if (!dev.is_cuda()) {
    a.labels = labels.data.data();
    a.indices = out.data.data();
    a.valid = reinterpret_cast<std::int32_t*>(valid.data.data());
    ops::balanced_sample_host(a, p);
  } else {
    PINFEED_CUDA_TRY(cudaSetDevice(dev.index));
    device_buffer d_labels(std::max<std::size_t>(labels.data.size(), 1)),
        d_out(std::max<std::size_t>(out.data.size(), 1)), d_valid(std::max<std::size_t>(valid.data.size(), 1));
    PINFEED_CUDA_TRY(cudaMemcpy(d_labels.data(), labels.data.data(), labels.data.size(), cudaMemcpyHostToDevice));
    a.labels = d_labels.data();
    a.indices = d_out.data();
    a.valid = reinterpret_cast<std::int32_t*>(d_valid.data());
    std::size_t bytes = 0;
    ops::balanced_sample_device(nullptr, bytes, a, p, nullptr);
    device_buffer temp(bytes);
    ops::balanced_sample_device(temp.data(), bytes, a, p, nullptr);
    PINFEED_CUDA_TRY(cudaMemcpy(out.data.data(), d_out.data(), out.data.size(), cudaMemcpyDeviceToHost));
    PINFEED_CUDA_TRY(cudaMemcpy(valid.data.data(), d_valid.data(), valid.data.size(), cudaMemcpyDeviceToHost));
  }
  write_npy(s.out, out);
  if (!s.valid.empty()) write_npy(s.valid, valid);
  std::fprintf(stderr, "sample: %lld row(s) of %lld labels -> %s [%lld, %lld] int64 (%s)\n",
               static_cast<long long>(a.rows), static_cast<long long>(a.n), s.out.c_str(),
               static_cast<long long>(a.rows), static_cast<long long>(p.k), dev.to_string().c_str());
  return 0;
}

}  // namespace

void add_sample(CLI::App& app, command_list& out) {
  static sample_args sa;  // CLI11 binds the options to it: it outlives the parse
  auto* sample = app.add_subcommand("sample", "balanced sampler on labels from an .npy file");
  sample->add_option("--labels", sa.labels, "labels .npy, int32 or int64, shape [N] or [B, N]")->required();
  sample->add_option("--k", sa.k, "items to pick per row")->required();
  sample->add_option("--positive-fraction", sa.fraction, "fraction of positives aimed at, in [0, 1]");
  sample->add_option("--seed", sa.seed, "seed of the selection and order keys");
  sample->add_option("--offset", sa.offset, "draw number under the seed");
  sample->add_option("--mode", sa.mode, "topup (fill from the other class) or detectron2");
  sample->add_option("--negative-label", sa.negative_label, "label of negatives (default 0)");
  sample->add_option("--ignore-label", sa.ignore_label, "label never picked (default -1)");
  sample->add_option("--device", sa.device, "cpu, cuda, cuda:N or auto");
  sample->add_option("--out", sa.out, "output .npy of int64 indices [B, K], -1 padded")->required();
  sample->add_option("--valid", sa.valid, "optional output .npy of int32 valid counts [B]");
  out.push_back({sample, [] { return cmd_sample(sa); }, {}});
}

}  // namespace pinfeed::tool
