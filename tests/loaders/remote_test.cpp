// Remote tar shards against real servers started by the tests on loopback: nginx, and a proxy in
// front of it that injects faults. Batches must equal the same shards read locally, bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <sched.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http_fixtures.hpp"
#include "image_fixtures.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/loaders/shards.hpp"
#include "pinfeed/loaders/sources.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/error.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/random.hpp"
#include "remote/range_reads.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;
using pinfeed::test::temp_dir;

namespace {

/// 24 JPEGs packed into shards of about 4 KiB under <dir>/www, their names, and the server root.
struct shard_set {
  fs::path www;
  std::vector<std::string> names;  ///< file names under www
  std::vector<std::string> local;  ///< full local paths
};

/// Shards of `files` in <dir>/www (train-000000.tar, ...), at most `shard_bytes` each.
shard_set shards_of(const std::vector<image_file>& files, const fs::path& dir, std::uint64_t shard_bytes) {
  shard_set s;
  s.www = dir / "www";
  fs::create_directories(s.www);
  s.local = write_shards(files, (s.www / "train").string(), shard_bytes);
  for (const auto& p : s.local) s.names.push_back(fs::path(p).filename().string());
  return s;
}

shard_set make_shards(const fs::path& dir, int images = 24, std::uint64_t shard_bytes = 4096) {
  return shards_of(test::jpeg_class_folder(dir / "images", images, 40, 1, 48), dir, shard_bytes);
}

std::vector<std::string> urls(const std::string& base, const shard_set& s) {
  std::vector<std::string> out;
  for (const auto& n : s.names) out.push_back(base + "/" + n);
  return out;
}

/// Range reads (window 0): a request per sample, under the exact global shuffle of local shards.
shard_options range_reads() {
  shard_options o;
  o.window_shards = 0;
  return o;
}

/// The checksum lines of two shuffled epochs through crop + flip.
std::vector<std::string> checksums(const std::shared_ptr<image_reader>& reader, std::size_t workers = 2) {
  loader_options o = test::cpu_loader(5, workers, 7);
  o.order.shuffle = true;
  loader l(std::make_shared<pipeline_source>(reader, parse_pipeline("rrc(16),hflip")), o);
  return test::epoch_checksums(l, 0, 1);
}

std::vector<std::string> shard_window_checksums(const std::shared_ptr<image_reader>& reader, std::size_t workers = 2,
                                                std::uint32_t epochs = 2);

/// No proxy variables for a scope: the servers are on loopback and libcurl would honour them.
struct no_proxies {
  test::scoped_env e[6] = {{"http_proxy", nullptr}, {"https_proxy", nullptr}, {"all_proxy", nullptr},
                           {"HTTP_PROXY", nullptr}, {"HTTPS_PROXY", nullptr}, {"ALL_PROXY", nullptr}};
};

/// The AWS variables of a moto server for a scope, and none of the others.
struct aws_env {
  test::scoped_env id, secret, region, endpoint, token, endpoint_s3, default_region;
  aws_env(const std::string& key_id, const std::string& key, const std::string& url)
      : id("AWS_ACCESS_KEY_ID", key_id.c_str()), secret("AWS_SECRET_ACCESS_KEY", key.c_str()),
        region("AWS_REGION", "us-east-1"), endpoint("AWS_ENDPOINT_URL", url.c_str()), token("AWS_SESSION_TOKEN", nullptr),
        endpoint_s3("AWS_ENDPOINT_URL_S3", nullptr), default_region("AWS_DEFAULT_REGION", nullptr) {}
};

/// Shards packed for one test and served by nginx on loopback; false (the test says why and
/// stops) where nginx is not installed.
struct served_shards {
  no_proxies direct;
  temp_dir dir;
  shard_set set;
  std::unique_ptr<test::nginx_server> server;
  explicit served_shards(int images = 24, std::uint64_t shard_bytes = 4096) {
    if (!test::have_nginx()) {
      test::skip_case("nginx is not installed (Debian: nginx-light)");
      return;
    }
    set = make_shards(dir.path, images, shard_bytes);
    server = std::make_unique<test::nginx_server>(set.www, dir.path);
  }
  explicit operator bool() const noexcept { return server != nullptr; }
};

/// The threads of this process named "pinfeed-fetch" (transfer loops), with their scheduling policies.
std::map<int, int> fetch_threads() {
  std::map<int, int> out;
  for (const auto& t : fs::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "pinfeed-fetch") continue;
    const int tid = std::stoi(t.path().filename().string());
    out[tid] = sched_getscheduler(tid);
  }
  return out;
}

/// Waits (30 s at most) until the reader has retried every fault the proxy has injected, and checks
/// the pair of counters the wait ended on. A read-ahead can run on into the next epoch after the
/// loader that asked for it is gone, so the proxy may inject a fault after the wait: reading both
/// counters again afterwards raced it (it failed once, 19 >= 20). The faults are read first, then
/// the retries: each fault counted by then had been retried.
void check_every_fault_retried(const test::fault_proxy& proxy, const image_reader& reader) {
  std::uint64_t faults = 0, retries = 0;
  test::run_with_timeout(std::chrono::seconds(30), [&] {
    for (;;) {
      faults = static_cast<std::uint64_t>(proxy.faults());
      retries = remote_stats(reader).retries;
      if (retries >= faults) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }, "a retry for every fault");
  CHECK(faults > 0);
  CHECK(retries >= faults);
}

remote_options quick() {
  remote_options r;
  r.backoff_initial_ms = 5;
  r.backoff_max_ms = 40;
  r.connect_timeout_s = 2;
  r.stall_timeout_s = 1;
  r.requests_in_flight = 4;
  r.read_ahead = 8;
  return r;
}

}  // namespace

TEST_CASE("remote.locations_are_redacted_and_expanded") {
  CHECK(is_remote_location("https://h/x.tar"));
  CHECK(is_remote_location("s3://b/k"));
  CHECK_FALSE(is_remote_location("/data/x.tar"));
  CHECK(redact_location("https://user:secret@host:8080/a/b.tar?X-Amz-Signature=abc#f") == "https://host:8080/a/b.tar");
  CHECK(redact_location("s3://bucket/key.tar") == "s3://bucket/key.tar");
  CHECK(redact_location("s3://bucket/train dir/a b.tar") == "s3://bucket/train dir/a b.tar");
  // Passwords that a naive cut at '?', '#' or '/' would leave half-printed: never printed.
  for (const char* url : {"https://u:p#w@h/x.tar", "https://u:p?w@h/x.tar", "https://u:pa/ss@h/x.tar",
                          "https://u:pw@h/x.tar?token=pw#pw"}) {
    CAPTURE(url);
    const std::string shown = redact_location(url);
    CHECK(shown.find("pw") == std::string::npos);
    CHECK(shown.find("p#w") == std::string::npos);
    CHECK(shown.find("ss@") == std::string::npos);
    CHECK(shown.rfind("https://", 0) == 0);
  }
  try {  // a malformed range in a URL with credentials: the error does not quote them
    (void)expand_remote_pattern("https://u:pw@h/x-{1..z}.tar");
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("pw") == std::string::npos);
    CHECK(std::string(e.what()).find("not numeric") != std::string::npos);
  }
  // A presigned URL's query is kept on every name, and its '?' is not a glob.
  CHECK(expand_remote_pattern("https://h/x-{1..2}.tar?X-Sig=a*b") ==
        std::vector<std::string>{"https://h/x-1.tar?X-Sig=a*b", "https://h/x-2.tar?X-Sig=a*b"});
  const auto names = expand_remote_pattern("http://h/train-{008..011}.tar");
  CHECK(names == std::vector<std::string>{"http://h/train-008.tar", "http://h/train-009.tar", "http://h/train-010.tar",
                                          "http://h/train-011.tar"});
  CHECK_THROWS_WITH_AS(expand_remote_pattern("http://h/train-*.tar"), doctest::Contains("a glob needs s3://"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(expand_remote_pattern("http://h/train-{1..x}.tar"), doctest::Contains("not numeric"),
                       std::invalid_argument);
  CHECK_THROWS_AS(expand_remote_pattern("/local/x.tar"), std::invalid_argument);
}

TEST_CASE("remote.http_shards_equal_the_local_ones") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  REQUIRE(set.names.size() >= 3);
  const auto local = make_shard_reader(set.local);
  const auto remote = make_remote_shard_reader(urls(server.url(), set), range_reads(), quick());
  CHECK(remote->size() == local->size());
  CHECK(remote->name().find("remote tar shard") != std::string::npos);
  CHECK(checksums(remote) == checksums(local));
  CHECK(checksums(remote, 1) == checksums(local, 3));  // any worker count
  const remote_counters c = remote_stats(*remote);
  std::uint64_t shard_bytes = 0;
  for (const auto& p : set.local) shard_bytes += fs::file_size(p);
  // Indexed from the sidecars pinfeed pack wrote: no shard was fetched whole, one range per sample read.
  CHECK(c.sidecars == set.names.size());
  CHECK(c.shards == 0);
  CHECK(c.shard_bytes == shard_bytes);
  // 2 runs of 2 epochs, and the next epoch's first read_ahead samples, which the first run's
  // second epoch read ahead and the second run's found read already.
  CHECK(c.requests == set.names.size() + 4 * remote->size() + *quick().read_ahead);
  CHECK(c.retries == 0);
  CHECK(c.read_ahead > 0);  // inside a loader the next samples of the order were queued ahead
  CHECK(remote_stats(*local).requests == 0);
  // Without the sidecars each shard is fetched whole once to be indexed.
  for (const auto& p : set.local) fs::rename(shard_index_path(p), shard_index_path(p) + ".away");
  const auto indexed = make_remote_shard_reader(urls(server.url(), set), range_reads(), quick());
  CHECK(remote_stats(*indexed).sidecars == 0);
  CHECK(remote_stats(*indexed).bytes >= shard_bytes);
  CHECK(checksums(indexed) == checksums(local));
  for (const auto& p : set.local) fs::rename(shard_index_path(p) + ".away", shard_index_path(p));
  // The loader's stats see the waits as their own stage, inside read.
  loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), test::cpu_loader(8, 2, 7));
  while (l.next()) {
  }
  const auto st = l.stats();
  CHECK(st[stage::fetch].count == remote->size());
  CHECK(st[stage::fetch].total_ns <= st[stage::read].total_ns);
  CHECK(std::string(to_string(stage::fetch)) == "fetch");
}

