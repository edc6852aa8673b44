#pragma once
// What the module's files share: the registration of each part, the Python objects that wrap
// pinfeed's (a source, a batch and its fields), and holding a Python object from C++ threads.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "pinfeed/runtime/batch.hpp"
#include "pinfeed/runtime/source.hpp"

namespace pinfeed::python {
namespace nb = nanobind;

void register_errors(nb::module_& m);
void register_sources(nb::module_& m);
void register_loader(nb::module_& m);
void register_views(nb::module_& m);

/// A source as Python holds it (every factory returns one); `classes` names the labels where the
/// source knows them (an image folder's class folders, sorted).
class gil_held_object;
struct py_source {
  std::shared_ptr<pinfeed::source> source;
  std::vector<std::string> classes;
  /// A function's source (from_function): its function, which the source's workers call.
  std::shared_ptr<gil_held_object> function;
};

/// A batch handed to Python: the batch is shared with the fields taken from it, so that a field
/// (and every DLPack capsule made of it) keeps the slot after the batch is released.
struct py_batch {
  std::shared_ptr<pinfeed::batch> batch;
};

/// One field of one batch (it keeps the batch, so its slot, while it lives): a DLPack producer.
struct py_field {
  std::shared_ptr<pinfeed::batch> batch;
  std::string name;
};
/// Field `name` of a batch; throws naming a released batch or an absent field.
[[nodiscard]] py_field field_of(const py_batch& b, const std::string& name);

/// A Python object held by C++ (a callable source's function) whose last reference may go on a
/// thread without the GIL (a worker, a framework freeing a tensor): it takes the GIL to let go.
class gil_held_object {
 public:
  explicit gil_held_object(nb::object o) : object_(std::move(o)) {}
  gil_held_object(const gil_held_object&) = delete;
  gil_held_object& operator=(const gil_held_object&) = delete;
  ~gil_held_object();
  [[nodiscard]] const nb::object& get() const noexcept { return object_; }
  /// Lets the object go now (the GIL held): the garbage collector breaking a cycle.
  void clear() noexcept { object_.reset(); }

 private:
  nb::object object_;
};

/// The message of the Python exception in flight (its type and text), clearing it; the GIL held.
[[nodiscard]] std::string take_python_error();

}  // namespace pinfeed::python
