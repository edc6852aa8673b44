// The sources a Python loop reads (an image folder, a file list, tar shards local or remote, the
// synthetic set, a Python function for small custom data) and the doctor over one of them.
#include <Python.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "binding.hpp"
#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/sources.hpp"
#include "pinfeed/loaders/synthetic.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::python {
namespace {

using field_tuple = std::tuple<std::string, std::string, std::vector<std::int64_t>>;

/// The image sources' options, from keyword arguments (the C++ names).
loaders::image_source_options image_options(const std::string& decode, const std::string& augment_on, const std::string& on_error,
                                            double max_bad_fraction, bool device_tail, std::int64_t max_pixels) {
  loaders::image_source_options o;
  o.source.decode = loaders::parse_decode_place(decode);
  o.source.augment_on = loaders::parse_augment_place(augment_on);
  if (on_error == "fail") o.source.on_error = loaders::error_policy::fail;
  else if (on_error == "skip") o.source.on_error = loaders::error_policy::skip;
  else throw pinfeed::invalid_argument("on_error: 'fail' or 'skip', not '" + on_error + "'");
  o.source.max_bad_fraction = max_bad_fraction;
  o.source.device_tail = device_tail;
  o.decode.max_pixels = max_pixels;
  o.shard.decode.max_pixels = max_pixels;
  return o;
}

/// Copies `value` (an array-like: a numpy array, a torch CPU tensor, a scalar, a list) into
/// sample field `i`, which it must fill exactly; named in the error otherwise.
void write_field(sample& s, std::size_t i, const nb::handle& value) {
  using namespace nb::literals;
  const field_spec& spec = s.spec(i);
  const std::span<std::byte> out = s.bytes(i);
  nb::module_ np = nb::module_::import_("numpy");
  // numpy does the conversions (lists, scalars, other dtypes, tensors through __array__) as
  // ascontiguousarray into the field's dtype would; the bytes are then checked against the field.
  nb::object arr = np.attr("ascontiguousarray")(value, "dtype"_a = std::string(dtype_name(spec.type)) == "bf16"
                                                                      ? nb::object(nb::str("uint16"))
                                                                      : nb::object(np.attr("dtype")(std::string(dtype_name(spec.type)))));
  const auto n = nb::cast<std::size_t>(arr.attr("nbytes"));
  if (n != out.size())
    throw pinfeed::invalid_argument("field '" + spec.name + "' takes " + std::to_string(out.size()) + " bytes a sample (" +
                                    std::to_string(spec.elements()) + " " + std::string(dtype_name(spec.type)) +
                                    "), the function gave " + std::to_string(n) + " (shape " +
                                    std::string(nb::repr(arr.attr("shape")).c_str()) + ")");
  const auto bytes = nb::cast<nb::bytes>(arr.attr("tobytes")());
  std::memcpy(out.data(), bytes.c_str(), n);
}

/// A source of `size` samples whose sample i is fn(i): a dict naming every field. The function
/// runs on the workers, one at a time (it holds the GIL), so it suits small custom data.
py_source callable_source(std::uint64_t size, const std::vector<field_tuple>& fields, nb::callable fn, const std::string& name) {
  std::vector<field_spec> specs;
  for (const auto& [field, type, shape] : fields) specs.push_back({field, parse_dtype(type), shape});
  validate_fields(specs);
  auto held = std::make_shared<gil_held_object>(std::move(fn));
  auto produce = [held, specs](sample& s) {
    nb::gil_scoped_acquire gil;
    try {
      if (!held->get().is_valid())
        throw pinfeed::runtime_error("the source's Python function was collected (its Source object went with a reference cycle)");
      nb::object got = held->get()(s.index());
      if (!nb::isinstance<nb::dict>(got))
        throw pinfeed::invalid_argument("the function gave a " + std::string(nb::repr(nb::handle(got.type())).c_str()) +
                                        " for sample " + std::to_string(s.index()) + ", not a dict of its fields");
      const nb::dict d = nb::borrow<nb::dict>(got);
      for (std::size_t i = 0; i < specs.size(); ++i) {
        if (!d.contains(specs[i].name.c_str()))
          throw pinfeed::invalid_argument("the function's dict for sample " + std::to_string(s.index()) + " has no field '" +
                                          specs[i].name + "'");
        write_field(s, i, d[specs[i].name.c_str()]);
      }
    } catch (nb::python_error& e) {
      throw pinfeed::runtime_error(std::string("the Python function failed: ") + e.what());
    }
  };
  return py_source{make_source(size, std::move(specs), std::move(produce), name), {}, held};
}

// The cyclic garbage collector sees a Source's function (which may reach the Source again through
// its globals), and may clear it where the two are garbage together.
int source_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const py_source* s = nb::inst_ptr<py_source>(self);
  if (s->function && s->function->get().is_valid()) Py_VISIT(s->function->get().ptr());
  return 0;
}
int source_clear(PyObject* self) {
  py_source* s = nb::inst_ptr<py_source>(self);
  if (s->function) s->function->clear();
  return 0;
}
PyType_Slot source_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(source_traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(source_clear)},
                              {0, nullptr}};

}  // namespace