/// The requests `reader` made, less its retries (attempts after a retryable failure: a stall past
/// the timeout on a loaded host is no second sample), once they reach `expected` (read-ahead
/// finishes after the loop that asked for it; the wait fails the case after 20 s).
std::uint64_t reads_once_there(const image_reader& reader, std::uint64_t expected) {
  std::uint64_t reads = 0;
  test::run_with_timeout(std::chrono::seconds(20), [&] {
    for (;;) {
      const remote_counters c = remote_stats(reader);
      reads = c.requests - c.retries;
      if (reads >= expected) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }, "the next epoch's read-ahead");
  return reads;
}

/// Waits for `expected` requests (less retries), then a little longer: exactly `expected` were made,
/// not one more. The counters then.
remote_counters requested_exactly(const image_reader& reader, std::uint64_t expected) {
  reads_once_there(reader, expected);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a request past the expected would show by now
  const remote_counters c = remote_stats(reader);
  CHECK(c.requests - c.retries == expected);
  return c;
}

TEST_CASE("remote.the_read_ahead_runs_on_into_the_next_epoch") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  const remote_options o = quick();  // read_ahead 8
  const auto remote = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  const auto local = make_shard_reader(set.local);
  const std::uint64_t indexing = remote_stats(*remote).requests;
  REQUIRE(remote->size() > *o.read_ahead + 4);
  loader_options lo = test::cpu_loader(4, 2, 7);  // a batch is half the read-ahead
  lo.order.shuffle = true;
  auto first_batch_of_epoch_1 = [&](const std::shared_ptr<image_reader>& reader, bool stop_server) {
    loader l(std::make_shared<pipeline_source>(reader, parse_pipeline("center_crop(16)")), lo);
    l.start_epoch(0);
    while (l.next()) {
    }
    if (stop_server) {
      // Epoch 0's samples, and epoch 1's first read_ahead, each requested once.
      // Requests count attempts: a retry (a stall past the timeout on a loaded host) is no second
      // sample, so the wait counts requests less retries, and the CHECK holds the value it ended on.
      const std::uint64_t expected = indexing + remote->size() + *o.read_ahead;
      CHECK(reads_once_there(*remote, expected) == expected);
      served.server.reset();  // from here on, only what was read ahead can be delivered
    }
    l.start_epoch(1);
    auto b = l.next();
    REQUIRE(b);
    return checksum_line(*b);
  };
  const std::string expected = first_batch_of_epoch_1(local, false);
  CHECK(first_batch_of_epoch_1(remote, true) == expected);
}

/// A reader of `inner`'s samples and one more: the last index is made from inner sample 0, read at
/// the outer sample's place in the order (sample::share_place), as a source that stands in a
/// sample for another does.
struct one_more_reader final : image_reader {
  std::shared_ptr<image_reader> inner;
  explicit one_more_reader(std::shared_ptr<image_reader> r) : inner(std::move(r)) {}
  std::uint64_t size() const override { return inner->size() + 1; }
  image_spec image_shape() const override { return inner->image_shape(); }
  std::vector<field_spec> extra_fields() const override { return inner->extra_fields(); }
  std::string name() const override { return "one more than " + inner->name(); }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    if (s.index() < inner->size()) return inner->read(s, image, plan);
    std::vector<field_spec> specs;
    std::vector<std::byte*> buffers;
    for (std::size_t i = 0; i < s.field_count(); ++i) {
      specs.push_back(s.spec(i));
      buffers.push_back(s.bytes(i).data());
    }
    sample first(0, s.epoch(), s.seed(), specs, buffers);
    first.share_place(s);
    return inner->read(first, image, plan);
  }
};

TEST_CASE("remote.the_read_ahead_skips_indexes_past_the_shards") {
  // Contract: the range read-ahead walks its loader's order, which a source may make over more
  // samples than the shards hold (it stands other samples in for the rest): an index past the
  // shards' last is never requested (nor read out of the shard index's bounds).
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  const remote_options o = quick();  // read_ahead 8
  const auto remote = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  const std::uint64_t n = remote->size(), indexing = remote_stats(*remote).requests;
  REQUIRE(n > *o.read_ahead + 4);
  loader l(std::make_shared<pipeline_source>(std::make_shared<one_more_reader>(remote), parse_pipeline("center_crop(16)")),
           test::cpu_loader(4, 1, 7));  // in order, one worker: index n is the epoch's last sample
  l.start_epoch(0);
  std::uint64_t samples = 0;
  while (auto b = l.next()) samples += b->size();
  CHECK(samples == n + 1);
  // Each of the n samples once, sample 0 again for the stand-in, and the next epoch's first
  // read_ahead samples: nothing for index n. (Requests count attempts: retries are taken off.)
  const std::uint64_t expected = indexing + n + 1 + *o.read_ahead;
  const remote_counters c = requested_exactly(*remote, expected);
  // One worker: every position after the first was queued ahead once, index n's never.
  CHECK(c.read_ahead == n - 1 + *o.read_ahead);
}

/// `inner`'s samples, sample 0's read held until sample 1's has returned (at most 20 s): a worker
/// that takes a sample after another worker has read past it.
struct late_first_reader final : image_reader {
  std::shared_ptr<image_reader> inner;
  std::mutex m;
  std::condition_variable cv;
  bool second_read = false, held = false;
  explicit late_first_reader(std::shared_ptr<image_reader> r) : inner(std::move(r)) {}
  std::uint64_t size() const override { return inner->size(); }
  image_spec image_shape() const override { return inner->image_shape(); }
  std::vector<field_spec> extra_fields() const override { return inner->extra_fields(); }
  std::string name() const override { return "late first " + inner->name(); }
  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    if (s.index() == 0 && s.epoch() == 0) {
      std::unique_lock lock(m);
      held = cv.wait_for(lock, std::chrono::seconds(20), [&] { return second_read; });
    }
    read_result r = inner->read(s, image, plan);
    if (s.index() == 1 && s.epoch() == 0) {
      const std::lock_guard lock(m);
      second_read = true;
      cv.notify_all();
    }
    return r;
  }
};

