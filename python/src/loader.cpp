// pinfeed.Loader: the C++ loader over a source, with the GIL released while it waits and Ctrl-C
// ending a wait (loader_options::interrupt checks the signals); batches as pinfeed.Batch.
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <oneapi/tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "binding.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed::python {
namespace {

/// The message a loader's call gives in a process forked from the one that started it.
std::string forked_message(pid_t owner) {
  return "loader: this process (pid " + std::to_string(::getpid()) + ") was forked from the one that started the loader (pid " +
         std::to_string(owner) +
         "); its workers are threads, which a fork does not copy: make the loader in the new process (multiprocessing's "
         "'spawn' or 'forkserver'), or fork before making it";
}

/// The loader and what must outlive it: its source (and with it a Python function, let go with
/// the GIL held after the loader's threads have stopped). In a process forked after it started,
/// every call is refused, and nothing of it is torn down there (its threads, and any lock one of
/// them held at the fork, are not in that process): the copies are left as they are.
class py_loader {
 public:
  py_loader(const py_source& src, loader_options o) : owner_(::getpid()), source_(src.source) {
    // The process is Python's, and the loader never raises TBB's thread cap (the hardware threads,
    // one of them the caller's): as the pinfeed tool does, this layer holds a cap of the workers
    // asked for (one a hardware thread for 0 or auto) plus the calling thread while it lives.
    const std::size_t hardware = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t asked = o.workers == 0 || o.workers == auto_tune ? hardware : std::max(o.workers, hardware);
    cap_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, asked + 1);
    // Ctrl-C while next() waits: the signal's handler runs here, on the consumer's thread, and
    // its exception (KeyboardInterrupt) leaves next() with nothing consumed.
    o.interrupt = [] {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    };
    nb::gil_scoped_release release;  // a Python function's source may be called while the loader starts
    loader_ = std::make_unique<loader>(source_, std::move(o));
  }
  py_loader(const py_loader&) = delete;
  py_loader& operator=(const py_loader&) = delete;
  ~py_loader() { close(); }

  /// Stops the loader (its workers may wait for the GIL: it is released meanwhile).
  void close() {
    if (forked()) {
      leave_copies();
      return;
    }
    if (!loader_) return;
    nb::gil_scoped_release release;
    loader_.reset();
  }
  loader& get() {
    if (forked()) throw pinfeed::logic_error(forked_message(owner_));
    if (!loader_) throw pinfeed::logic_error("loader: closed");
    return *loader_;
  }
  [[nodiscard]] bool forked() const noexcept { return ::getpid() != owner_; }
  std::optional<py_batch> next() {
    loader& l = get();
    std::optional<batch> b;
    {
      nb::gil_scoped_release release;
      b = l.next();
    }
    if (!b) return std::nullopt;
    // A batch (and its fields) let go in a forked process is left there: its slot's return would
    // take the ring's lock, which a worker may have held at the fork.
    const pid_t owner = owner_;
    return py_batch{std::shared_ptr<batch>(new batch(std::move(*b)), [owner](batch* p) {
      if (::getpid() == owner) delete p;
    })};
  }

 private:
  /// In a forked process: the loader, its source and the thread cap are copies whose threads
  /// and locks are not here; they are let go without running their destructors.
  void leave_copies() noexcept {
    (void)loader_.release();
    (void)cap_.release();
    (void)new std::shared_ptr<source>(std::move(source_));
  }

  pid_t owner_;
  std::unique_ptr<tbb::global_control> cap_;  // outlives the loader
  std::shared_ptr<source> source_;
  std::unique_ptr<loader> loader_;
};

/// workers / prefetch from Python: a count, or "auto".
std::size_t count_or_auto(const nb::object& v, const char* what) {
  if (nb::isinstance<nb::str>(v)) {
    if (nb::cast<std::string>(v) == "auto") return auto_tune;
    throw pinfeed::invalid_argument(std::string(what) + ": a count or 'auto', not '" + nb::cast<std::string>(v) + "'");
  }
  const auto n = nb::cast<std::int64_t>(v);
  if (n < 0) throw pinfeed::invalid_argument(std::string(what) + ": a count or 'auto', not " + std::to_string(n));
  return static_cast<std::size_t>(n);
}

/// The loader's counters as a dict: the totals, the rates, and each stage's count and times.
nb::dict stats_dict(const stats_snapshot& s) {
  nb::dict d;
  d["batches"] = s.batches;
  d["samples"] = s.samples;
  d["bytes"] = s.bytes;
  d["errors"] = s.errors;
  d["bad_samples"] = s.bad_samples;
  d["replaced"] = s.replaced;
  d["decode_warnings"] = s.decode_warnings;
  d["wall_s"] = static_cast<double>(s.wall_ns) * 1e-9;
  d["samples_per_s"] = s.samples_per_s();
  d["consumer_wait"] = s.consumer_wait_fraction();
  d["host_bytes"] = s.host_bytes;
  d["device_bytes"] = s.device_bytes;
  nb::dict stages;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const stage_totals& t = s.stages[i];
    nb::dict one;
    one["count"] = t.count;
    one["total_ms"] = t.total_ms();
    one["mean_ms"] = t.mean_ms();
    one["max_ms"] = static_cast<double>(t.max_ns) * 1e-6;
    stages[to_string(static_cast<stage>(i)).c_str()] = one;
  }
  d["stages"] = stages;
  return d;
}

