// DLPack views on the CPU path: they outlive the batch and the loader, their deleter runs on any
// thread, a reader stream is ignored, and a second deleter call is refused.
#include <doctest/doctest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlpack/dlpack.h>

#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/philox.hpp"
#include "pinfeed/runtime/random.hpp"
#include "test_util.hpp"

using namespace pinfeed;

namespace {
std::shared_ptr<source> bytes_source(std::uint64_t n) {
  return make_source(n, {{"data", dtype::u8, {33}}}, [](sample& s) { fill_random_bytes(s.rng(), s.bytes(0)); });
}
bool view_holds(const DLManagedTensor* view, std::uint64_t first, std::size_t count) {
  std::vector<std::byte> expect(33);
  for (std::size_t j = 0; j < count; ++j) {
    fill_random_bytes(philox_stream(5, 0, first + j), expect);
    if (std::memcmp(static_cast<const std::byte*>(view->dl_tensor.data) + j * 33, expect.data(), 33) != 0) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("dlpack.views_outlive_the_loader_and_their_deleters_run_on_other_threads") {
  std::vector<DLManagedTensor*> views;
  {
    loader_options o = test::cpu_loader(8, 2, 5);
    o.max_batches_in_use = 2;
    loader l(bytes_source(40), o);
    for (int k = 0; k < 3; ++k) {
      auto b = l.next();
      REQUIRE(b);
      // The stream overload on the CPU path: the stream is ignored (host memory, nothing to order).
      views.push_back(k % 2 ? b->to_dlpack("data", reinterpret_cast<cudaStream_t>(0x1)) : b->to_dlpack("data"));
      CHECK(views.back()->dl_tensor.device.device_type == kDLCPU);
      CHECK(views.back()->dl_tensor.shape[0] == 8);
    }
    // Each view holds a slot: three views held, against a limit of two at a call of next().
    CHECK_THROWS_AS((void)l.next(), batches_held_error);
  }  // the loader is gone
  for (std::size_t k = 0; k < views.size(); ++k) CHECK(view_holds(views[k], 8 * k, 8));
  std::vector<std::thread> threads;
  for (auto* v : views) threads.emplace_back([v] { v->deleter(v); });
  for (auto& t : threads) t.join();
}

TEST_CASE("dlpack.a_second_deleter_call_is_refused") {
  std::mutex m;
  std::vector<std::string> errors;
  const log_sink previous = set_log_sink([&](log_level level, std::string_view message) {
    std::lock_guard lock(m);
    if (level == log_level::error) errors.emplace_back(message);
  });
  loader l(bytes_source(16), test::cpu_loader(8, 1, 5));
  auto b = l.next();
  REQUIRE(b);
  DLManagedTensor* view = b->to_dlpack("data");
  b.reset();
  view->deleter(view);
  CHECK(errors.empty());
  view->deleter(view);  // a framework's double free: refused, nothing freed twice (ASan would say)
  set_log_sink(previous);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("deleted twice") != std::string::npos);
  // The slot came back once: the loader goes on to its end.
  std::size_t rest = 0;
  while (auto next = l.next()) ++rest;
  CHECK(rest == 1);
  CHECK_THROWS_AS((void)batch().to_dlpack("data"), std::logic_error);  // an empty batch has no view
}