TEST_CASE("remote.a_sample_a_worker_took_is_not_read_ahead_again") {
  // Contract: each sample is requested once a pass. Here one worker reads sample 1 (the read-ahead
  // then walks from it) before the other takes sample 0, behind where the walk began: the walk goes
  // back over the positions between, and sample 1, taken already, must not be requested again.
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  const remote_options o = quick();  // read_ahead 8
  const auto remote = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  const std::uint64_t n = remote->size(), indexing = remote_stats(*remote).requests;
  auto late = std::make_shared<late_first_reader>(remote);
  loader l(std::make_shared<pipeline_source>(late, parse_pipeline("center_crop(16)")), test::cpu_loader(4, 2, 7));
  l.start_epoch(0);  // in order
  std::uint64_t samples = 0;
  while (auto b = l.next()) samples += b->size();
  CHECK(samples == n);
  REQUIRE(late->held);  // sample 0 was read after sample 1
  // Each sample once, and the next epoch's first read_ahead samples.
  const std::uint64_t expected = indexing + n + *o.read_ahead;
  requested_exactly(*remote, expected);
}

TEST_CASE("remote.faults_are_retried_and_batches_stay_identical") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  const auto expected = checksums(make_shard_reader(set.local));
  // About one request in four fails (503, a reset mid-body or a stall past the timeout); with ten
  // attempts a request fails only if all ten do (about one in a million).
  test::fault_proxy proxy(server.port(), {.unavailable_every = 7, .reset_every = 11, .stall_every = 29, .stall_ms = 3000});
  remote_options o = quick();
  o.max_attempts = 10;
  const auto remote = make_remote_shard_reader(urls(proxy.url(), set), range_reads(), o);
  CHECK(checksums(remote) == expected);
  check_every_fault_retried(proxy, *remote);
}

TEST_CASE("remote.a_shard_scanned_for_its_index_retries_past_error_pages") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  for (const auto& p : set.local) fs::remove(shard_index_path(p));
  // Every third request is a 503 with a 2 KiB error page, more than a tar header: the page must be
  // taken for what it is (a retry), not scanned as the shard.
  test::fault_proxy proxy(served.server->port(), {.unavailable_every = 3, .error_page_bytes = 2048});
  remote_options o = quick();
  o.max_attempts = 10;
  for (const std::uint32_t window : {0u, 2u}) {
    CAPTURE(window);
    shard_options mode;
    mode.window_shards = window;
    const auto remote = make_remote_shard_reader(urls(proxy.url(), set), mode, o);
    CHECK(remote_stats(*remote).retries > 0);
    CHECK(remote_stats(*remote).sidecars == 0);
    CHECK(remote->size() == make_shard_reader(set.local)->size());
    if (window == 0) CHECK(checksums(remote) == checksums(make_shard_reader(set.local)));
  }
}

TEST_CASE("remote.a_server_that_stays_down_fails_within_the_retry_budget") {
  // A bound socket that does not listen: connections to its port are refused for the whole test.
  int port = 0;
  const int held = loopback::bind_loopback(port);
  remote_options o = quick();
  o.max_attempts = 3;
  const std::string url = "http://user:pw@127.0.0.1:" + std::to_string(port) + "/train-000000.tar";
  try {
    (void)make_remote_shard_reader({url}, range_reads(), o);
    FAIL("no error");
  } catch (const fatal_error& e) {
    const std::string what = e.what();
    CHECK(what.find("http://127.0.0.1:" + std::to_string(port) + "/train-000000.tar") != std::string::npos);
    CHECK(what.find("after 3 attempts") != std::string::npos);
    CHECK(what.find("pw") == std::string::npos);  // no credentials in errors
  }
  o.max_attempts = 0;
  CHECK_THROWS_WITH_AS(make_remote_shard_reader({url}, range_reads(), o), doctest::Contains("max_attempts must be at least 1"),
                       std::invalid_argument);
  o.max_attempts = 2;
  o.requests_in_flight = 0;
  CHECK_THROWS_WITH_AS(make_remote_shard_reader({url}, range_reads(), o), doctest::Contains("requests_in_flight must be in [1, 1024], got 0"),
                       std::invalid_argument);
  o.requests_in_flight = 1025;
  CHECK_THROWS_WITH_AS(make_remote_shard_reader({url}, range_reads(), o), doctest::Contains("got 1025"), std::invalid_argument);
  ::close(held);
}

TEST_CASE("remote.missing_shards_fail_at_once_and_changed_shards_are_refused") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  remote_options o = quick();
  o.max_attempts = 50;  // a 404 must not be retried
  CHECK_THROWS_WITH_AS(make_remote_shard_reader({server.url() + "/nope.tar"}, range_reads(), o),
                       doctest::Contains("HTTP 404 (not found) (attempt 1, not retried)"), fatal_error);

  // Indexed, then rewritten with other content: reading it is an error, under skip too.
  o.read_ahead = 0;
  const auto remote = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  {
    std::ofstream grow(set.local[0], std::ios::binary | std::ios::app);
    grow << std::string(1024, '\0');
  }
  pipeline_source_options skip;
  skip.on_error = error_policy::skip;
  auto src = std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)"), skip);
  loader l(src, test::cpu_loader(2, 1, 7));
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("changed after it was indexed: size"), fatal_error);
  CHECK(src->failures() == 0);

  // Without sidecar indexes the shards are indexed whole, and their ETags kept from then on.
  for (const auto& p : set.local) fs::remove(shard_index_path(p));
  // Same size, new modification time: nginx's ETag changes, and so does the verdict.
  const auto again = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  fs::last_write_time(set.local[1], fs::last_write_time(set.local[1]) + std::chrono::hours(1));
  auto src1 = std::make_shared<pipeline_source>(again, parse_pipeline("center_crop(16)"));
  loader l1(src1, test::cpu_loader(64, 1, 7));
  CHECK_THROWS_WITH_AS((void)l1.next(), doctest::Contains("changed after it was indexed: ETag"), fatal_error);

  // Shrunk: its ranges now end past the object.
  const auto third = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  fs::resize_file(set.local[2], 1024);
  auto src2 = std::make_shared<pipeline_source>(third, parse_pipeline("center_crop(16)"));
  loader l2(src2, test::cpu_loader(64, 1, 7));
  CHECK_THROWS_WITH_AS((void)l2.next(), doctest::Contains("changed after it was indexed"), fatal_error);
  // Indexed anew, the shrunk shard (no sidecar) is scanned as it arrives: cut short, it is named,
  // with range reads and with whole shards (whose cache would have kept it).
  const std::string cut = "tar shard '" + urls(server.url(), set)[2] + "': member of ";
  shard_options whole;
  whole.window_shards = 2;
  for (const shard_options& mode : {range_reads(), whole}) {
    CAPTURE(*mode.window_shards);
    try {
      (void)make_remote_shard_reader(urls(server.url(), set), mode, o);
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(cut) != std::string::npos);
      CHECK(std::string(e.what()).find("runs past the end (header at byte 0)") != std::string::npos);
    }
  }
}