const batch& live(const py_batch& b) {
  if (!b.batch || !*b.batch) throw pinfeed::logic_error("batch: released");
  return *b.batch;
}

void register_batch(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<py_batch>(m, "Batch", "One batch: fields by name (pinfeed.Field, for from_dlpack), its index, epoch and samples.")
      .def_prop_ro("index", [](const py_batch& b) { return live(b).index(); })
      .def_prop_ro("epoch", [](const py_batch& b) { return live(b).epoch(); })
      .def_prop_ro("indices", [](const py_batch& b) {
        const auto s = live(b).indices();
        return std::vector<std::uint64_t>(s.begin(), s.end());
      })
      .def("__len__", [](const py_batch& b) { return live(b).size(); })
      .def("__getitem__", &field_of, "name"_a, "Field `name` (a pinfeed.Field: numpy.from_dlpack and torch.from_dlpack take it).")
      .def("__contains__", [](const py_batch& b, const std::string& name) {
        for (std::size_t i = 0; i < live(b).field_count(); ++i)
          if (live(b).spec(i).name == name) return true;
        return false;
      })
      .def("keys", [](const py_batch& b) {
        std::vector<std::string> names;
        for (std::size_t i = 0; i < live(b).field_count(); ++i) names.push_back(live(b).spec(i).name);
        return names;
      })
      .def("checksum_line", [](const py_batch& b) { return checksum_line(live(b)); },
           "The batch's line as `pinfeed run --checksums` prints it.")
      .def_prop_ro("released", [](const py_batch& b) { return !b.batch || !*b.batch; })
      .def("release", [](py_batch& b) { b.batch.reset(); },
           "Lets the batch go (its fields and the tensors made from them keep the slot until they go too).");
}

}  // namespace

void register_loader(nb::module_& m) {
  using namespace nb::literals;
  register_batch(m);
  nb::class_<py_loader>(m, "_Loader")
      .def(
          "__init__",
          [](py_loader* self, const py_source& src, std::size_t batch_size, const nb::object& workers, const nb::object& prefetch,
             std::uint64_t seed, std::uint32_t epoch, const std::string& device, bool shuffle, bool drop_last, int rank, int world,
             bool drop_remainder, std::size_t max_batches_in_use, std::optional<std::uint64_t> memory_budget) {
            loader_options o;
            o.batch_size = batch_size;
            o.workers = count_or_auto(workers, "workers");
            o.prefetch = count_or_auto(prefetch, "prefetch");
            o.seed = seed;
            o.epoch = epoch;
            o.device = device_spec(device);
            o.order.shuffle = shuffle;
            o.drop_last = drop_last;
            o.order.rank = rank;
            o.order.world = world;
            o.order.drop_remainder = drop_remainder;
            o.max_batches_in_use = max_batches_in_use;
            o.memory_budget = memory_budget;
            new (self) py_loader(src, std::move(o));
          },
          "source"_a, "batch_size"_a, "workers"_a, "prefetch"_a, "seed"_a, "epoch"_a, "device"_a, "shuffle"_a, "drop_last"_a, "rank"_a,
          "world"_a, "drop_remainder"_a, "max_batches_in_use"_a, "memory_budget"_a.none())
      .def("next", &py_loader::next, "The next batch of the epoch, or None at its end (the GIL released while it waits).")
      .def("start_epoch", [](py_loader& l, std::uint32_t e) { l.get().start_epoch(e); }, "epoch"_a)
      .def("restart_epoch", [](py_loader& l, std::uint32_t e, std::uint64_t first) { l.get().start_epoch(e, first); }, "epoch"_a,
           "first_batch"_a = 0)
      .def("state", [](py_loader& l) { return l.get().state(); })
      .def("resume", [](py_loader& l, const std::string& s) { l.get().resume(s); }, "state"_a)
      .def_prop_ro("epoch", [](py_loader& l) { return l.get().epoch(); })
      .def_prop_ro("next_batch", [](py_loader& l) { return l.get().next_batch(); })
      .def_prop_ro("batches_per_epoch", [](py_loader& l) { return l.get().batches_per_epoch(); })
      .def_prop_ro("device", [](py_loader& l) { return l.get().device().to_string(); })
      .def_prop_ro("stream", [](py_loader& l) { return reinterpret_cast<std::uintptr_t>(l.get().stream()); })
      .def_prop_ro("workers", [](py_loader& l) { return l.get().workers(); })
      .def_prop_ro("prefetch", [](py_loader& l) { return l.get().prefetch(); })
      .def("stats", [](py_loader& l) { return stats_dict(l.get().stats()); })
      .def("stats_summary", [](py_loader& l) { return l.get().stats().summary(); })
      .def("tuning_json", [](py_loader& l) { return l.get().tuning(false).to_json(); })
      .def("reset_stats", [](py_loader& l) { l.get().reset_stats(); })
      .def("close", &py_loader::close);
}

}  // namespace pinfeed::python
