// The consumer the doctor's modes and `pinfeed run` share (batch_consumer, doctor.hpp).
#include <stdexcept>
#include <string>

#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/doctor/stages.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {

const tensor_view& step_batch::field(std::string_view name) const {
  for (std::size_t i = 0; i < names.size() && i < fields.size(); ++i)
    if (names[i] == name) return fields[i];
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "'" : ", '") + n + "'";
  throw pinfeed::out_of_range("step_batch has no field '" + std::string(name) + "' (its fields: " +
                          (known.empty() ? std::string("none named") : known) + ")");
}

step_batch step_view(const batch& b) {
  step_batch v;
  v.size = b.size();
  v.stream = b.stream();
  for (std::size_t f = 0; f < b.field_count(); ++f) {
    v.fields.push_back(b.field(f));
    v.names.push_back(b.spec(f).name);
  }
  return v;
}

batch_consumer::batch_consumer(options o, const field_spec& image, std::size_t batch_size, bool gpu) : o_(std::move(o)) {
  if (o_.step_on != "auto" && o_.step_on != "host" && o_.step_on != "device")
    throw pinfeed::invalid_argument("step_on must be auto, host or device, got '" + o_.step_on + "'");
  if (!o_.tail) return;
  if (image.type != dtype::u8 || image.shape.size() != 3 || image.shape[2] != 3)
    throw pinfeed::invalid_argument("a normalizing consumer needs uint8 [H, W, 3] images; this pipeline yields " +
                                std::string(dtype_name(image.type)) + " (its own tail already converts)");
  shape_ = {batch_size, static_cast<std::size_t>(image.shape[0]), static_cast<std::size_t>(image.shape[1])};
  if (gpu) device_out_ = device_buffer(shape_.pixels() * 3 * sizeof(float));
  else host_out_.resize(shape_.pixels() * 3);
}

void batch_consumer::operator()(const step_batch& b) {
  if (o_.tail) {
    ops::image_batch_shape s = shape_;
    s.batch = b.size;
    const auto* pixels = static_cast<const std::uint8_t*>(b.fields[0].data);
    if (b.fields[0].location.is_cuda())
      ops::normalize_hwc_to_chw_device({pixels, device_out_.data(), s}, *o_.tail, b.stream);
    else ops::normalize_hwc_to_chw_host({pixels, host_out_.data(), s}, *o_.tail);
  }
  if (o_.step) {
    o_.step(b);
  } else if (o_.step_ms > 0) {
    if (b.stream != nullptr && b.fields[0].location.is_cuda() && o_.step_on != "host") busy_kernel_ms(o_.step_ms, b.stream);
    else busy_wait_ms(o_.step_ms);
  }
}

}  // namespace pinfeed