TEST_CASE("remote.an_index_cache_spares_the_scan_of_shards_without_sidecars") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  const auto expected = checksums(make_shard_reader(set.local));
  std::uint64_t shard_bytes = 0;
  for (const auto& p : set.local) {
    fs::remove(shard_index_path(p));
    shard_bytes += fs::file_size(p);
  }
  const std::uint64_t shards = set.names.size();
  temp_dir cache;
  remote_options o = quick();
  o.index_cache_dir = (cache.path / "indexes").string();  // made if missing
  auto files = [&] {
    return static_cast<std::uint64_t>(std::distance(fs::directory_iterator(o.index_cache_dir), fs::directory_iterator{}));
  };
  const auto first = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  CHECK(remote_stats(*first).index_cached == 0);
  CHECK(remote_stats(*first).bytes >= shard_bytes);  // every shard scanned
  CHECK(files() == shards);
  CHECK(checksums(first) == expected);
  // The next reader asks for each shard's size and ETag (and its sidecar): no shard is scanned.
  const auto second = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  CHECK(remote_stats(*second).index_cached == shards);
  CHECK(remote_stats(*second).requests == 2 * shards);
  CHECK(remote_stats(*second).bytes < 1024 * shards);  // the sidecars' 404 pages
  CHECK(remote_stats(*second).shard_bytes == shard_bytes);
  CHECK(checksums(second) == expected);
  // A shard changed since (a new ETag) is scanned again; the others still come from the cache.
  fs::last_write_time(set.local[1], fs::last_write_time(set.local[1]) + std::chrono::hours(1));
  const auto third = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  CHECK(remote_stats(*third).index_cached == shards - 1);
  CHECK(checksums(third) == expected);
  // A damaged cache file costs a scan, not an error.
  const auto damaged = fs::directory_iterator(o.index_cache_dir)->path();
  fs::resize_file(damaged, 60);
  const auto fourth = make_remote_shard_reader(urls(server.url(), set), range_reads(), o);
  CHECK(remote_stats(*fourth).index_cached == shards - 1);
  CHECK(checksums(fourth) == expected);
  // What a writer killed before its rename left is removed once an hour old; nothing else is.
  const fs::path stale = fs::path(o.index_cache_dir) / "0123456789abcdef.idx.Ab3dEf";
  const fs::path fresh = fs::path(o.index_cache_dir) / "0123456789abcdef.idx.Zz9yX8";
  const fs::path other = fs::path(o.index_cache_dir) / "notes.idx.Ab3dEf";
  for (const auto& f : {stale, fresh, other}) test::write_bytes(f, {std::byte{7}});
  for (const auto& f : {stale, other}) fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::hours(2));
  CHECK(remote_stats(*make_remote_shard_reader(urls(server.url(), set), range_reads(), o)).index_cached == shards);
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(fresh));
  CHECK(fs::exists(other));
  for (const auto& f : {fresh, other}) fs::remove(f);
  // Whole-shard mode uses the same cache.
  shard_options whole;
  whole.window_shards = 2;
  const auto fifth = make_remote_shard_reader(urls(server.url(), set), whole, o);
  CHECK(remote_stats(*fifth).index_cached == shards);
  CHECK(fifth->size() == make_shard_reader(set.local)->size());
  // Where HEAD is refused (a server or a URL signed for GET alone), the shards are scanned again.
  test::fault_proxy get_only(server.port(), {.refuse_head = true});
  o.index_cache_dir = (cache.path / "behind-proxy").string();
  CHECK(remote_stats(*make_remote_shard_reader(urls(get_only.url(), set), range_reads(), o)).index_cached == 0);
  const auto refused = make_remote_shard_reader(urls(get_only.url(), set), range_reads(), o);
  CHECK(remote_stats(*refused).index_cached == 0);
  CHECK(remote_stats(*refused).bytes >= shard_bytes);
  CHECK(checksums(refused) == expected);
  // A cache directory that cannot be made is named.
  o.index_cache_dir = "/proc/no-such/indexes";
  CHECK_THROWS_WITH_AS(make_remote_shard_reader(urls(server.url(), set), range_reads(), o),
                       doctest::Contains("index cache directory '/proc/no-such/indexes' cannot be made"),
                       std::invalid_argument);
}

TEST_CASE("remote.a_server_without_range_support_is_refused_clearly") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  test::fault_proxy whole(server.port(), {.strip_range = true});
  const auto remote = make_remote_shard_reader(urls(whole.url(), set), range_reads(), quick());  // indexing needs no range
  loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), test::cpu_loader(4, 1, 7));
  CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("per-sample reads need range support"), fatal_error);
}

TEST_CASE("remote.corrupt_samples_follow_on_error_like_local_ones") {
  if (!test::have_nginx()) {
    test::skip_case("nginx is not installed (Debian: nginx-light)");
    return;
  }
  const no_proxies direct;
  temp_dir d;
  auto files = test::jpeg_class_folder(d.path / "images", 6, 40, 0, 48);
  test::write_bytes(files[2].path, {std::byte{0xFF}, std::byte{0xD8}, std::byte{0x00}});  // truncated JPEG
  fs::create_directories(d.path / "www");
  const auto local = write_shards(files, (d.path / "www" / "bad").string(), 1 << 20);
  test::nginx_server server(d.path / "www", d.path);
  // Range reads and whole shards (through a cache of the shard, and through one too small for it).
  for (const int mode : {0, 1, 2}) {
    CAPTURE(mode);
    shard_options so = range_reads();
    remote_options ro = quick();
    if (mode > 0) so.window_shards = 1;
    if (mode == 2) ro.cache_bytes = 1024;
    const auto remote = make_remote_shard_reader({server.url() + "/" + fs::path(local[0]).filename().string()}, so, ro);
    {
      loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), test::cpu_loader(6, 1, 7));
      CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("000002.jpg"), sample_error);
    }
    pipeline_source_options skip;
    skip.on_error = error_policy::skip;
    loader_options lo = test::cpu_loader(6, 1, 7);
    lo.order.shuffle = true;
    auto src = std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)"), skip);
    auto mine = std::make_shared<pipeline_source>(make_shard_reader(local, so), parse_pipeline("center_crop(16)"), skip);
    loader l(src, lo), here(mine, lo);
    const auto b = l.next();
    REQUIRE(b);
    CHECK(b->size() == 6);
    CHECK(checksum_line(*b) == checksum_line(*here.next()));  // the same stand-in as the local shards give
    CHECK(src->failures() == 1);
    if (mode == 2) CHECK(remote_stats(*remote).streamed > 0);
  }
}

TEST_CASE("remote.a_second_pass_over_the_same_epoch_is_read_ahead_too") {
  // An evaluation run each time with epoch 0, or a second loader on the same reader: every sample
  // comes again, and must be read ahead again rather than requested by the worker waiting for it.
  served_shards served(48);
  if (!served) return;
  const auto& set = served.set;
  const remote_options o = quick();  // read_ahead 8
  const auto remote = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  const auto local = make_shard_reader(set.local);
  REQUIRE(remote->size() > *o.read_ahead + 4);
  for (const bool shuffle : {false, true}) {
    CAPTURE(shuffle);
    loader_options lo = test::cpu_loader(4, 2, 7);
    lo.order.shuffle = shuffle;
    auto pass = [&](const std::shared_ptr<image_reader>& reader, loader& l) {
      const remote_counters before = remote_stats(*reader);
      l.start_epoch(0);
      std::vector<std::string> lines;
      while (auto b = l.next()) lines.push_back(checksum_line(*b));
      const remote_counters after = remote_stats(*reader);
      // Requests count attempts: a retry on a loaded host is not a sample read twice.
      return std::make_tuple(lines, after.read_ahead - before.read_ahead,
                             (after.requests - before.requests) - (after.retries - before.retries));
    };
    loader expected_loader(std::make_shared<pipeline_source>(local, parse_pipeline("center_crop(16)")), lo);
    const auto expected = std::get<0>(pass(local, expected_loader));
    CHECK(expected.size() == (local->size() + 3) / 4);  // batches of 4, the last may be partial
    loader first(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), lo);
    loader second(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), lo);
    for (loader* l : {&first, &first, &second}) {  // the same loader again, then another one
      const auto [lines, ahead, requests] = pass(remote, *l);
      CHECK(lines == expected);
      // All but the first samples (those the workers take before any read-ahead: a few, fewer
      // than the read-ahead even on a loaded host) were read ahead, and no sample twice; with the
      // first pass's (or the last's) read-ahead of epoch 1's first positions on top at most.
      CHECK(ahead + *o.read_ahead >= remote->size());
      CHECK(requests <= remote->size() + *o.read_ahead);
    }
  }
  // Whole shards through a cache of a few of them: each pass fetches its shards ahead of use
  // again, not one by one as a worker finds its sample's shard missing.
  std::uint64_t largest = 0;
  for (const auto& p : set.local) largest = std::max<std::uint64_t>(largest, fs::file_size(p));
  remote_options small = o;
  small.cache_bytes = 6 * largest;
  shard_options two;
  two.window_shards = 2;
  const auto whole = make_remote_shard_reader(urls(served.server->url(), set), two, small);
  const auto whole_local = make_shard_reader(set.local, two);
  // One worker: with two, whether a shard is fetched ahead or on demand depends on when the other
  // worker's take frees room in the cache (the counts below are of fetches, not of bytes).
  loader_options lo = test::cpu_loader(4, 1, 7);
  lo.order.shuffle = true;
  loader expected_loader(std::make_shared<pipeline_source>(whole_local, parse_pipeline("center_crop(16)")), lo);
  std::vector<std::string> expected;
  expected_loader.start_epoch(0);
  while (auto b = expected_loader.next()) expected.push_back(checksum_line(*b));
  CHECK(expected.size() == (whole_local->size() + 3) / 4);  // batches of 4, the last may be partial
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    loader l(std::make_shared<pipeline_source>(whole, parse_pipeline("center_crop(16)")), lo);
    const remote_counters before = remote_stats(*whole);
    l.start_epoch(0);
    std::vector<std::string> lines;
    while (auto b = l.next()) lines.push_back(checksum_line(*b));
    const remote_counters after = remote_stats(*whole);
    CHECK(lines == expected);
    const std::uint64_t fetched = after.shards - before.shards, ahead = after.read_ahead - before.read_ahead;
    MESSAGE("pass " << k << ": " << fetched << " shards fetched, " << ahead << " of them ahead of use");
    CHECK(fetched + 6 >= set.names.size());  // the cache holds 6 of them: the rest are fetched again
    CHECK(4 * ahead >= 3 * fetched);  // most ahead of use (a few on demand on a loaded host; none before)
  }
}

