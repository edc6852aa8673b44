// The transfer loop (transfer_loop.hpp): a libcurl multi handle on a thread of its own.
#include "remote/transfer_loop.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <system_error>

#include <pthread.h>
#include <sched.h>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/node_plan.hpp"
#include "remote/retry.hpp"

namespace pinfeed::loaders::remote {

void tune_thread(const char* name, bool batch) noexcept {
#if defined(__linux__)
  (void)pthread_setname_np(pthread_self(), name);
  if (batch) {
    sched_param none{};
    none.sched_priority = 0;
    (void)sched_setscheduler(0, SCHED_BATCH, &none);  // 0: this thread
  }
#else
  (void)name;
  (void)batch;
#endif
}

transfer_loop::transfer_loop(const remote_options& o, request_counters& c)
    : o_(o),
      counters_(c),
      jitter_(static_cast<unsigned>(std::hash<const void*>{}(this))),
      cap_(o.requests_in_flight.value_or(kMinRequestsInFlight)) {
  curl_init_once();
  multi_ = curl_multi_init();
  if (multi_ == nullptr) throw std::bad_alloc();  // (libcurl's only reason for no handle)
  // One connection a transfer, no HTTP/2 multiplexing, whose one connection would carry (and,
  // reset, fail) every request in flight. Room to keep open more than run under the cap: urgent
  // requests run past it, and a connection closed for want of room is a new one (a handshake,
  // and at a proxy a new session) for the next request.
  curl_multi_setopt(multi_, CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_NOTHING));
  // (run() sets it again whenever the cap changes.)
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(2 * cap()));
  connections_for_ = cap();
  try {  // (a constructor that throws runs no destructor: the multi handle is given back here)
    running_.reserve(2 * cap());
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& x) {
    curl_multi_cleanup(multi_);
    throw pinfeed::runtime_error(std::string("remote reader: could not start the transfer thread (the system has no "
                                             "memory or threads left for one): ") + x.what());
  } catch (...) {
    curl_multi_cleanup(multi_);
    throw;
  }
}

void transfer_loop::submit(const endpoint& e, const request& q, done_fn done, bool urgent) {
  auto j = std::make_unique<job>();
  j->e = e;
  j->q = q;
  j->done = std::move(done);
  j->urgent = urgent;
  // The multi handle is freed only once stopping_ is set (under m_), so waking it here is safe.
  std::lock_guard lock(m_);
  if (stopping_) throw cancelled("cancelled");
  (urgent ? urgent_ : queue_).push_back(std::move(j));
  curl_multi_wakeup(multi_);
}

std::future<response> transfer_loop::submit(const endpoint& e, const request& q, bool urgent) {
  auto p = std::make_shared<std::promise<response>>();
  auto f = p->get_future();
  submit(e, q, [p](response&& r, std::exception_ptr error) {
    if (error) p->set_exception(error);
    else p->set_value(std::move(r));
  }, urgent);
  return f;
}

void transfer_loop::set_cap(std::size_t n) {
  cap_.store(std::clamp<std::size_t>(n, 1, kMaxRequestsInFlight), std::memory_order_relaxed);
  std::lock_guard lock(m_);
  if (!stopping_) curl_multi_wakeup(multi_);
}

void transfer_loop::recycle(std::vector<std::byte> buffer) noexcept {
  if (buffer.capacity() == 0) return;
  buffer.clear();
  std::lock_guard lock(pool_m_);
  if (pool_.size() >= cap()) return;
  try {
    pool_.push_back(std::move(buffer));
  } catch (...) {  // not kept: freed here
  }
}

void transfer_loop::fail_queued(std::exception_ptr error) {
  std::lock_guard lock(m_);
  if (stopping_ || failed_) return;
  failed_ = std::move(error);
  curl_multi_wakeup(multi_);
}

