// DLPack views on the CPU path, classic and (with a DLPack 1.x header) versioned: they outlive the
// batch and the loader, their deleter runs on any thread, a reader stream is ignored, and a second
// deleter call is refused.
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
template <class Managed>
bool view_holds(const Managed* view, std::uint64_t first, std::size_t count) {
  std::vector<std::byte> expect(33);
  for (std::size_t j = 0; j < count; ++j) {
    fill_random_bytes(philox_stream(5, 0, first + j), expect);
    if (std::memcmp(static_cast<const std::byte*>(view->dl_tensor.data) + j * 33, expect.data(), 33) != 0) return false;
  }
  return true;
}

// The two kinds of view, for the cases that hold for both.
struct classic_view {
  using type = DLManagedTensor;
  static type* make(const batch& b) { return b.to_dlpack("data"); }
  static type* make(const batch& b, cudaStream_t s) { return b.to_dlpack("data", s); }
};
#if PINFEED_HAS_DLPACK_VERSIONED
struct versioned_view {
  using type = DLManagedTensorVersioned;
  static type* make(const batch& b) { return b.to_dlpack_versioned("data"); }
  static type* make(const batch& b, cudaStream_t s) { return b.to_dlpack_versioned("data", s); }
};
#define PINFEED_TEST_VIEWS classic_view, versioned_view
#else
#define PINFEED_TEST_VIEWS classic_view
#endif
}  // namespace

#if defined(PINFEED_TEST_EXPECT_DLPACK_VERSIONED)
// This build was given a DLPack 1.x header (PINFEED_DLPACK_INCLUDE_DIR): the versioned views must be
// there, not a distribution's older header picked up instead.
static_assert(PINFEED_HAS_DLPACK_VERSIONED == 1, "the DLPack 1.x header given to the build was not the one included");
#endif

TEST_CASE_TEMPLATE("dlpack.views_outlive_the_loader_and_their_deleters_run_on_other_threads", View, PINFEED_TEST_VIEWS) {
  std::vector<typename View::type*> views;
  {
    loader_options o = test::cpu_loader(8, 2, 5);
    o.max_batches_in_use = 2;
    loader l(bytes_source(40), o);
    for (int k = 0; k < 3; ++k) {
      auto b = l.next();
      REQUIRE(b);
      // The stream overload on the CPU path: the stream is ignored (host memory, nothing to order).
      views.push_back(k % 2 ? View::make(*b, reinterpret_cast<cudaStream_t>(0x1)) : View::make(*b));
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

TEST_CASE_TEMPLATE("dlpack.a_second_deleter_call_is_refused", View, PINFEED_TEST_VIEWS) {
  std::mutex m;
  std::vector<std::string> errors;
  const log_sink previous = set_log_sink([&](log_level level, std::string_view message) {
    std::lock_guard lock(m);
    if (level == log_level::error) errors.emplace_back(message);
  });
  loader l(bytes_source(16), test::cpu_loader(8, 1, 5));
  auto b = l.next();
  REQUIRE(b);
  auto* view = View::make(*b);
  // The deleter as a framework keeps it: the view's own memory is gone after the first call.
  const auto deleter = view->deleter;
  b.reset();
  deleter(view);
  CHECK(errors.empty());
  deleter(view);  // a framework's double free: refused, nothing freed twice (ASan would say)
  set_log_sink(previous);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("deleted twice") != std::string::npos);
  // The slot came back once: the loader goes on to its end.
  std::size_t rest = 0;
  while (auto next = l.next()) ++rest;
  CHECK(rest == 1);
  CHECK_THROWS_AS((void)batch().to_dlpack("data"), std::logic_error);  // an empty batch has no view
}

#if PINFEED_HAS_DLPACK_VERSIONED
TEST_CASE("dlpack.versioned_views_carry_the_version_and_are_read_only") {
  loader_options o = test::cpu_loader(8, 1, 5);
  o.max_batches_in_use = 2;
  loader l(bytes_source(16), o);
  auto b = l.next();
  REQUIRE(b);
  DLManagedTensorVersioned* v = b->to_dlpack_versioned("data");
  DLManagedTensor* c = b->to_dlpack("data");  // both kinds of one batch, each holding the slot
  CHECK(v->version.major == DLPACK_MAJOR_VERSION);
  CHECK(v->version.minor == DLPACK_MINOR_VERSION);
  CHECK(v->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(v->dl_tensor.data == c->dl_tensor.data);
  CHECK(v->dl_tensor.device.device_type == kDLCPU);
  CHECK(v->dl_tensor.ndim == 2);
  CHECK(v->dl_tensor.shape[0] == 8);
  CHECK(v->dl_tensor.shape[1] == 33);
  CHECK(v->dl_tensor.strides == nullptr);
  CHECK(v->dl_tensor.dtype.code == kDLUInt);
  CHECK(v->dl_tensor.dtype.bits == 8);
  CHECK(v->dl_tensor.dtype.lanes == 1);
  CHECK_THROWS_AS((void)b->to_dlpack_versioned("missing"), std::out_of_range);
  b.reset();
  // The batch is gone, the two views hold its slot: one held at the call of next(), within the limit.
  auto second = l.next();
  REQUIRE(second);
  CHECK(view_holds(v, 0, 8));
  c->deleter(c);
  CHECK(view_holds(v, 0, 8));  // the classic view's deleter left the slot to the versioned view
  v->deleter(v);
  second.reset();
  CHECK_FALSE(l.next().has_value());  // 16 samples, two batches: the end, nothing held back
}
#endif