TEST_CASE("remote.destroying_a_loader_with_requests_in_flight_returns") {
  served_shards served(40);
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  test::fault_proxy slow(server.port(), {.latency_ms = 300});
  remote_options o = quick();
  o.read_ahead = 32;
  auto remote = make_remote_shard_reader(urls(slow.url(), set), range_reads(), o);
  const std::uint64_t indexing = remote_stats(*remote).requests;
  test::run_with_timeout(std::chrono::seconds(20), [&] {
    {
      loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), test::cpu_loader(2, 2, 7));
      REQUIRE(l.next());
      // The read-ahead has queued many more samples than the batch, most still waiting on the proxy.
      CHECK(remote_stats(*remote).read_ahead > 8);
    }
    remote.reset();  // the transfer loop abandons its requests and stops
  }, "destroying a loader and its remote reader with requests in flight");
  CHECK(slow.requests() > static_cast<int>(indexing) + 2);
}

TEST_CASE("remote.requests_in_flight_follow_the_latency_when_not_given") {
  served_shards served(150);  // (the fixture names its images by one letter: 158 at most)
  if (!served) return;
  const auto& set = served.set;
  const auto local = checksums(make_shard_reader(set.local));
  remote_options o = quick();
  o.requests_in_flight.reset();
  o.read_ahead.reset();
  o.stall_timeout_s = 10;  // a loaded host may hold an answer past quick()'s second
  {
    test::fault_proxy slow(served.server->port(), {.latency_ms = 300});
    const auto remote = make_remote_shard_reader(urls(slow.url(), set), range_reads(), o);
    // From the floor: 64 in flight, twice as many read ahead.
    CHECK(remote_stats(*remote).requests_in_flight == kMinRequestsInFlight);
    CHECK(remote_stats(*remote).read_ahead_depth == 2 * kMinRequestsInFlight);
    // 64 requests of 300 ms each let the loader read 213 samples a second, where these tiny JPEGs
    // decode many times faster even under a sanitizer: the link holds it back, and more requests
    // go out at once, each growth kept as it raises the rate.
    test::run_with_timeout(std::chrono::seconds(60), [&] {
      CHECK(checksums(remote) == local);
      CHECK(checksums(remote) == local);  // a second loader on the same reader: 4 epochs in all
    }, "four epochs at 300 ms");
    const remote_counters c = remote_stats(*remote);
    MESSAGE("at 300 ms: " << c.requests_in_flight << " in flight at the end, " << slow.peak_connections()
                          << " connections at most");
    // More ran at once than the floor and the 2 workers' own (the cap at the end may have come
    // down again as the last epoch ran out of samples to read ahead).
    CHECK(slow.peak_connections() > static_cast<int>(kMinRequestsInFlight) + 2);
    CHECK(c.read_ahead_depth == 2 * c.requests_in_flight);
    CHECK(c.retries == 0);
  }
  // Given, they stay as given, and read the same.
  test::fault_proxy fast(served.server->port(), {});
  o.requests_in_flight = 16;
  const auto fixed = make_remote_shard_reader(urls(fast.url(), set), range_reads(), o);
  CHECK(checksums(fixed) == local);
  CHECK(remote_stats(*fixed).requests_in_flight == 16);
  CHECK(remote_stats(*fixed).read_ahead_depth == 2 * kMinRequestsInFlight);  // read_ahead unset: 128 at least
  // 16, the 2 workers' own, and a connection closing as another opens: far from the 128 read ahead.
  CHECK(fast.peak_connections() <= 2 * 16);
  o.read_ahead = 40;
  CHECK(remote_stats(*make_remote_shard_reader(urls(fast.url(), set), range_reads(), o)).read_ahead_depth == 40);
  // Whole shards have no read-ahead of samples; their fetches stay at the floor.
  o.requests_in_flight.reset();
  o.read_ahead.reset();
  const auto whole = make_remote_shard_reader(urls(fast.url(), set), {}, o);
  CHECK(shard_window_checksums(whole).size() == local.size());
  CHECK(remote_stats(*whole).requests_in_flight == kMinRequestsInFlight);
  CHECK(remote_stats(*whole).read_ahead_depth == 0);
  CHECK(remote_stats(*whole).shards > 0);
}

TEST_CASE("remote.requests_in_flight_share_one_transfer_thread") {
  served_shards served(40);
  if (!served) return;
  const auto& set = served.set;
  auto threads = [] {
    return std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator{});
  };
  const auto before = threads();
  remote_options o = quick();
  o.requests_in_flight = 1024;  // the most there may be; a thread each would be 1024 threads
  o.read_ahead = 512;
  const auto fetchers_before = fetch_threads();
  const auto remote = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  // The reader's transfer loop, whatever the number in flight (one a request would be 1024). The
  // process's raw count may also see a short-lived thread of another library come or go, so it
  // is bounded loosely; the named transfer threads are counted exactly below.
  CHECK(threads() - before <= 3);
  // It is named, and batch-scheduled (it waits for a busy decoder's slice instead of preempting it).
  auto added = fetch_threads();
  for (const auto& [tid, policy] : fetchers_before) added.erase(tid);
  REQUIRE(added.size() == 1);
  CHECK(added.begin()->second == SCHED_BATCH);
  CHECK(checksums(remote) == checksums(make_shard_reader(set.local)));
  CHECK(remote_stats(*remote).retries == 0);
  // Without batch scheduling the thread keeps the process's policy, and reads the same.
  o.batch_scheduling = false;
  const auto plain = make_remote_shard_reader(urls(served.server->url(), set), range_reads(), o);
  auto plain_added = fetch_threads();
  for (const auto& [tid, policy] : fetchers_before) plain_added.erase(tid);
  plain_added.erase(added.begin()->first);
  REQUIRE(plain_added.size() == 1);
  CHECK(plain_added.begin()->second == sched_getscheduler(0));
  CHECK(plain_added.begin()->second != SCHED_BATCH);
  CHECK(checksums(plain) == checksums(make_shard_reader(set.local)));
}

