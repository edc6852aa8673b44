// pinfeed._pinfeed: the errors as Python exceptions of one base (pinfeed.Error), the version and
// the node plan; the sources, the loader and the batches' DLPack fields in their own files.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <exception>
#include <new>
#include <string>

#include "binding.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/ops/sampler.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed::python {
namespace {

/// pinfeed's exception types as Python classes, most derived last: each C++ type maps to the
/// first class whose C++ type it is, tried from the end.
struct error_types {
  PyObject* error = nullptr;
  PyObject *invalid_argument = nullptr, *bad_transform_argument = nullptr, *out_of_range = nullptr, *length_error = nullptr,
           *logic_error = nullptr, *batches_held = nullptr, *runtime_error = nullptr, *cuda_error = nullptr,
           *sample_error = nullptr, *fatal_error = nullptr, *loader_closed = nullptr, *sampler_fault = nullptr;
};
error_types types;

PyObject* new_type(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(bases.size()));
  Py_ssize_t i = 0;
  for (PyObject* b : bases) {
    Py_INCREF(b);
    PyTuple_SetItem(tuple, i++, b);
  }
  const std::string qualified = std::string("pinfeed.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, tuple, nullptr);
  Py_DECREF(tuple);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::borrow(type);  // the module keeps a reference; `types` keeps this one
  return type;
}

void set_error(PyObject* type, const std::exception& e) { PyErr_SetString(type, e.what()); }

}  // namespace

void register_errors(nb::module_& m) {
  types.error = new_type(m, "Error", {PyExc_Exception}, "The base of every error pinfeed raises (MemoryError aside).");
  types.invalid_argument = new_type(m, "InvalidArgument", {types.error, PyExc_ValueError},
                                    "A bad option, argument, name or input text; the message names the value.");
  types.bad_transform_argument = new_type(m, "BadTransformArgument", {types.invalid_argument},
                                          "A pipeline step's bad argument; the message puts a caret under it.");
  types.out_of_range = new_type(m, "OutOfRange", {types.error, PyExc_IndexError}, "An index or position outside what is held.");
  types.length_error = new_type(m, "LengthError", {types.error, PyExc_ValueError}, "A size beyond what pinfeed can hold.");
  types.logic_error = new_type(m, "LogicError", {types.error, PyExc_RuntimeError}, "A call in the wrong state.");
  types.batches_held = new_type(m, "BatchesHeldError", {types.logic_error},
                                "next() while more batches (or their fields) are held than max_batches_in_use allows.");
  types.runtime_error = new_type(m, "RuntimeError", {types.error, PyExc_RuntimeError},
                                 "A failure outside the caller's control: a file, the network, the system.");
  types.cuda_error = new_type(m, "CudaError", {types.runtime_error}, "A CUDA runtime call failed.");
  types.sample_error = new_type(m, "SampleError", {types.runtime_error},
                                "Producing one sample failed; the message names its index, stage and file.");
  types.fatal_error = new_type(m, "FatalError", {types.runtime_error}, "An error that ends the run whatever the bad-sample policy.");
  types.loader_closed = new_type(m, "LoaderClosed", {types.runtime_error}, "The loader was closed while a call waited on it.");
  types.sampler_fault = new_type(m, "SamplerFault", {types.runtime_error}, "The balanced sampler found its input inconsistent.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const loaders::bad_transform_argument& e) {
      set_error(types.bad_transform_argument, e);
    } catch (const pinfeed::invalid_argument& e) {
      set_error(types.invalid_argument, e);
    } catch (const pinfeed::out_of_range& e) {
      set_error(types.out_of_range, e);
    } catch (const pinfeed::length_error& e) {
      set_error(types.length_error, e);
    } catch (const batches_held_error& e) {
      set_error(types.batches_held, e);
    } catch (const pinfeed::logic_error& e) {
      set_error(types.logic_error, e);
    } catch (const cuda_error& e) {
      set_error(types.cuda_error, e);
    } catch (const sample_error& e) {
      // The sample's index, stage and file as attributes, as the C++ type has them.
      try {
        nb::object value = nb::handle(types.sample_error)(e.what());
        value.attr("index") = e.index();
        value.attr("stage") = e.stage();
        value.attr("path") = e.path();
        PyErr_SetObject(types.sample_error, value.ptr());
      } catch (nb::python_error& failed) {
        failed.restore();  // making it failed: that error is the one in flight
      }
    } catch (const fatal_error& e) {
      set_error(types.fatal_error, e);
    } catch (const loader_closed& e) {
      set_error(types.loader_closed, e);
    } catch (const ops::sampler_fault& e) {
      set_error(types.sampler_fault, e);
    } catch (const pinfeed::runtime_error& e) {
      set_error(types.runtime_error, e);
    }
    // Anything else (std::bad_alloc as MemoryError, nb::python_error, the standard exceptions) is
    // left to nanobind's own translators: rethrown from here, it reaches them.
  });
}

gil_held_object::~gil_held_object() {
  if (!object_.is_valid() || !Py_IsInitialized()) {
    (void)object_.release();  // the interpreter is gone: nothing to let go of
    return;
  }
  nb::gil_scoped_acquire gil;
  object_.reset();
}

std::string take_python_error() {
  const nb::python_error e;  // takes the error in flight (and lets it go at the end)
  return e.what();
}

}  // namespace pinfeed::python

NB_MODULE(_pinfeed, m) {
  namespace nb = nanobind;
  using namespace pinfeed::python;
  m.doc() = "pinfeed's C++ runtime: sources, the loader, batches as DLPack fields, the doctor (the pinfeed package wraps it)";
  m.attr("__version__") = PINFEED_VERSION_STRING;
  register_errors(m);
  register_sources(m);
  register_loader(m);
  register_views(m);
  m.def("node_plan_json", [] { return pinfeed::this_node_plan().to_json(); },
        "This process's node plan (cores, memory, local ranks, GPU locality) as JSON, each number with its source.");
}
