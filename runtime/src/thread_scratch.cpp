#include "pinfeed/runtime/detail/thread_scratch.hpp"

#include <pthread.h>

#include <atomic>
#include <memory>
#include <new>
#include <string>

#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::detail {
namespace {

constexpr std::size_t kSlots = 32;

/// A thread's scratch objects, by slot.
struct table {
  void* object[kSlots] = {};
  void (*destroy[kSlots])(void*) noexcept = {};
};

void destroy_table(void* p) noexcept {
  auto* t = static_cast<table*>(p);
  for (std::size_t i = 0; i < kSlots; ++i)
    if (t->object[i] != nullptr) t->destroy[i](t->object[i]);
  delete t;
}

pthread_key_t table_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, destroy_table) != 0)
      throw pinfeed::runtime_error("thread scratch: no pthread key left (PTHREAD_KEYS_MAX)");
    return k;
  }();
  return key;
}

thread_local table* this_thread = nullptr;  // (owned through the key; plain pointer)

}  // namespace

std::size_t new_thread_scratch_slot() {
  static std::atomic<std::size_t> next{0};
  const std::size_t slot = next.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kSlots)
    throw pinfeed::logic_error("thread scratch: more than " + std::to_string(kSlots) + " kinds of scratch object");
  return slot;
}

void* thread_scratch_object(std::size_t slot, void* (*make)(), void (*destroy)(void*) noexcept) {
  if (this_thread == nullptr) {
    auto fresh = std::make_unique<table>();
    // Keys past the thread's first block need memory for a second block: ENOMEM is memory too.
    if (pthread_setspecific(table_key(), fresh.get()) != 0) throw std::bad_alloc();
    this_thread = fresh.release();
  }
  table& t = *this_thread;
  if (t.object[slot] == nullptr) {
    t.object[slot] = make();
    t.destroy[slot] = destroy;
  }
  return t.object[slot];
}

}  // namespace pinfeed::detail