TEST_CASE("remote.s3_shards_are_signed_listed_and_equal_the_local_ones") {
  if (!test::moto_s3::available()) {
    test::skip_case("moto is not installed (scripts/install-test-env.sh)");
    return;
  }
  const no_proxies direct;
  temp_dir d;
  const auto set = make_shards(d.path);
  test::moto_s3 s3(d.path);
  const auto [key_id, secret] = s3.setup("shards", "train dir/", set.local);  // a space to encode in keys
  const auto expected = checksums(make_shard_reader(set.local));
  {
    const aws_env env(key_id, secret, s3.endpoint());
    // A glob lists the prefix (ListObjectsV2); a range names the objects.
    const auto listed = expand_remote_pattern("s3://shards/train dir/train-*.tar");
    REQUIRE(listed.size() == set.names.size());
    CHECK(listed.front() == "s3://shards/train dir/" + set.names.front());
    CHECK(checksums(make_remote_shard_reader(listed, range_reads(), quick())) == expected);
    const std::string last = set.names.back().substr(6, 6);
    const auto ranged = expand_remote_pattern("s3://shards/train dir/train-{000000.." + last + "}.tar");
    CHECK(ranged == listed);
    CHECK_THROWS_WITH_AS(expand_remote_pattern("s3://shards/train dir/none-*.tar"), doctest::Contains("matches no object"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(make_remote_shard_reader({"s3://shards/train dir/missing.tar"}, range_reads(), quick()),
                         doctest::Contains("HTTP 404"), fatal_error);
    // Whole shards under the shard-aware shuffle (no sidecars uploaded: each indexed whole once).
    shard_options window;
    window.window_shards = 2;
    const auto whole = make_remote_shard_reader(listed, window, quick());
    CHECK(shard_window_checksums(whole) == shard_window_checksums(make_shard_reader(set.local, window)));
    CHECK(remote_stats(*whole).sidecars == 0);
    CHECK(remote_stats(*whole).streamed == 0);
    // The index cache checks each object's size and ETag with a signed HEAD request.
    temp_dir cache;
    remote_options indexes = quick();
    indexes.index_cache_dir = cache.path.string();
    CHECK(remote_stats(*make_remote_shard_reader(listed, range_reads(), indexes)).index_cached == 0);
    const auto cached = make_remote_shard_reader(listed, range_reads(), indexes);
    CHECK(remote_stats(*cached).index_cached == set.names.size());
    CHECK(checksums(cached) == expected);
  }
  {  // a wrong secret: refused at once, and the secret appears nowhere
    const aws_env env(key_id, "not-the-secret-" + secret, s3.endpoint());
    remote_options o = quick();
    o.max_attempts = 20;
    try {
      (void)make_remote_shard_reader({"s3://shards/train dir/" + set.names.front()}, range_reads(), o);
      FAIL("no error");
    } catch (const fatal_error& e) {
      const std::string what = e.what();
      CHECK(what.find("HTTP 403") != std::string::npos);
      CHECK(what.find("not retried") != std::string::npos);
      CHECK(what.find("s3://shards/train dir/" + set.names.front()) != std::string::npos);
      CHECK(what.find(secret) == std::string::npos);
    }
  }
}

namespace {
/// The checksum lines of two shuffled epochs of `reader` in whole-shard mode order.
std::vector<std::string> shard_window_checksums(const std::shared_ptr<image_reader>& reader, std::size_t workers,
                                                std::uint32_t epochs) {
  loader_options o = test::cpu_loader(5, workers, 7);
  o.order.shuffle = true;
  loader l(std::make_shared<pipeline_source>(reader, parse_pipeline("rrc(16),hflip")), o);
  REQUIRE(l.order().groups());  // the reader's shards are the order's groups
  return test::epoch_checksums(l, 0, epochs - 1);
}
}  // namespace

TEST_CASE("remote.shards_are_read_whole_by_default_with_a_window_sized_to_the_cache") {
  served_shards served(96, 16384);  // about 8 samples a shard
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  REQUIRE(set.names.size() >= 6);
  std::uint64_t largest = 0;
  for (const auto& p : set.local) largest = std::max<std::uint64_t>(largest, fs::file_size(p));
  const auto window_of = [](std::uint32_t w) {
    shard_options o;
    o.window_shards = w;
    return o;
  };
  // Local shards keep the exact global shuffle by default; remote ones are read whole.
  CHECK(make_shard_reader(set.local)->groups() == nullptr);
  const auto remote = make_remote_shard_reader(urls(server.url(), set), {}, quick());
  const remote_counters before = remote_stats(*remote);
  CHECK(before.window_shards == 4);  // the default 1 GiB holds far more than 3 x 4 shards
  CHECK(before.cache_bytes == remote_options{}.cache_bytes);
  REQUIRE(remote->groups() != nullptr);
  CHECK(remote->groups()->window == 4);
  // The same batches as the local shards in the shard-aware order of that window, bit for bit,
  // fetched a shard per request.
  CHECK(shard_window_checksums(remote) == shard_window_checksums(make_shard_reader(set.local, window_of(4))));
  const remote_counters after = remote_stats(*remote);
  CHECK(after.shards > 0);
  CHECK(after.streamed == 0);
  CHECK(after.requests - before.requests <= 2 * set.names.size());  // not one a sample
  // The window is a third of the cache in shards, from 1 to 4, and a given one is kept.
  for (const auto& [cache, expected] : std::vector<std::pair<std::uint64_t, std::uint32_t>>{
           {3 * largest, 1}, {6 * largest + 1, 2}, {9 * largest, 3}, {largest / 2, 1}}) {
    CAPTURE(cache);
    remote_options o = quick();
    o.cache_bytes = cache;
    CHECK(remote_stats(*make_remote_shard_reader(urls(server.url(), set), {}, o)).window_shards == expected);
  }
  remote_options small = quick();
  small.cache_bytes = 3 * largest;
  CHECK(remote_stats(*make_remote_shard_reader(urls(server.url(), set), window_of(3), small)).window_shards == 3);
  // Window 0: a range request per sample, the same batches as the local shards' default order.
  const auto ranged = make_remote_shard_reader(urls(server.url(), set), window_of(0), quick());
  CHECK(remote_stats(*ranged).window_shards == 0);
  CHECK(remote_stats(*ranged).cache_bytes == 0);
  CHECK(ranged->groups() == nullptr);
  CHECK(checksums(ranged) == checksums(make_shard_reader(set.local)));
}

TEST_CASE("remote.whole_shards_are_cached_and_read_once_per_epoch") {
  served_shards served(96, 16384);  // about 8 samples a shard
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  REQUIRE(set.names.size() >= 6);
  shard_options window;
  window.window_shards = 2;
  // The local shards in the same shard-aware order: the reference, bit for bit.
  const auto expected = shard_window_checksums(make_shard_reader(set.local, window));
  CHECK(expected != checksums(make_shard_reader(set.local)));  // another order than the global shuffle
  std::uint64_t shard_bytes = 0, largest = 0;
  for (const auto& p : set.local) {
    shard_bytes += fs::file_size(p);
    largest = std::max<std::uint64_t>(largest, fs::file_size(p));
  }
  const std::uint64_t shards = set.names.size();

  SUBCASE("a cache of every shard: each fetched once, nothing read sample by sample") {
    const auto remote = make_remote_shard_reader(urls(server.url(), set), window, quick());
    CHECK(shard_window_checksums(remote) == expected);
    const remote_counters c = remote_stats(*remote);
    CHECK(c.window_shards == 2);
    CHECK(c.sidecars == shards);
    CHECK(c.streamed == 0);
    CHECK(c.shards == shards);  // the second epoch finds them all still cached
    std::uint64_t index_bytes = 0;
    for (const auto& p : set.local) index_bytes += fs::file_size(shard_index_path(p));
    CHECK(c.bytes == shard_bytes + index_bytes);  // every byte of every shard once
    CHECK(c.requests == 2 * shards);
    CHECK(c.read_ahead > 0);  // shards fetched ahead of their first sample
    CHECK(shard_window_checksums(remote, 1) == expected);  // any worker count
  }
  SUBCASE("without sidecar indexes, the shards fetched whole to be indexed stay in the cache") {
    std::uint64_t smallest = largest;
    for (const auto& p : set.local) {
      fs::remove(shard_index_path(p));
      smallest = std::min<std::uint64_t>(smallest, fs::file_size(p));
    }
    // Beyond the shards' bytes only the servers' short "not found" answers for the sidecars.
    const auto once = [&](std::uint64_t bytes) { return bytes >= shard_bytes && bytes - shard_bytes < smallest; };
    {  // a cache of every shard: each is fetched once, for its index, and served from the cache
      const auto remote = make_remote_shard_reader(urls(server.url(), set), window, quick());
      CHECK(shard_window_checksums(remote) == expected);
      const remote_counters c = remote_stats(*remote);
      CHECK(c.sidecars == 0);
      CHECK(once(c.bytes));  // no shard twice, over two epochs
      CHECK(c.shards == 0);           // no fetch after the indexing one
      CHECK(c.streamed == 0);
    }
    {  // room for two shards: those two are kept, the rest fetched again when the order needs them
      remote_options o = quick();
      o.cache_bytes = 2 * largest;
      const auto remote = make_remote_shard_reader(urls(server.url(), set), window, o);
      CHECK(once(remote_stats(*remote).bytes));  // indexed: every shard once
      CHECK(shard_window_checksums(remote) == expected);
      CHECK(remote_stats(*remote).shards > 0);
    }
  }
  SUBCASE("a cache of three windows: each shard about once per epoch") {
    remote_options o = quick();
    o.cache_bytes = 6 * largest;
    const auto remote = make_remote_shard_reader(urls(server.url(), set), window, o);
    // One worker: with two, a sample of a batch starting late may fetch its shard again, as often
    // as the workers' interleaving makes it (the count below is of fetches).
    CHECK(shard_window_checksums(remote, 1, 3) == shard_window_checksums(make_shard_reader(set.local, window), 2, 3));
    const remote_counters c = remote_stats(*remote);
    CHECK(c.shards >= 2 * shards);      // evicted once the order passed them: fetched again next epoch
    CHECK(c.shards <= 3 * shards + 2);  // about once per epoch: not once per sample
    CHECK(c.streamed <= remote->size() / 10);
  }
  SUBCASE("a cache smaller than two windows, than one window, than one shard: still exact") {
    for (const std::uint64_t cap : {3 * largest, largest + 1, largest / 2}) {
      CAPTURE(cap);
      remote_options o = quick();
      o.cache_bytes = cap;
      const auto remote = make_remote_shard_reader(urls(server.url(), set), window, o);
      test::run_with_timeout(std::chrono::seconds(60), [&] { CHECK(shard_window_checksums(remote) == expected); },
                             "reading through a small cache");
      const remote_counters c = remote_stats(*remote);
      if (cap < largest) {
        CHECK(c.shards == 0);  // no shard fits: every sample is range-read
        CHECK(c.streamed == 2 * remote->size());
      } else {
        CHECK(c.shards > 0);
        if (cap < 2 * largest) CHECK(c.streamed > 0);  // the window's other shard has no room
      }
    }
  }
  SUBCASE("a cache directory holds the shards as unlinked mapped files, gone with the reader") {
    temp_dir cache;
    remote_options o = quick();
    o.cache_dir = (cache.path / "shards").string();
    o.cache_bytes = 4 * largest;
    // The cache's files: this process's mappings of deleted files in the directory (bytes, count).
    const auto mapped = [&] {
      std::ifstream maps("/proc/self/maps");
      const std::string prefix = fs::canonical(o.cache_dir).string() + "/pinfeed-shard-";
      std::uint64_t bytes = 0, files = 0;
      for (std::string line; std::getline(maps, line);) {
        if (line.find(prefix) == std::string::npos || line.find("(deleted)") == std::string::npos) continue;
        const auto dash = line.find('-'), space = line.find(' ');
        bytes += std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16) -
                 std::stoull(line.substr(0, dash), nullptr, 16);
        ++files;
      }
      return std::pair{bytes, files};
    };
    auto remote = make_remote_shard_reader(urls(server.url(), set), window, o);
    loader_options lo = test::cpu_loader(5, 2, 7);
    lo.order.shuffle = true;
    {
      loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("rrc(16),hflip")), lo);
      REQUIRE(l.next());
      // Shards are written to the cache as they arrive, on a thread of their own, each file there
      // only between mkostemp and unlink: wait for a moment with a shard mapped and none listed
      // (a killed process leaves nothing here).
      std::pair<std::uint64_t, std::uint64_t> seen{0, 0};
      test::run_with_timeout(std::chrono::seconds(20), [&] {
        for (;;) {
          seen = mapped();
          if (seen.second >= 1 && fs::is_empty(o.cache_dir)) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }, "a cached shard mapped, with the cache directory empty");
      CHECK(seen.second >= 1);
      CHECK(seen.first <= o.cache_bytes + seen.second * 4096);  // mappings round up to pages
    }
    CHECK(shard_window_checksums(remote) == expected);
    remote.reset();
    CHECK(mapped().second == 0);
    CHECK(fs::is_empty(o.cache_dir));
    // A cache directory that cannot be made is named.
    test::write_bytes(cache.path / "file", {std::byte{1}});
    o.cache_dir = (cache.path / "file" / "sub").string();
    CHECK_THROWS_WITH_AS(make_remote_shard_reader(urls(server.url(), set), window, o),
                         doctest::Contains(("cache directory '" + o.cache_dir + "' cannot be made").c_str()), std::invalid_argument);
  }
  SUBCASE("faults on the way: retried, and the batches stay identical") {
    test::fault_proxy proxy(server.port(), {.unavailable_every = 5, .reset_every = 7, .stall_every = 13, .stall_ms = 3000});
    remote_options o = quick();
    o.max_attempts = 10;
    const auto remote = make_remote_shard_reader(urls(proxy.url(), set), window, o);
    CHECK(shard_window_checksums(remote) == expected);
    check_every_fault_retried(proxy, *remote);
  }
  SUBCASE("a server without range support serves whole shards") {
    test::fault_proxy whole(server.port(), {.strip_range = true});
    const auto remote = make_remote_shard_reader(urls(whole.url(), set), window, quick());
    CHECK(shard_window_checksums(remote) == expected);
  }
  SUBCASE("a shard rewritten after its sidecar index was made is refused") {
    const auto remote = make_remote_shard_reader(urls(server.url(), set), window, quick());
    for (const auto& p : set.local) {
      std::ofstream grow(p, std::ios::binary | std::ios::app);
      grow << std::string(512, '\0');
    }
    loader_options lo = test::cpu_loader(5, 1, 7);
    lo.order.shuffle = true;
    loader l(std::make_shared<pipeline_source>(remote, parse_pipeline("center_crop(16)")), lo);
    CHECK_THROWS_WITH_AS((void)l.next(), doctest::Contains("changed after it was indexed: size"), fatal_error);
  }
}

