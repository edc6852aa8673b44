#include "remote/shard_set.hpp"

#include "pinfeed/runtime/error.hpp"
#include "remote/retry.hpp"

namespace pinfeed::loaders::remote {

fatal_error destroyed_while_reading(const std::string& origin) {
  return fatal_error("remote shards: the reader was destroyed while " + origin + " was read");
}

shard_set::shard_set(std::vector<remote_shard> shards, const std::vector<detail::shard_sample>& entries,
                     transfer_loop& loop, request_counters& counters)
    : shards_(std::move(shards)), entries_(entries), loop_(loop), counters_(counters) {}

std::string shard_set::expected_etag(std::uint32_t s) {
  std::lock_guard lock(etag_m_);
  return shards_[s].etag;
}

void shard_set::note_etag(std::uint32_t s, const std::string& etag) {
  if (etag.empty()) return;
  std::lock_guard lock(etag_m_);
  std::string& known = shards_[s].etag;
  if (known.empty()) known = etag;
  else if (known != etag) throw fatal_error(changed_message(shards_[s].where, "ETag " + known + " then " + etag));
}

void shard_set::record_failure(std::exception_ptr error) noexcept {
  {
    std::lock_guard lock(failed_m_);
    if (failed_ || stopping_.load()) return;
    failed_ = error;
    failed_flag_.store(true, std::memory_order_release);
  }
  loop_.fail_queued(error);
}

void shard_set::rethrow_failure() {
  if (!failed_flag_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failed_m_);
  std::rethrow_exception(failed_);
}

std::future<std::vector<std::byte>> shard_set::load(std::uint64_t index, bool urgent) {
  auto p = std::make_shared<std::promise<std::vector<std::byte>>>();
  auto f = p->get_future();
  const detail::shard_sample& e = entries_[index];
  const remote_shard& sh = shards_[e.shard];
  try {
    rethrow_failure();
    if (e.image.size == 0) {
      p->set_value({});
      return f;
    }
    request q;
    q.offset = e.image.offset;
    q.length = e.image.size;
    q.range = true;
    q.expect_total = sh.size;
    q.expect_etag = expected_etag(e.shard);
    loop_.submit(sh.where, q, [this, p, s = e.shard](response&& r, std::exception_ptr failure) {
      try {
        if (failure) std::rethrow_exception(failure);
        note_etag(s, r.etag);
        p->set_value(std::move(r.body));
      } catch (const fatal_error&) {
        record_failure(std::current_exception());
        p->set_exception(std::current_exception());
      } catch (...) {
        p->set_exception(std::current_exception());
      }
    }, urgent);
  } catch (...) {
    p->set_exception(std::current_exception());
  }
  return f;
}

}  // namespace pinfeed::loaders::remote