void transfer_loop::shutdown() noexcept {
  {
    std::lock_guard lock(m_);
    if (stopping_) return;
    stopping_ = true;
    curl_multi_wakeup(multi_);
  }
  thread_.join();
  for (CURL* h : idle_) curl_easy_cleanup(h);
  idle_.clear();
  curl_multi_cleanup(multi_);
}

std::unique_ptr<transfer_loop::job> transfer_loop::next_job(transfer_loop::clock::time_point now, bool all) noexcept {
  // Retries that are due go first: they waited already. `all`: every job, due or not.
  const auto due_retry = [&](bool urgent) -> std::unique_ptr<job> {
    for (auto it = waiting_.begin(); it != waiting_.end() && (all || it->first <= now); ++it) {
      if (!all && it->second->urgent != urgent) continue;
      auto j = std::move(it->second);
      waiting_.erase(it);
      return j;
    }
    return nullptr;
  };
  const auto front = [](queue& q) {
    auto j = std::move(q.front());
    q.pop_front();
    return j;
  };
  if (auto j = due_retry(true)) return j;
  if (!urgent_.empty()) return front(urgent_);
  if (all || running_.size() < cap()) {
    if (auto j = due_retry(false)) return j;
    if (!queue_.empty()) return front(queue_);
  }
  if (!queue_.empty()) held_back_.store(true, std::memory_order_relaxed);
  return nullptr;
}

int transfer_loop::poll_ms() {
  int wait_ms = 1000;
  std::lock_guard lock(m_);
  if (!waiting_.empty()) {
    const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(waiting_.begin()->first - clock::now());
    wait_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(until.count() + 1, 0, wait_ms));
  }
  if (stopping_ || !urgent_.empty() || (!queue_.empty() && running_.size() < cap())) wait_ms = 0;
  return wait_ms;
}

void transfer_loop::run() noexcept {
  tune_thread("pinfeed-fetch", o_.batch_scheduling);
  // Near the rank's GPU, with its workers, once a loader on that GPU has made the node plan (this
  // thread never asks CUDA itself); its own thread: the binding is never given back. Best effort:
  // without memory for the CPU set the thread runs wherever it is.
  std::optional<scoped_cpu_binding> placed;
  bool placing = o_.bind_to_plan;
  for (bool stopping = false; !stopping;) {
    // The work due now, a job at a time: nothing is allocated to hand it over.
    for (;;) {
      std::unique_ptr<job> j;
      bool end = false;
      std::exception_ptr failed;
      {
        std::lock_guard lock(m_);
        stopping = stopping_;
        end = static_cast<bool>(failed_);  // after a failure what has not started ends with it
        if (!stopping) j = next_job(clock::now(), end);
        failed = failed_;
      }
      if (!j) break;
      if (end) complete(*j, failed);
      else start(std::move(j));
    }
    if (stopping) break;
    if (placing)
      if (const node_plan* plan = this_node_plan_if_made(); plan != nullptr) {
        placing = false;
        try {
          placed.emplace(plan->rank_cpus);
        } catch (...) {
        }
      }
    if (const std::size_t c = cap(); c != connections_for_) {  // room to keep as many open again
      curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(2 * c));
      connections_for_ = c;
    }
    int still = 0;
    curl_multi_perform(multi_, &still);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left))
      if (msg->msg == CURLMSG_DONE) finish(msg->easy_handle, msg->data.result);
    // Returns early on socket activity, libcurl's own timers and curl_multi_wakeup().
    curl_multi_poll(multi_, nullptr, 0, poll_ms(), nullptr);
  }
  cancel_all();
}

void transfer_loop::cancel_all() noexcept {
  std::exception_ptr stop;
  try {
    stop = std::make_exception_ptr(cancelled("cancelled"));
  } catch (...) {  // no memory for the exception: the requests end with std::bad_alloc instead
    stop = std::current_exception();
  }
  for (auto& [h, raw] : running_) {
    std::unique_ptr<job> j(raw);
    curl_multi_remove_handle(multi_, h);
    detach(h, j->t);
    release_handle(h);
    complete(*j, stop);
  }
  running_.clear();
  // The rest a job at a time, out of m_ while its callback runs (nothing allocated to collect them).
  for (;;) {
    std::unique_ptr<job> j;
    {
      std::lock_guard lock(m_);
      j = next_job(clock::now(), true);
    }
    if (!j) return;
    complete(*j, stop);
  }
}