TEST_CASE("remote.a_bad_sidecar_index_is_named") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  auto& server = *served.server;
  {
    std::ofstream bad(shard_index_path(set.local[1]), std::ios::trunc);
    bad << "pinfeed-tar-index 1 4096 2 jpg;jpeg;png;ppm;bmp;pgm;tif;tiff;webp;jfif;jpe cls\n0 100 3 a.jpg\n";
  }
  CHECK_THROWS_WITH_AS(make_remote_shard_reader(urls(server.url(), set), range_reads(), quick()),
                       doctest::Contains((set.names[1] + ".idx' line 1: says 2 samples, but 1 lines follow").c_str()),
                       std::invalid_argument);
  // Made with other member keys: not used, the shard is indexed whole instead.
  shard_options jpg_only;
  jpg_only.image_keys = "jpg";
  write_shard_index(set.local[1], jpg_only);
  const auto remote = make_remote_shard_reader(urls(server.url(), set), range_reads(), quick());
  CHECK(remote_stats(*remote).sidecars == set.names.size() - 1);
  CHECK(checksums(remote) == checksums(make_shard_reader(set.local)));
}

TEST_CASE("remote.a_loader_budget_counts_the_shard_cache_or_the_read_ahead") {
  served_shards served;
  if (!served) return;
  const no_proxies clean;
  const auto& set = served.set;
  const std::string base = served.server->url();
  const auto loader_over = [](const std::shared_ptr<image_reader>& reader, std::uint64_t budget) {
    loader_options o = test::cpu_loader(5, 2, 7);
    o.memory_budget = budget;
    return loader(std::make_shared<pipeline_source>(reader, parse_pipeline("rrc(16),hflip")), o);
  };
  // Whole shards: the cache's cap is the reader's part, named with the option that sets it.
  remote_options ro = quick();
  ro.cache_bytes = 64u << 20;
  const auto whole = make_remote_shard_reader(urls(base, set), {}, ro);
  REQUIRE(whole->memory().size() == 1);
  CHECK(whole->memory()[0].bytes == ro.cache_bytes);
  CHECK_THROWS_WITH_AS(loader_over(whole, 32u << 20),
                       doctest::Contains("shard cache (remote shards, remote_options::cache_bytes) 64.0 MiB"),
                       std::invalid_argument);
  auto fits = loader_over(whole, 96u << 20);
  CHECK(fits.next());
  // Range reads: the read-ahead's answers (at most four read-aheads of the mean sample).
  shard_options ranged;
  ranged.window_shards = 0;
  const auto range = make_remote_shard_reader(urls(base, set), ranged, quick());
  REQUIRE(range->memory().size() == 1);
  CHECK(range->memory()[0].consumer == "read-ahead (remote shards, range reads)");
  CHECK(range->memory()[0].bytes > 0);
  CHECK(range->memory()[0].bytes < (1u << 20));  // read_ahead 8 of samples of about 1 KiB
  CHECK(loader_over(range, 16u << 20).next());
}

