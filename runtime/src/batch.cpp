#include "pinfeed/runtime/batch.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "detail/loader_core.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

batch::batch(std::shared_ptr<detail::slot_lease> lease) noexcept : lease_(std::move(lease)) {}

const detail::slot_lease& batch::lease() const {
  if (!lease_) throw pinfeed::logic_error("batch is empty (released or moved from)");
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
    throw pinfeed::out_of_range("batch has no field " + std::to_string(i) + " (it has " +
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
    throw pinfeed::out_of_range("batch has no field " + std::to_string(i) + " (it has " +
                            std::to_string(c.fields.size()) + ")");
  const auto& spec = c.fields[i];
  tensor_view v;
  std::byte* base = c.dev.is_cuda() ? c.device_slot(l.slot) : c.host_slot(l.slot);
  v.type = spec.type;
  v.location = location();
  if (spec.variable) {
    v.data = base + c.arena_offset[i];
    v.shape.push_back(static_cast<std::int64_t>(c.arena_bytes(l.slot, i) / dtype_size(spec.type)));
    return v;
  }
  v.data = base + c.field_offset[i];
  v.shape.push_back(static_cast<std::int64_t>(c.meta[l.slot].count));
  for (const auto e : spec.shape) v.shape.push_back(e);  // validate_fields capped the rank
  return v;
}

std::span<const std::uint64_t> batch::extents(std::size_t i) const {
  const auto& l = lease();
  const auto& c = *l.core;
  if (i >= c.fields.size())
    throw pinfeed::out_of_range("batch has no field " + std::to_string(i) + " (it has " +
                                std::to_string(c.fields.size()) + ")");
  if (!c.fields[i].variable)
    throw pinfeed::invalid_argument("batch field '" + c.fields[i].name + "' is not variable-size: it has no extents");
  return {reinterpret_cast<const std::uint64_t*>(c.host_slot(l.slot) + c.field_offset[i]), 2 * c.meta[l.slot].count};
}

tensor_view batch::field(std::string_view name) const {
  const auto& fields = lease().core->fields;
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return field(i);
  throw pinfeed::out_of_range("batch has no field '" + std::string(name) + "'");
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

/// What a DLPack view owns: its slot's lease, its shape, and the stream its reader works on (when
/// it was given one), whose work up to the deleter the slot's next copy must wait for. It holds the
/// managed struct handed out: the classic one, or DLPack 1.x's versioned one.
struct dlpack_holder {
  std::shared_ptr<detail::slot_lease> lease;
  std::vector<std::int64_t> shape;
  std::optional<detail::named_stream> reader_stream;  // as the thread that made the view named it
  DLManagedTensor tensor{};
#if PINFEED_HAS_DLPACK_VERSIONED
  DLManagedTensorVersioned versioned{};
#endif
};

/// The views not deleted yet, by the address of the struct handed out: a second deleter call on a
/// view (a framework's double free) is refused with an error message instead of freeing the holder
/// twice, and the freed struct is never read.
struct live_views {
  std::mutex mutex;
  std::unordered_map<const void*, dlpack_holder*> views;
  static live_views& get() {
    static live_views* v = new live_views;  // never destroyed: deleters may run during exit
    return *v;
  }
};

/// The deleter of every view, classic or versioned: on any thread, at any time (the loader and the
/// batch may be gone).
void delete_view(const void* self) noexcept {
  if (self == nullptr) return;
  std::unique_ptr<dlpack_holder> holder;
  {
    auto& live = live_views::get();
    std::lock_guard lock(live.mutex);
    const auto it = live.views.find(self);
    if (it == live.views.end()) {
      log(log_level::error, "a DLPack view of a pinfeed batch was deleted twice (or was not pinfeed's): the second "
                            "deleter call is ignored");
      return;
    }
    holder.reset(it->second);
    live.views.erase(it);
  }
  if (holder->reader_stream && holder->lease) {
    auto& core = *holder->lease->core;
    try {
      core.fence_after(holder->lease->slot, *holder->reader_stream);
    } catch (...) {  // cuda_error or bad_alloc: nothing may leave a deleter
      // No fence orders the slot's next copy after the reader's work: wait for that work here, on
      // the loader's device (the legacy stream is the current device's).
      try {
        device_guard guard(core.dev.index);
        PINFEED_CUDA_TRY_NOTHROW(cudaStreamSynchronize(detail::stream_here(*holder->reader_stream)));
      } catch (...) {
      }
      log(log_level::error, "DLPack view deleter: the fence on the reader's stream could not be recorded; waited for "
                            "the stream instead");
    }
  }
  // The lease goes with the holder: the slot returns to its loader once no view or batch holds it.
}

void delete_classic(DLManagedTensor* self) noexcept { delete_view(self); }
#if PINFEED_HAS_DLPACK_VERSIONED
void delete_versioned(DLManagedTensorVersioned* self) noexcept { delete_view(self); }
#endif

void fill_tensor(DLTensor& t, const tensor_view& v, dlpack_holder& holder) {
  t.data = v.data;
  const auto& c = *holder.lease->core;
  if (v.location.is_cuda()) t.device = {kDLCUDA, v.location.device};
  else t.device = {c.host[holder.lease->slot].pinned() ? kDLCUDAHost : kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(holder.shape.size());
  t.dtype = to_dl(v.type);
  t.shape = holder.shape.data();
  t.strides = nullptr;  // compact, C order
  t.byte_offset = 0;
}

/// A view of field view `v` of the lease's slot: the classic struct or DLPack 1.x's versioned one.
template <class Managed>
Managed* make_view(const tensor_view& v, std::shared_ptr<detail::slot_lease> lease,
                   std::optional<detail::named_stream> reader_stream) {
  auto holder = std::make_unique<dlpack_holder>();
  holder->lease = std::move(lease);
  holder->reader_stream = reader_stream;
  holder->shape.assign(v.shape.begin(), v.shape.end());
  Managed* m = nullptr;
  if constexpr (std::is_same_v<Managed, DLManagedTensor>) {
    m = &holder->tensor;
    m->deleter = &delete_classic;
  }
#if PINFEED_HAS_DLPACK_VERSIONED
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    m = &holder->versioned;
    m->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;  // the slot is the loader's to write, never the reader's
    m->deleter = &delete_versioned;
  }
#endif
  fill_tensor(m->dl_tensor, v, *holder);
  m->manager_ctx = holder.get();
  {
    auto& live = live_views::get();
    std::lock_guard lock(live.mutex);
    live.views.emplace(m, holder.get());  // may throw bad_alloc: the holder is freed, nothing leaks
  }
  (void)holder.release();  // the view owns it now: its deleter frees it
  return m;
}

/// Makes `reader_stream` wait on the copy of lease `l`'s slot, without the host waiting (inside a
/// capture of it, the host waits); the stream a view's deleter fences, as this thread names it
/// (none on the CPU path: host memory, nothing to order).
std::optional<detail::named_stream> order_reader(const detail::slot_lease& l, cudaStream_t reader_stream) {
  const auto& c = *l.core;
  if (!c.dev.is_cuda()) return std::nullopt;
  device_guard guard(c.dev.index);
  const detail::named_stream named = detail::name_stream(reader_stream);
  detail::wait_for_event(named, c.meta[l.slot].copy_event.get());
  return named;
}

}  // namespace

DLManagedTensor* batch::to_dlpack(std::string_view name) const {
  return make_view<DLManagedTensor>(field(name), lease_, std::nullopt);
}

DLManagedTensor* batch::to_dlpack(std::string_view name, cudaStream_t reader_stream) const {
  return make_view<DLManagedTensor>(field(name), lease_, order_reader(lease(), reader_stream));
}

#if PINFEED_HAS_DLPACK_VERSIONED
DLManagedTensorVersioned* batch::to_dlpack_versioned(std::string_view name) const {
  return make_view<DLManagedTensorVersioned>(field(name), lease_, std::nullopt);
}

DLManagedTensorVersioned* batch::to_dlpack_versioned(std::string_view name, cudaStream_t reader_stream) const {
  return make_view<DLManagedTensorVersioned>(field(name), lease_, order_reader(lease(), reader_stream));
}
#endif

}  // namespace pinfeed
