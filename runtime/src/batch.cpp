#include "pinfeed/runtime/batch.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "detail/loader_core.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed {

batch::batch(std::shared_ptr<detail::slot_lease> lease) noexcept : lease_(std::move(lease)) {}

const detail::slot_lease& batch::lease() const {
  if (!lease_) throw std::logic_error("batch is empty (released or moved from)");
  return *lease_;
}

std::uint64_t batch::index() const { return lease().core->meta[lease().slot].batch; }
std::uint32_t batch::epoch() const { return lease().core->meta[lease().slot].epoch; }
std::size_t batch::size() const { return lease().core->meta[lease().slot].count; }

std::span<const std::uint64_t> batch::indices() const {
  const auto& m = lease().core->meta[lease().slot];
  return {m.indices.data(), m.count};
}

std::size_t batch::field_count() const { return lease().core->fields.size(); }

const field_spec& batch::spec(std::size_t i) const {
  const auto& fields = lease().core->fields;
  if (i >= fields.size())
    throw std::out_of_range("batch has no field " + std::to_string(i) + " (it has " +
                            std::to_string(fields.size()) + ")");
  return fields[i];
}

memory_location batch::location() const {
  const auto& c = *lease().core;
  if (c.dev.is_cuda()) return {memory_location::kind::cuda, c.dev.index};
  return {};
}

tensor_view batch::field(std::size_t i) const {
  const auto& l = lease();
  const auto& c = *l.core;
  if (i >= c.fields.size())
    throw std::out_of_range("batch has no field " + std::to_string(i) + " (it has " +
                            std::to_string(c.fields.size()) + ")");
  const auto& spec = c.fields[i];
  tensor_view v;
  std::byte* base = c.dev.is_cuda() ? c.device_slot(l.slot) : c.host_slot(l.slot);
  v.data = base + c.field_offset[i];
  v.type = spec.type;
  v.shape.push_back(static_cast<std::int64_t>(c.meta[l.slot].count));
  for (const auto e : spec.shape) v.shape.push_back(e);  // validate_fields capped the rank
  v.location = location();
  return v;
}

tensor_view batch::field(std::string_view name) const {
  const auto& fields = lease().core->fields;
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return field(i);
  throw std::out_of_range("batch has no field '" + std::string(name) + "'");
}

cudaEvent_t batch::ready_event() const {
  const auto& l = lease();
  return l.core->dev.is_cuda() ? l.core->meta[l.slot].copy_event.get() : nullptr;
}

cudaStream_t batch::stream() const { return lease().core->consumer_stream; }

void batch::release_after(cudaStream_t stream) {
  if (!lease_) return;
  auto lease = std::move(lease_);  // released on every path, the throwing one included
  try {
    lease->core->release_after(lease->slot, stream);
  } catch (...) {
    // No event orders the next copy after the consumer's work: wait for that work here instead, so
    // the slot is never rewritten under a reader, then report the failure.
    PINFEED_CUDA_TRY_NOTHROW(cudaStreamSynchronize(stream));
    throw;
  }
}

namespace {

DLDataType to_dl(dtype t) {
  const auto bits = static_cast<std::uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case dtype::u8: case dtype::u16: case dtype::u32: case dtype::u64:
      return {kDLUInt, bits, 1};
    case dtype::i8: case dtype::i16: case dtype::i32: case dtype::i64:
      return {kDLInt, bits, 1};
    case dtype::bf16:
      return {kDLBfloat, bits, 1};
    case dtype::f16: case dtype::f32: case dtype::f64:
      return {kDLFloat, bits, 1};
  }
  return {kDLOpaqueHandle, bits, 1};
}

struct dlpack_holder {
  std::shared_ptr<detail::slot_lease> lease;
  std::vector<std::int64_t> shape;
  DLManagedTensor tensor{};
};

}  // namespace

DLManagedTensor* batch::to_dlpack(std::string_view name) const {
  const tensor_view v = field(name);
  auto holder = std::make_unique<dlpack_holder>();
  holder->lease = lease_;
  holder->shape.assign(v.shape.begin(), v.shape.end());
  DLTensor& t = holder->tensor.dl_tensor;
  t.data = v.data;
  const auto& c = *lease_->core;
  if (v.location.is_cuda()) t.device = {kDLCUDA, v.location.device};
  else t.device = {c.host[lease_->slot].pinned() ? kDLCUDAHost : kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(holder->shape.size());
  t.dtype = to_dl(v.type);
  t.shape = holder->shape.data();
  t.strides = nullptr;  // compact, C order
  t.byte_offset = 0;
  holder->tensor.manager_ctx = holder.get();
  holder->tensor.deleter = [](DLManagedTensor* self) {
    delete static_cast<dlpack_holder*>(self->manager_ctx);
  };
  return &holder.release()->tensor;
}

}  // namespace pinfeed