void register_doctor(nb::module_& m);

void register_sources(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<py_source>(m, "Source", "A dataset the loader reads (made by pinfeed.image_folder, file_list, shards, ...).",
                        nb::type_slots(source_slots))
      .def_prop_ro("size", [](const py_source& s) { return s.source->size(); })
      .def_prop_ro("name", [](const py_source& s) { return s.source->name(); })
      .def_prop_ro("classes", [](const py_source& s) { return s.classes; })
      .def_prop_ro("fields", [](const py_source& s) {
        std::vector<field_tuple> out;
        for (const field_spec& f : s.source->fields()) out.emplace_back(f.name, std::string(dtype_name(f.type)), f.shape);
        return out;
      })
      .def("__len__", [](const py_source& s) { return s.source->size(); });
  const auto image_kwargs = [](auto make) {
    return [make](const std::string& where, const std::string& transforms, const std::string& decode, const std::string& augment_on,
                  const std::string& on_error, double max_bad_fraction, bool device_tail, std::int64_t max_pixels) {
      return make(where, transforms, image_options(decode, augment_on, on_error, max_bad_fraction, device_tail, max_pixels));
    };
  };
#define PINFEED_IMAGE_ARGS                                                                                                     \
  "transforms"_a = "", nb::kw_only(), "decode"_a = "host", "augment_on"_a = "auto", "on_error"_a = "fail",                    \
      "max_bad_fraction"_a = 0.0, "device_tail"_a = false, "max_pixels"_a = std::int64_t{1} << 28
  m.def("image_folder",
        image_kwargs([](const std::string& root, const std::string& t, const loaders::image_source_options& o) {
          py_source s{loaders::make_image_folder_source(root, t, o), {}};
          s.classes = loaders::list_image_folder(root).classes;
          return s;
        }),
        "root"_a, PINFEED_IMAGE_ARGS,
        "An ImageFolder dataset (root/<class>/<image>, labels by sorted class) through the pipeline `transforms`.");
  m.def("file_list",
        image_kwargs([](const std::string& list, const std::string& t, const loaders::image_source_options& o) {
          return py_source{loaders::make_file_list_source(list, t, o), {}};
        }),
        "path"_a, PINFEED_IMAGE_ARGS, "A file list ('path label' lines) through the pipeline `transforms`.");
  m.def("shards",
        image_kwargs([](const std::string& pattern, const std::string& t, const loaders::image_source_options& o) {
          return py_source{loaders::make_shard_source(pattern, t, o), {}};
        }),
        "pattern"_a, PINFEED_IMAGE_ARGS, "WebDataset tar shards (a local glob or brace pattern, or http(s):// or s3://).");
#undef PINFEED_IMAGE_ARGS
  m.def("synthetic",
        [](std::uint64_t samples, std::int64_t height, std::int64_t width, std::int64_t classes) {
          return py_source{loaders::make_synthetic_source({samples, height, width, classes}), {}};
        },
        nb::kw_only(), "samples"_a = 10000, "height"_a = 1024, "width"_a = 1024, "classes"_a = 1000,
        "The built-in synthetic set: random uint8 images and int64 labels.");
  m.def("from_function", &callable_source, "size"_a, "fields"_a, "fn"_a, "name"_a = "python function",
        "A source of `size` samples, sample i being fn(i): a dict with every field of `fields` ((name, dtype, shape) each).");
  register_doctor(m);
}

void register_doctor(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "_doctor",
      [](const py_source& s, std::size_t batch_size, std::size_t workers, std::uint64_t seed, const std::string& device, double step_ms,
         std::size_t steps, bool verify, bool per_transform) {
        doctor_options o;
        o.loader.batch_size = batch_size;
        o.loader.workers = workers;
        o.loader.seed = seed;
        o.loader.device = device_spec(device);
        o.step_ms = step_ms;
        o.steps = steps;
        o.verify = verify;
        o.per_transform = per_transform;
        o.command = "pinfeed.doctor (Python)";
        nb::gil_scoped_release release;  // a Python function's source runs on the workers meanwhile
        return doctor(s.source, o);
      },
      "source"_a, "batch_size"_a, "workers"_a, "seed"_a, "device"_a, "step_ms"_a, "steps"_a, "verify"_a, "per_transform"_a);
  nb::class_<doctor_report>(m, "DoctorReport", "What pinfeed's doctor found: the verdict, the stages' costs, the suggestions.")
      .def_ro("verdict", &doctor_report::verdict)
      .def_ro("bottleneck", &doctor_report::bottleneck)
      .def("to_text", &doctor_report::to_text)
      .def("to_json", &doctor_report::to_json)
      .def("to_html", &doctor_report::to_html)
      .def("__str__", &doctor_report::to_text);
}

}  // namespace pinfeed::python
