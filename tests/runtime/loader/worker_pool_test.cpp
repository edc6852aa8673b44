// The loader's worker pool (runtime/src/loader/worker_pool.cpp): every chunk submitted runs once,
// on as many workers as asked for, and quiesce() returns only when none runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "loader/worker_pool.hpp"

using namespace pinfeed;
using detail::chunk;
using detail::worker_pool;

TEST_CASE("worker_pool.every_submitted_chunk_runs_exactly_once") {
  for (std::size_t workers : {1u, 2u, 4u}) {
    CAPTURE(workers);
    std::mutex m;
    std::vector<int> runs(500, 0);
    std::set<std::thread::id> threads;
    {
      worker_pool pool(workers, {}, [&](const chunk& c) {
        std::lock_guard lock(m);
        for (std::size_t i = c.begin; i < c.end; ++i) ++runs[i];
        threads.insert(std::this_thread::get_id());
      });
      CHECK(pool.most() == workers);
      CHECK(pool.workers() == workers);
      for (std::size_t k = 0; k < 100; ++k) pool.submit(chunk{0, k * 5, k * 5 + 5});
      pool.quiesce();
      std::lock_guard lock(m);
      CHECK(std::all_of(runs.begin(), runs.end(), [](int r) { return r == 1; }));
      CHECK(threads.count(std::this_thread::get_id()) == 0);  // runners, not the submitting thread
    }
  }
}

TEST_CASE("worker_pool.quiesce_waits_for_a_chunk_that_is_running") {
  std::atomic<bool> started{false}, finished{false};
  worker_pool pool(2, {}, [&](const chunk&) {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = true;
  });
  pool.submit(chunk{0, 0, 1});
  while (!started) std::this_thread::yield();
  pool.quiesce();
  CHECK(finished);
}

TEST_CASE("worker_pool.the_worker_count_moves_within_one_and_the_most") {
  std::atomic<int> ran{0};
  worker_pool pool(3, {}, [&](const chunk&) { ++ran; });
  pool.set_workers(0);
  CHECK(pool.workers() == 1);
  pool.set_workers(99);
  CHECK(pool.workers() == 3);
  pool.set_workers(2);
  CHECK(pool.workers() == 2);
  for (int k = 0; k < 20; ++k) pool.submit(chunk{0, 0, 1});
  pool.quiesce();
  CHECK(ran == 20);
  // The pool is used again after a quiesce (a loader's next epoch).
  for (int k = 0; k < 5; ++k) pool.submit(chunk{0, 0, 1});
  pool.quiesce();
  CHECK(ran == 25);
}

TEST_CASE("worker_pool.the_consumer_runs_no_chunk_of_a_pool_that_is_not_stalled") {
  std::atomic<int> on_caller{0}, ran{0};
  const auto caller = std::this_thread::get_id();
  worker_pool pool(1, {}, [&](const chunk&) {
    if (std::this_thread::get_id() == caller) ++on_caller;
    ++ran;
  });
  pool.help_if_stalled();  // nothing queued: nothing to do
  for (int k = 0; k < 10; ++k) pool.submit(chunk{0, 0, 1});
  pool.help_if_stalled();  // queued for less than 2 s: the runners take them
  pool.quiesce();
  CHECK(ran == 10);
  CHECK(on_caller == 0);
}
