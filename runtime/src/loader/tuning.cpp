// auto_tune's measuring windows: next() counts each batch's wait into the current window, and a
// window of at least 0.25 s and 4 batches is judged by detail::auto_tuner, which may move the
// workers and the prefetch (allocating slots as it grows).
#include <algorithm>

#include "loader_impl.hpp"
#include "pinfeed/runtime/host_info.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {

void loader::impl::count_take(std::size_t slot, std::uint64_t wait_from) {
  try {
    if (window_start_ns == 0) {
      start_window();
    } else if (epoch_fresh) {
      // Between epochs the trainer may evaluate or checkpoint, and the first batch waits for the
      // pipeline to fill: neither is the loader's pace.
      window_excluded_ns += now_ns() - last_take_ns;
    } else {
      window_wait_ns += now_ns() - wait_from;
      window_samples += core->meta[slot].count;
      ++window_batches;
      judge_window();
    }
  } catch (const std::exception& e) {  // tuning is best effort: the batch is delivered all the same
    log(log_level::warn, std::string("loader: auto_tune: ") + e.what());
  }
  epoch_fresh = false;
  last_take_ns = now_ns();
}

void loader::impl::start_window() {
  window_start_ns = now_ns();
  window_wait_ns = window_samples = window_batches = window_excluded_ns = 0;
  window_cpu_s = process_cpu_seconds();
}

void loader::impl::judge_window() {
  const double seconds = 1e-9 * static_cast<double>(now_ns() - window_start_ns - window_excluded_ns);
  if (seconds < 0.25 || window_batches < 4) return;
  const detail::tuner_window w{seconds, 1e-9 * static_cast<double>(window_wait_ns),
                               (process_cpu_seconds() - window_cpu_s) / seconds, static_cast<double>(place.cores),
                               window_samples};
  const std::size_t prefetch_before = tuner->prefetch(), workers_before = tuner->workers();
  if (tuner->judge(w)) {
    pool->set_workers(tuner->workers());
    if (tuner->prefetch() != prefetch_before) {
      const std::size_t slots = tuner->prefetch() + core->options.max_batches_in_use;
      try {
        core->allocate_slots(slots);
        core->ring.set_usable(slots);
      } catch (const std::exception& e) {  // within the budget, but the system refused: go on as it was
        tuner->refuse_prefetch(prefetch_before);
        log(log_level::warn, std::string("loader: auto_tune keeps prefetch ") + std::to_string(prefetch_before) + ": " + e.what());
      }
    }
    log(log_level::debug, "loader: auto_tune: " + tuner->reason());
  }
  // Changed: what the loader runs with now differs (a refused growth of prefetch is no change).
  record_window(w, tuner->workers() != workers_before || tuner->prefetch() != prefetch_before);
  if (tuner->settled() && !tuning_logged) {
    tuning_logged = true;
    log(log_level::info, "loader: auto_tune settled on " + std::to_string(tuner->workers()) + " workers (of " +
                             std::to_string(pool->most()) + "), prefetch " + std::to_string(tuner->prefetch()) + " (of " +
                             std::to_string(core->prefetch_most()) + ") after " + std::to_string(tuner->windows()) +
                             " windows: " + tuner->reason());
  }
  start_window();
}

void loader::impl::record_window(const detail::tuner_window& w, bool changed) {
  constexpr std::size_t first = tuning_report::kPathWindows;
  if (tuning_path.size() >= first && (!changed || tuning_path.size() >= 2 * first)) return;
  tuning_report::window x;
  x.index = tuner->windows();
  x.seconds = w.seconds;
  x.images_per_s = w.seconds > 0 ? static_cast<double>(w.samples) / w.seconds : 0;
  x.consumer_wait = w.seconds > 0 ? std::min(1.0, w.consumer_wait_s / w.seconds) : 0;
  x.cpu_utilization = w.cores > 0 ? std::min(1.0, w.busy_cores / w.cores) : 0;
  x.workers = tuner->workers();
  x.prefetch = tuner->prefetch();
  x.changed = changed;
  x.reason = tuner->reason();
  tuning_path.push_back(std::move(x));
}

loader::tuning_report loader::tuning(bool with_path) const {
  const auto& im = *impl_;
  tuning_report r;
  r.workers = workers();
  r.prefetch = prefetch();
  r.workers_most = im.pool->most();
  r.prefetch_most = im.core->prefetch_most();
  if (!im.tuner) {
    r.settled = true;
    r.reason = "fixed by the options";
    return r;
  }
  r.workers_auto = im.tuner->limits().workers;
  r.prefetch_auto = im.tuner->limits().prefetch;
  r.windows = im.tuner->windows();
  r.changes = im.tuner->changes();
  r.settled = im.tuner->settled();
  r.reason = im.tuner->reason();
  if (with_path) r.path = im.tuning_path;
  return r;
}

}  // namespace pinfeed
