// A batch's field as a DLPack producer (the array API's __dlpack__ / __dlpack_device__): numpy's
// and torch's from_dlpack take it without a copy. Each capsule holds the batch's slot until the
// framework frees its tensor (the capsule's deleter, from any thread); on a GPU it is ordered on
// the stream the consumer names, with no host synchronisation (batch::to_dlpack(name, stream)).
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "binding.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::python {
namespace {

/// The batch's memory as DLPack names it, pinned host memory counted as the CPU's (numpy takes
/// only kDLCPU, and pinned memory is the host's to read).
std::pair<int, int> device_of(const pinfeed::batch& b) {
  const memory_location where = b.location();
  if (where.is_cuda()) return {kDLCUDA, where.device};
  return {kDLCPU, 0};
}

const pinfeed::batch& live(const py_field& f) {
  if (!f.batch || !*f.batch)
    throw pinfeed::logic_error("field '" + f.name + "': its batch was released (take the field before releasing the batch)");
  return *f.batch;
}

/// The stream a consumer names (__dlpack__'s `stream`): DLPack's integers for CUDA (None or 1 the
/// legacy default stream, 2 the per-thread one, -1 no ordering: the loader's consumer stream,
/// which the consumer then orders itself, any other a cudaStream_t). nullopt: no stream to wait on.
std::optional<cudaStream_t> consumer_stream(const nb::object& stream, int device_type, const std::string& name) {
  if (device_type != kDLCUDA) {
    if (!stream.is_none() && nb::cast<std::int64_t>(stream) != -1)
      throw pinfeed::invalid_argument("field '" + name + "' is in host memory: __dlpack__ takes no stream (given " +
                                      std::string(nb::repr(stream).c_str()) + ")");
    return std::nullopt;
  }
  const std::int64_t s = stream.is_none() ? 1 : nb::cast<std::int64_t>(stream);
  if (s == -1) return std::nullopt;
  if (s == 0)
    throw pinfeed::invalid_argument("field '" + name + "': stream 0 is ambiguous in DLPack (use 1 for the legacy default stream)");
  return reinterpret_cast<cudaStream_t>(static_cast<std::intptr_t>(s));
}

template <class Managed>
void delete_unconsumed(PyObject* capsule, const char* name) {
  // A capsule a framework took is renamed "used_..."; one never taken still owns its tensor.
  if (PyCapsule_IsValid(capsule, name) == 0) return;
  auto* t = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (t != nullptr && t->deleter != nullptr) t->deleter(t);
}
void delete_classic(PyObject* capsule) { delete_unconsumed<DLManagedTensor>(capsule, "dltensor"); }
#if PINFEED_HAS_DLPACK_VERSIONED
void delete_versioned(PyObject* capsule) { delete_unconsumed<DLManagedTensorVersioned>(capsule, "dltensor_versioned"); }
#endif

/// The view as a capsule named `name` (pinned host memory named the CPU's); the view is deleted
/// if the capsule cannot be made.
template <class Managed>
nb::object capsule_of(Managed* t, const char* name, PyCapsule_Destructor destructor) {
  if (t->dl_tensor.device.device_type == kDLCUDAHost) t->dl_tensor.device = DLDevice{kDLCPU, 0};
  PyObject* capsule = PyCapsule_New(t, name, destructor);
  if (capsule == nullptr) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

nb::object to_capsule(const py_field& f, const nb::object& stream, const nb::object& max_version, const nb::object& dl_device,
                      const nb::object& copy) {
  const pinfeed::batch& b = live(f);
  const auto [type, index] = device_of(b);
  if (!copy.is_none() && nb::cast<bool>(copy))
    throw nb::buffer_error(("field '" + f.name + "': pinfeed hands out its slot without a copy (copy=True refused; copy "
                            "the tensor the framework makes, or use pinfeed.torch's copy=True)").c_str());
  if (!dl_device.is_none()) {
    const auto want = nb::cast<std::pair<int, int>>(dl_device);
    if (want.first != type || want.second != index)
      throw nb::buffer_error(("field '" + f.name + "' lives on device (" + std::to_string(type) + ", " + std::to_string(index) +
                              "), not on the one asked for (" + std::to_string(want.first) + ", " + std::to_string(want.second) + ")")
                                 .c_str());
  }
  const std::optional<cudaStream_t> reader = consumer_stream(stream, type, f.name);
  bool versioned = false;
  if (!max_version.is_none()) versioned = nb::cast<std::pair<int, int>>(max_version).first >= 1;
#if PINFEED_HAS_DLPACK_VERSIONED
  if (versioned)
    return capsule_of(reader ? b.to_dlpack_versioned(f.name, *reader) : b.to_dlpack_versioned(f.name), "dltensor_versioned",
                      delete_versioned);
#else
  (void)versioned;
#endif
  return capsule_of(reader ? b.to_dlpack(f.name, *reader) : b.to_dlpack(f.name), "dltensor", delete_classic);
}

}  // namespace

void register_views(nb::module_& m) {
  nb::class_<py_field>(m, "Field",
                       "One field of a batch, for numpy.from_dlpack / torch.from_dlpack (no copy). It keeps the batch's slot "
                       "while it or a tensor made from it lives.")
      .def_prop_ro("name", [](const py_field& f) { return f.name; })
      .def("__dlpack__", &to_capsule, nb::kw_only(), nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(),
           nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none(),
           "A DLPack capsule of the field (versioned where max_version asks for 1.x), ordered on `stream`.")
      .def("__dlpack_device__", [](const py_field& f) { return device_of(live(f)); })
      .def("__repr__", [](const py_field& f) {
        const auto [type, index] = f.batch && *f.batch ? device_of(*f.batch) : std::pair<int, int>{-1, -1};
        return "<pinfeed.Field '" + f.name + "' on (" + std::to_string(type) + ", " + std::to_string(index) + ")>";
      });
}

py_field field_of(const py_batch& b, const std::string& name) {
  if (!b.batch || !*b.batch) throw pinfeed::logic_error("batch: released (take its fields before releasing it)");
  (void)b.batch->field(name);  // throws out_of_range naming an absent field
  return py_field{b.batch, name};
}

}  // namespace pinfeed::python
