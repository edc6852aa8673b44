// The loader's wiring: its parts (loader_impl.hpp lists a file per job) made and started in
// order, stopped in order, and the public members that reach them.
#include "pinfeed/runtime/loader.hpp"

#include <system_error>
#include <thread>

#include "loader/loader_impl.hpp"
#include "pinfeed/runtime/cuda_handles.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/stats.hpp"

namespace pinfeed {

namespace detail {
std::atomic<std::uint64_t> last_pass{0};
}  // namespace detail

loader::impl::impl(std::shared_ptr<source> s, loader_options o)
    : src(std::move(s)),
      dataset_size(0),
      batches(0),
      device((validate(o), resolve_device(o.device))),
      place(detail::place_of(o, device)) {
  const std::size_t worker_most =
      o.workers == auto_tune ? detail::planned_workers(place) : detail::effective_workers(o.workers, place);
  if (!src) throw pinfeed::invalid_argument("loader needs a source, got a null pointer");
  dataset_size = src->size();
  if (dataset_size == 0) throw pinfeed::invalid_argument("source '" + src->name() + "' has no samples");
  src->on_loader(device);
  auto fields = src->fields();
  validate_fields(fields);
  if (o.order.shuffle && !o.order.groups) o.order.groups = src->groups();
  order.emplace(dataset_size, o.seed, o.order);
  const std::uint64_t per_epoch = order->size();
  batches = detail::batches_in(per_epoch, o);
  if (batches == 0)
    throw pinfeed::invalid_argument("source '" + src->name() + "' gives this rank " + std::to_string(per_epoch) +
                                " samples per epoch, fewer than batch_size " + std::to_string(o.batch_size) +
                                " with drop_last set: an epoch would be empty");
  if (o.after_copy && !device.is_cuda())
    throw pinfeed::invalid_argument("loader option after_copy hooks the host-to-device copy, but batches stay on the " +
                                device.to_string() + ": nothing is copied");
  detail::slot_plan plan = detail::plan_slots(o, fields, device.is_cuda(), *src);
  const std::size_t first_prefetch = plan.prefetch;
  core = std::make_shared<detail::loader_core>(o, std::move(fields), device, std::move(plan), place.numa_node);
  core->ring.set_usable(first_prefetch + o.max_batches_in_use);
  const bool workers_auto = o.workers == auto_tune, prefetch_auto = o.prefetch == auto_tune;
  // auto starts where a fixed 0 stays: as many workers as TBB allows.
  pool.emplace(worker_most, place.cpus, [this](const detail::chunk& c) { run_chunk(c); });
  if (workers_auto || prefetch_auto)
    tuner.emplace(detail::auto_tuner::bounds{workers_auto, prefetch_auto, worker_most, core->prefetch_most()},
                  worker_most, first_prefetch);
  epoch = o.epoch;
}

void loader::impl::start(std::uint32_t e, std::uint64_t first_batch) {
  const std::uint64_t in_epoch = detail::batches_in(order->size(e), core->options);
  if (first_batch > in_epoch)
    throw pinfeed::out_of_range("start batch " + std::to_string(first_batch) + " is past the epoch's " +
                            std::to_string(in_epoch) + " batches");
  cancel();
  batches = in_epoch;
  epoch = e;
  next_batch = first_batch;
  seq_base = next_seq;
  next_seq += batches;
  pass = detail::last_pass.fetch_add(1, std::memory_order_relaxed) + 1;  // (the tasks of the last start are done)
  epoch_fresh = true;
  feeder_error = nullptr;
  try {
    feeder = std::thread([this, e, first_batch, base = seq_base] { feed(e, first_batch, base); });
  } catch (const std::system_error& x) {  // (no thread to be had: a limit of the system, not a bug)
    throw pinfeed::runtime_error(std::string("loader: could not start the feeder thread (the system has no memory or "
                                             "threads left for one): ") + x.what());
  }
  started = true;  // (not before: without a feeder, next() would wait for batches nobody fills)
}

void loader::impl::cancel() noexcept {
  if (!started) return;
  stopping.store(true, std::memory_order_release);
  core->ring.close();
  if (feeder.joinable()) feeder.join();
  pool->quiesce();  // every chunk has run (doing nothing while stopping) or was given up
  if (core->dev.is_cuda()) {
    try {
      device_guard guard(core->dev.index);
      core->drain(core->copy_stream.get());
    } catch (const std::exception& e) {
      log(log_level::error, std::string("cancelling copies: ") + e.what());
    }
  }
  core->ring.reopen();
  stopping.store(false, std::memory_order_release);
  started = false;
}

loader::loader(std::shared_ptr<source> src, loader_options options)
    : impl_(std::make_unique<impl>(std::move(src), std::move(options))) {}
loader::loader(loader&&) noexcept = default;
loader& loader::operator=(loader&&) noexcept = default;
loader::~loader() = default;

std::optional<batch> loader::next() { return impl_->next(); }
void loader::start_epoch(std::uint32_t epoch) {
  if (impl_->positioned && impl_->epoch == epoch) return;  // resumed (or just started) there: keep it
  start_epoch(epoch, 0);
}
void loader::start_epoch(std::uint32_t epoch, std::uint64_t first_batch) {
  const std::uint64_t whole = detail::batches_in(impl_->order->size(), impl_->core->options);
  if (first_batch > whole)  // before anything changes: a refused start leaves the loader as it was
    throw pinfeed::out_of_range("start batch " + std::to_string(first_batch) + " is past the epoch's " +
                            std::to_string(whole) + " batches");
  impl_->cancel();  // no worker reads the order while it changes
  impl_->order->unrestrict();
  impl_->start(epoch, first_batch);
  impl_->positioned = true;
}
std::uint32_t loader::epoch() const noexcept { return impl_->epoch; }
std::uint64_t loader::next_batch() const noexcept { return impl_->next_batch; }
std::uint64_t loader::batches_per_epoch() const noexcept { return impl_->batches; }
const epoch_order& loader::order() const noexcept { return *impl_->order; }

const std::vector<field_spec>& loader::fields() const noexcept { return impl_->core->fields; }
const loader_options& loader::options() const noexcept { return impl_->core->options; }
device_choice loader::device() const noexcept { return impl_->core->dev; }
cudaStream_t loader::stream() const noexcept { return impl_->core->consumer_stream; }
std::size_t loader::slots() const noexcept { return impl_->core->ring.size(); }
std::size_t loader::slot_bytes() const noexcept { return impl_->core->host_slot_bytes; }
std::size_t loader::device_slot_bytes() const noexcept { return impl_->core->dev.is_cuda() ? impl_->core->slot_bytes : 0; }
std::size_t loader::host_bytes() const noexcept { return impl_->core->allocated_bytes(); }
std::size_t loader::device_bytes() const noexcept { return impl_->core->allocated() * device_slot_bytes(); }
std::size_t loader::workers() const noexcept {
  return impl_->pool->workers();
}
std::size_t loader::prefetch() const noexcept {
  return impl_->core->ring.usable() - impl_->core->options.max_batches_in_use;
}

stats_snapshot loader::stats() const {
  const auto& c = *impl_->core;
  stats_snapshot s = c.stats.snapshot();
  const std::uint64_t first = c.first_take_ns.load();
  s.wall_ns = first ? now_ns() - first : 0;
  s.host_bytes = host_bytes();
  s.device_bytes = device_bytes();
  return s;
}

void loader::reset_stats() {
  impl_->core->stats.reset();
  impl_->core->first_take_ns.store(0);
}

const trace_recorder* loader::trace() const noexcept { return impl_->core->trace.get(); }

void loader::write_trace(const std::string& path) const {
  if (!impl_->core->trace) throw pinfeed::logic_error("tracing is off: set loader_options::trace to record one");
  impl_->core->trace->write(path);
}

}  // namespace pinfeed