void transfer_loop::start(std::unique_ptr<job> j) noexcept {
  CURL* h = nullptr;
  try {
    if (!idle_.empty()) {
      h = idle_.back();
      idle_.pop_back();
      curl_easy_reset(h);
    } else {
      h = curl_easy_init();
      if (h == nullptr) throw std::bad_alloc();  // (libcurl's only reason for no handle)
    }
    ++j->attempt;
    j->started = clock::now();
    configure(h, j->e, j->q, o_, j->t);
    if (j->q.range) j->t.r.body = body_for(j->q.length);
    running_.emplace(h, j.get());  // (may throw: j still owns the job then)
    if (curl_multi_add_handle(multi_, h) != CURLM_OK) {
      running_.erase(h);
      throw pinfeed::runtime_error("libcurl: cannot start a transfer");
    }
    (void)j.release();  // owned through running_ now
  } catch (...) {
    if (h != nullptr) {
      detach(h, j->t);
      release_handle(h);
    }
    complete(*j, std::current_exception());
  }
}

std::vector<std::byte> transfer_loop::body_for(std::uint64_t length) {
  std::vector<std::byte> b;
  {
    std::lock_guard lock(pool_m_);
    if (!pool_.empty()) {
      b = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  b.reserve(static_cast<std::size_t>(length));
  return b;
}

void transfer_loop::release_handle(CURL* h) noexcept {
  if (idle_.size() >= cap()) {
    curl_easy_cleanup(h);
    return;
  }
  try {
    idle_.push_back(h);
  } catch (...) {
    curl_easy_cleanup(h);
  }
}

void transfer_loop::finish(CURL* h, CURLcode code) noexcept {
  const auto it = running_.find(h);
  if (it == running_.end()) return;
  std::unique_ptr<job> j(it->second);
  running_.erase(it);
  curl_multi_remove_handle(multi_, h);
  detach(h, j->t);
  release_handle(h);
  response& r = j->t.r;
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes.fetch_add(r.received, std::memory_order_relaxed);
  try {
    if (r.error) std::rethrow_exception(r.error);
    const verdict v = classify(j->e, j->q, j->attempt, code, code != CURLE_OK ? j->t.error_text(code) : std::string(), r);
    if (v.what == verdict::kind::answer) {
      if (j->q.range) note_latency(clock::now() - j->started);
      complete(*j, nullptr);
      return;
    }
    if (v.what != verdict::kind::retry) throw fatal_error(v.why);
    const int attempts = std::max(1, o_.max_attempts);
    if (j->attempt >= attempts) throw fatal_error(out_of_attempts(j->e, j->q, v.why, attempts));
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    const auto due = clock::now() + std::chrono::duration_cast<clock::duration>(
                                        std::chrono::duration<double, std::milli>(backoff_ms(o_, j->attempt, jitter_)));
    r = response{};  // nothing of this attempt is kept while it waits
    if (j->q.sink) j->q.sink->restart();
    std::lock_guard lock(m_);
    waiting_.emplace(due, std::move(j));
  } catch (...) {
    if (j) complete(*j, std::current_exception());
  }
}

void transfer_loop::note_latency(clock::duration took) noexcept {
  const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
  const std::uint64_t was = range_latency_ns_.load(std::memory_order_relaxed);  // this thread's alone to write
  range_latency_ns_.store(was == 0 ? ns : was - was / 16 + ns / 16, std::memory_order_relaxed);
}

void transfer_loop::complete(job& j, std::exception_ptr error) noexcept {
  try {
    j.done(error ? response{} : std::move(j.t.r), error);
  } catch (...) {  // a callback's own failure has nowhere to go
  }
}

}  // namespace pinfeed::loaders::remote