TEST_CASE("remote.adapted_range_read_ahead_holds_at_most_kReadAheadBytes_of_samples_of_their_mean_size") {
  // Contract (kReadAheadBytes): with the requests in flight adapting, they go up to half of
  // kReadAheadBytes in samples of the shards' mean size (kMinRequestsInFlight at least, a quarter
  // of the open-file limit at most), the read-ahead to twice them, and memory() counts four
  // read-aheads. Samples of 1 MiB: 128 in flight, a read-ahead of 256 samples, 1 GiB. (The
  // suite's other shards hold samples of about 1 KiB, whose bound is the open-file one.)
  if (!test::have_nginx()) {
    test::skip_case("nginx is not installed (Debian: nginx-light)");
    return;
  }
  const no_proxies clean;
  temp_dir dir;
  constexpr std::uint64_t mean = 1u << 20;
  fs::create_directories(dir.path / "images" / "c");
  std::vector<image_file> files;
  for (int i = 0; i < 4; ++i) {  // what the index reads is only the members' sizes: no image needs decoding
    const fs::path p = dir.path / "images" / "c" / (std::to_string(i) + ".jpg");
    std::vector<std::byte> bytes(mean);
    fill_random_bytes(philox_stream(31, 0, static_cast<std::uint64_t>(i)), bytes);
    test::write_bytes(p, bytes);
    files.push_back({p.string(), 0});
  }
  const shard_set set = shards_of(files, dir.path, 64u << 20);
  const test::nginx_server server(set.www, dir.path);
  shard_options ranged;
  ranged.window_shards = 0;
  remote_options adaptive = quick();
  adaptive.requests_in_flight.reset();
  adaptive.read_ahead.reset();
  const auto reader = make_remote_shard_reader(urls(server.url(), set), ranged, adaptive);
  const std::size_t share = remote::open_file_share();
  const std::size_t in_flight = std::clamp<std::size_t>(remote::kReadAheadBytes / (2 * mean), kMinRequestsInFlight, share);
  MESSAGE("a quarter of the open-file limit: " << share << "; requests in flight at most: " << in_flight);
  REQUIRE(reader->memory().size() == 1);
  CHECK(reader->memory()[0].bytes == 4 * (2 * in_flight) * mean);
  CHECK(reader->memory()[0].bytes <= 4 * remote::kReadAheadBytes);
  if (share > in_flight) CHECK(in_flight == 128);  // the size's bound, not the open files', is the one that holds
}

TEST_CASE("remote.range_read_ahead_keeps_within_what_a_loader_budget_leaves") {
  served_shards served;
  if (!served) return;
  const no_proxies clean;
  const auto& set = served.set;
  const std::string base = served.server->url();
  shard_options ranged;
  ranged.window_shards = 0;
  remote_options adaptive = quick();
  adaptive.requests_in_flight.reset();  // both adapt: the read-ahead follows the requests in flight
  adaptive.read_ahead.reset();
  const auto make = [&] { return make_remote_shard_reader(urls(base, set), ranged, adaptive); };
  const auto unlimited = make();
  const std::uint64_t most = unlimited->memory().at(0).bytes;
  unlimited->limit_memory(std::uint64_t{1} << 40);  // more than it takes: unchanged
  CHECK(unlimited->memory().at(0).bytes == most);
  // The least: the read-ahead of kMinRequestsInFlight requests (8 samples each), which does not shrink further.
  const auto least_reader = make();
  least_reader->limit_memory(0);
  const std::uint64_t least = least_reader->memory().at(0).bytes;
  CHECK(least <= most);
  CHECK(least % (8 * kMinRequestsInFlight) == 0);
  const std::uint64_t mean = least / (8 * kMinRequestsInFlight);
  // Unlimited, the requests in flight may go up to a quarter of the open-file limit (samples of
  // about 1 KiB would allow far more): the most is that many read-aheads' worth, the least the
  // floor's, whatever the first requests in flight were.
  const std::size_t share = remote::open_file_share();
  REQUIRE(remote::kReadAheadBytes / (2 * mean) >= share);
  CHECK(most == 8 * share * mean);
  if (most > least) {
    const auto between = make();
    const std::uint64_t room = 8 * (kMinRequestsInFlight + 10) * mean + mean / 2;
    between->limit_memory(room);
    CHECK(between->memory().at(0).bytes <= room);
    CHECK(between->memory().at(0).bytes > least);
  }
  // Through a loader: a budget with room for the slots and the least read-ahead, not the most,
  // is met by shrinking the read-ahead (it failed before), and one without room for the least
  // still fails, naming it.
  loader_options o = test::cpu_loader(5, 1, 7);
  const auto pipeline_over = [](const std::shared_ptr<image_reader>& r) {
    return std::make_shared<pipeline_source>(r, parse_pipeline("rrc(16),hflip"));
  };
  const std::uint64_t slots = 8u << 20;  // far more than 3 slots of five 16x16 images
  o.memory_budget = least + slots;
  loader fits(pipeline_over(make()), o);
  CHECK(fits.next());
  o.memory_budget = least / 2;
  CHECK_THROWS_WITH_AS(loader(pipeline_over(make()), o), doctest::Contains("read-ahead (remote shards, range reads)"),
                       std::invalid_argument);
}

TEST_CASE("remote.make_shard_source_reads_a_remote_pattern") {
  served_shards served;
  if (!served) return;
  const auto& set = served.set;
  // train-000000.tar .. train-00000N.tar as one brace pattern.
  char last[16];
  std::snprintf(last, sizeof last, "%06zu", set.names.size() - 1);
  const std::string pattern = served.server->url() + "/train-{000000.." + last + "}.tar";
  image_source_options o;
  o.remote = quick();
  o.shard = range_reads();
  const auto made = make_shard_source(pattern, "center_crop(16)", o);
  CHECK(made->size() == make_shard_reader(set.local)->size());
  CHECK(checksums(made->reader()) == checksums(make_shard_reader(set.local)));
  CHECK(remote_stats(*made->reader()).requests > 0);  // read over HTTP, not from the local files
  const std::string missing = served.server->url() + "/valid-{000..002}.tar";
  try {
    (void)make_shard_source(missing, "center_crop(16)", o);
    FAIL("a pattern of shards the server does not have was read");
  } catch (const std::exception& e) {
    MESSAGE(std::string(e.what()));
    CHECK(std::string(e.what()).find("valid-000.tar") != std::string::npos);
    CHECK(std::string(e.what()).find("404") != std::string::npos);
  }
}
