// Remote tar shards (remote.hpp): locations, one libcurl request with its retries, a pool of fetch
// threads, and the reader that indexes each shard once and range-reads every sample.
#include "pinfeed/loaders/remote.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fnmatch.h>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "detail/tar_samples.hpp"
#include "pinfeed/runtime/error.hpp"

#if PINFEED_HAVE_CURL
#include <curl/curl.h>
#endif

namespace pinfeed::loaders {

bool is_remote_location(std::string_view l) noexcept {
  return l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0 || l.rfind("s3://", 0) == 0;
}

std::string redact_location(std::string_view l) {
  std::string out(l.substr(0, l.find_first_of("?#")));
  const auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    const auto host = scheme + 3;
    const auto path = out.find('/', host);
    const auto at = out.rfind('@', path == std::string::npos ? std::string::npos : path);
    if (at != std::string::npos && at >= host) out.erase(host, at + 1 - host);
  }
  return out;
}

#if PINFEED_HAVE_CURL

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

/// RFC 3986 encoding of an S3 key, '/' kept.
std::string encode_key(std::string_view key) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// Where a location is requested from and how it is signed.
struct endpoint {
  std::string url;    ///< with credentials nowhere in it
  std::string shown;  ///< for messages
  bool s3 = false;
  std::string region;
};

struct s3_parts {
  std::string bucket, key;
};

s3_parts split_s3(std::string_view location) {
  const std::string_view rest = location.substr(5);
  const auto slash = rest.find('/');
  s3_parts p{std::string(rest.substr(0, slash)), slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
  if (p.bucket.empty()) throw std::invalid_argument("s3 location '" + redact_location(location) + "' has no bucket");
  return p;
}

std::string s3_region() {
  std::string r = env("AWS_REGION");
  if (r.empty()) r = env("AWS_DEFAULT_REGION");
  return r.empty() ? "us-east-1" : r;
}

/// The URL of an S3 bucket (path-style under an explicit endpoint) with `suffix` appended.
endpoint s3_endpoint(const std::string& bucket, const std::string& suffix, const std::string& shown) {
  endpoint e;
  e.s3 = true;
  e.region = s3_region();
  e.shown = shown;
  std::string base = env("AWS_ENDPOINT_URL_S3");
  if (base.empty()) base = env("AWS_ENDPOINT_URL");
  if (!base.empty()) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    e.url = base + "/" + bucket + suffix;
  } else {
    e.url = "https://" + bucket + ".s3." + e.region + ".amazonaws.com" + suffix;
  }
  return e;
}

endpoint resolve(std::string_view location) {
  if (location.rfind("s3://", 0) == 0) {
    const s3_parts p = split_s3(location);
    return s3_endpoint(p.bucket, "/" + encode_key(p.key), redact_location(location));
  }
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0)
    return {std::string(location), redact_location(location), false, {}};
  throw std::invalid_argument("'" + redact_location(location) + "' is not an http://, https:// or s3:// location");
}

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("libcurl failed to initialize");
  });
}

/// One request: a whole object, or `length` bytes at `offset`.
struct request {
  std::uint64_t offset = 0, length = 0;
  bool range = false;
};

struct response {
  long status = 0;
  std::vector<std::byte> body;
  std::string etag;
  std::uint64_t total = 0;  ///< the object's size (Content-Range's total, or Content-Length of a 200)
  bool have_total = false;
};

/// What decides a retry.
enum class outcome { ok, retry, fail };

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::size_t a = 0;
  while (a < s.size() && s[a] == ' ') ++a;
  return s.substr(a);
}

/// A libcurl easy handle per thread, reused so that connections stay open.
class session {
 public:
  session() {
    curl_init_once();
    h_ = curl_easy_init();
    if (h_ == nullptr) throw std::runtime_error("libcurl: cannot create a handle");
  }
  ~session() { curl_easy_cleanup(h_); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Performs one attempt; returns libcurl's code, fills `r` and, on a transport error, `error`.
  CURLcode perform(const endpoint& e, const request& q, const remote_options& o, const std::atomic<bool>* stop,
                   response& r, std::string& error) {
    curl_easy_reset(h_);
    r = response{};
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(h_, CURLOPT_URL, e.url.c_str());
    curl_easy_setopt(h_, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h_, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h_, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_s * 1000));
    curl_easy_setopt(h_, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h_, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(o.stall_timeout_s + 0.999)));
    curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, &session::on_body);
    curl_easy_setopt(h_, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h_, CURLOPT_HEADERFUNCTION, &session::on_header);
    curl_easy_setopt(h_, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(h_, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h_, CURLOPT_XFERINFOFUNCTION, &session::on_progress);
    curl_easy_setopt(h_, CURLOPT_XFERINFODATA, stop);
    std::string range;
    if (q.range) {
      range = std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1);
      curl_easy_setopt(h_, CURLOPT_RANGE, range.c_str());
    }
    curl_slist* headers = nullptr;
    std::string token_header, sigv4, user, secret;
    if (e.s3) {
      user = env("AWS_ACCESS_KEY_ID");
      secret = env("AWS_SECRET_ACCESS_KEY");
      if (!user.empty()) {
        sigv4 = "aws:amz:" + e.region + ":s3";
        curl_easy_setopt(h_, CURLOPT_AWS_SIGV4, sigv4.c_str());
        curl_easy_setopt(h_, CURLOPT_USERNAME, user.c_str());
        curl_easy_setopt(h_, CURLOPT_PASSWORD, secret.c_str());
        // SHA-256 of the empty body of a GET, which S3 wants named in a header of its own.
        headers = curl_slist_append(
            headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        if (const std::string token = env("AWS_SESSION_TOKEN"); !token.empty()) {
          token_header = "x-amz-security-token: " + token;
          headers = curl_slist_append(headers, token_header.c_str());
        }
      }
    }
    if (headers != nullptr) curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers);
    if (q.range) r.body.reserve(q.length);
    const CURLcode code = curl_easy_perform(h_);
    if (headers != nullptr) curl_slist_free_all(headers);
    curl_easy_setopt(h_, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(h_, CURLOPT_USERNAME, nullptr);
    curl_easy_setopt(h_, CURLOPT_PASSWORD, nullptr);
    std::fill(secret.begin(), secret.end(), '\0');
    curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &r.status);
    if (code != CURLE_OK) error = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(code));
    return code;
  }

 private:
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto* r = static_cast<response*>(user);
    const auto* p = reinterpret_cast<const std::byte*>(data);
    r->body.insert(r->body.end(), p, p + size * n);
    return size * n;
  }
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
    auto* r = static_cast<response*>(user);
    const std::string line(data, size * n);
    const auto colon = line.find(':');
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or a 100): forget the last
      r->etag.clear();
      r->have_total = false;
    } else if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      const std::string value = trim(line.substr(colon + 1));
      if (name == "etag") {
        r->etag = value;
      } else if (name == "content-range") {  // bytes a-b/total
        const auto slash = value.rfind('/');
        if (slash != std::string::npos && value.substr(slash + 1) != "*") {
          r->total = std::strtoull(value.c_str() + slash + 1, nullptr, 10);
          r->have_total = true;
        }
      } else if (name == "content-length" && !r->have_total) {
        r->total = std::strtoull(value.c_str(), nullptr, 10);
        r->have_total = true;
      }
    }
    return size * n;
  }
  static int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto* stop = static_cast<const std::atomic<bool>*>(user);
    return stop != nullptr && stop->load(std::memory_order_relaxed) ? 1 : 0;
  }
  CURL* h_ = nullptr;
};

session& this_thread_session() {
  thread_local session s;
  return s;
}

/// Thrown when a request is abandoned because its reader is going away.
struct cancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct request_counters {
  std::atomic<std::uint64_t> requests{0}, retries{0}, bytes{0}, wait_ns{0};
};

/// Sleeps up to `ms`, in short steps, returning early once `stop` is set.
void pause(double ms, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (stop != nullptr && stop->load()) throw cancelled("cancelled");
    const auto left = std::chrono::duration_cast<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(10), left));
  }
}

std::string describe(const endpoint& e, const request& q) {
  return "GET " + e.shown + (q.range ? " bytes " + std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1) : "");
}

/// One request with its retries. Throws fatal_error after the attempts or on a status that is not
/// worth retrying, cancelled when `stop` is set.
response fetch(const endpoint& e, const request& q, const remote_options& o, request_counters& c, const std::atomic<bool>* stop) {
  thread_local std::minstd_rand jitter(static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  const int attempts = std::max(1, o.max_attempts);
  std::string last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (stop != nullptr && stop->load()) throw cancelled("cancelled");
    response r;
    std::string error;
    const CURLcode code = this_thread_session().perform(e, q, o, stop, r, error);
    c.requests.fetch_add(1, std::memory_order_relaxed);
    c.bytes.fetch_add(r.body.size(), std::memory_order_relaxed);
    outcome what = outcome::ok;
    if (code == CURLE_ABORTED_BY_CALLBACK && stop != nullptr && stop->load()) throw cancelled("cancelled");
    if (code != CURLE_OK) {
      last = error;
      what = (code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_PEER_FAILED_VERIFICATION ||
              code == CURLE_SSL_CACERT_BADFILE || code == CURLE_LOGIN_DENIED)
                 ? outcome::fail
                 : outcome::retry;
    } else if (r.status == 429 || r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504) {
      last = "HTTP " + std::to_string(r.status);
      what = outcome::retry;
    } else if (r.status < 200 || r.status >= 300) {
      last = "HTTP " + std::to_string(r.status) + (r.status == 403   ? " (forbidden: check the credentials)"
                                                   : r.status == 404 ? " (not found)"
                                                                     : "");
      what = outcome::fail;
    } else if (q.range && r.status == 206 && r.body.size() != q.length) {
      last = "short read: " + std::to_string(r.body.size()) + " of " + std::to_string(q.length) + " bytes";
      what = outcome::retry;
    } else if (r.have_total && r.status == 200 && r.body.size() != r.total) {
      last = "short read: " + std::to_string(r.body.size()) + " of " + std::to_string(r.total) + " bytes";
      what = outcome::retry;
    }
    if (what == outcome::ok) return r;
    if (what == outcome::fail)
      throw fatal_error(describe(e, q) + ": " + last + " (attempt " + std::to_string(attempt) + ", not retried)");
    if (attempt < attempts) {
      c.retries.fetch_add(1, std::memory_order_relaxed);
      const double cap = std::min(o.backoff_max_ms, o.backoff_initial_ms * static_cast<double>(1ull << std::min(attempt - 1, 30)));
      pause(std::uniform_real_distribution<double>(0.0, cap)(jitter), stop);
    }
  }
  throw fatal_error(describe(e, q) + ": " + last + " after " + std::to_string(attempts) + " attempts");
}

/// Threads that run requests; a job runs once, and jobs still queued when the pool stops fail with
/// `cancelled`.
class fetch_pool {
 public:
  explicit fetch_pool(std::size_t threads) {
    for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i) threads_.emplace_back([this] { run(); });
  }
  ~fetch_pool() {
    stop_.store(true);
    {
      std::lock_guard lock(m_);
      closed_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    for (auto& job : queue_) job();  // each sees stop_ and fails with `cancelled`
  }
  fetch_pool(const fetch_pool&) = delete;
  fetch_pool& operator=(const fetch_pool&) = delete;

  template <class Fn>
  auto submit(Fn fn) -> std::future<decltype(fn())> {
    auto task = std::make_shared<std::packaged_task<decltype(fn())()>>(std::move(fn));
    auto fut = task->get_future();
    {
      std::lock_guard lock(m_);
      queue_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return fut;
  }
  [[nodiscard]] const std::atomic<bool>* stop_flag() const noexcept { return &stop_; }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (closed_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool closed_ = false;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

class remote_tar_reader final : public image_reader {
 public:
  remote_tar_reader(const std::vector<std::string>& locations, shard_options so, remote_options ro)
      : shard_(std::move(so)), remote_(ro), pool_(std::max<std::size_t>(ro.requests_in_flight, 1)) {  // NOLINT
    if (locations.empty()) throw std::invalid_argument("remote shards: no shard given");
    if (remote_.max_attempts < 1)
      throw std::invalid_argument("remote shards: max_attempts must be at least 1, got " + std::to_string(remote_.max_attempts));
    for (const auto& l : locations) shards_.push_back({resolve(l), 0, {}});
    // Each shard is fetched once and indexed (its labels kept); a few at a time, as each is held
    // whole while it is indexed.
    const std::size_t at_once = std::min<std::size_t>(4, std::max<std::size_t>(remote_.requests_in_flight, 1));
    std::vector<std::vector<detail::shard_sample>> groups(shards_.size());
    for (std::size_t first = 0; first < shards_.size(); first += at_once) {
      std::vector<std::future<void>> done;
      for (std::size_t s = first; s < std::min(shards_.size(), first + at_once); ++s)
        done.push_back(pool_.submit([this, s, &groups] {
          shard& sh = shards_[s];
          response r = fetch(sh.where, {}, remote_, counters_, pool_.stop_flag());
          sh.size = r.body.size();
          sh.etag = r.etag;
          groups[s] = detail::shard_samples(r.body, static_cast<std::uint32_t>(s), sh.where.shown, shard_);
        }));
      for (auto& d : done) d.wait();  // all finished before any error leaves (they write `groups`)
      for (auto& d : done) d.get();
    }
    for (auto& g : groups) entries_.insert(entries_.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
    if (entries_.empty())
      throw std::invalid_argument("remote shards: no samples in " + std::to_string(shards_.size()) + " shard(s)");
    max_pending_ = std::max<std::size_t>(4 * remote_.read_ahead, 64);
  }

  std::uint64_t size() const override { return entries_.size(); }
  image_spec image_shape() const override { return {-1, -1, 3, dtype::u8}; }
  std::vector<field_spec> extra_fields() const override { return {{"label", dtype::i64, {}}}; }
  std::string name() const override {
    return std::to_string(entries_.size()) + " samples in " + std::to_string(shards_.size()) + " remote tar shard(s)";
  }
  bool stores_encoded() const override { return true; }

  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    thread_local std::vector<std::byte> stored;
    return decode_stored(s, read_stored(s, stored), image, plan);
  }
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) override {
    const detail::shard_sample& e = entries_.at(s.index());
    s.set_origin(shards_[e.shard].where.shown + ":" + e.image.name);
    s.as<std::int64_t>(1)[0] = e.label;
    read_ahead(s);
    std::future<std::vector<std::byte>> bytes = take(s.epoch(), s.index());
    const auto t0 = std::chrono::steady_clock::now();
    try {
      storage = bytes.get();
    } catch (const cancelled&) {
      throw fatal_error("remote shards: the reader was destroyed while " + s.origin() + " was read");
    }
    counters_.wait_ns.fetch_add(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
    return storage;
  }
  read_result decode_stored(sample& s, std::span<const std::byte> bytes, std::vector<std::byte>& image,
                            const decode_planner& plan) override {
    const detail::shard_sample& e = entries_.at(s.index());
    return decode_sample(s, bytes, image, shard_.decode, plan, shards_[e.shard].where.shown + ":" + e.image.name);
  }

  remote_counters counters() const {
    return {counters_.requests.load(), counters_.retries.load(), counters_.bytes.load(),
            static_cast<double>(counters_.wait_ns.load()) / 1e6};
  }

 private:
  struct shard {
    endpoint where;
    std::uint64_t size;
    std::string etag;
  };

  static std::uint64_t key(std::uint32_t epoch, std::uint64_t index) { return (std::uint64_t{epoch} << 44) ^ index; }

  /// The image bytes of sample `index`, checked against the shard as it was indexed.
  std::vector<std::byte> load(std::uint64_t index) {
    const detail::shard_sample& e = entries_[index];
    const shard& sh = shards_[e.shard];
    if (e.image.size == 0) return {};
    response r = fetch(sh.where, {e.image.offset, e.image.size, true}, remote_, counters_, pool_.stop_flag());
    const bool size_changed = r.have_total && r.total != sh.size;
    const bool etag_changed = !sh.etag.empty() && !r.etag.empty() && r.etag != sh.etag;
    if (size_changed || etag_changed)
      throw fatal_error("remote shard " + sh.where.shown + " changed after it was indexed: " +
                        (size_changed ? "size " + std::to_string(sh.size) + " then " + std::to_string(r.total) + " bytes"
                                      : "ETag " + sh.etag + " then " + r.etag) +
                        "; samples of two versions would be mixed");
    if (r.status == 200) {  // the server ignored the range: take the member out of the whole object
      if (r.body.size() < e.image.offset + e.image.size)
        throw fatal_error("remote shard " + sh.where.shown + " is shorter than when it was indexed");
      return {r.body.begin() + static_cast<std::ptrdiff_t>(e.image.offset),
              r.body.begin() + static_cast<std::ptrdiff_t>(e.image.offset + e.image.size)};
    }
    return std::move(r.body);
  }

  /// Queues the next read_ahead samples of the epoch's order, up to a bounded number pending.
  void read_ahead(const sample& s) {
    if (remote_.read_ahead == 0) return;
    std::lock_guard lock(m_);
    if (pending_.size() >= max_pending_) {  // restarts leave other epochs' reads behind: drop those
      for (auto it = pending_.begin(); it != pending_.end();)
        it = it->second.epoch != s.epoch() ? pending_.erase(it) : std::next(it);
    }
    for (std::uint64_t k = 1; k <= remote_.read_ahead && pending_.size() < max_pending_; ++k) {
      const auto next = s.index_ahead(k);
      if (!next) break;
      const std::uint64_t id = key(s.epoch(), *next);
      if (pending_.count(id) != 0 || *next >= entries_.size()) continue;
      pending_.emplace(id, pending{s.epoch(), pool_.submit([this, i = *next] { return load(i); })});
    }
  }

  std::future<std::vector<std::byte>> take(std::uint32_t epoch, std::uint64_t index) {
    {
      std::lock_guard lock(m_);
      const auto it = pending_.find(key(epoch, index));
      if (it != pending_.end()) {
        auto f = std::move(it->second.bytes);
        pending_.erase(it);
        return f;
      }
    }
    return pool_.submit([this, index] { return load(index); });
  }

  struct pending {
    std::uint32_t epoch;
    std::future<std::vector<std::byte>> bytes;
  };

  shard_options shard_;
  remote_options remote_;
  std::vector<shard> shards_;
  std::vector<detail::shard_sample> entries_;
  mutable request_counters counters_;
  std::mutex m_;
  std::unordered_map<std::uint64_t, pending> pending_;
  std::size_t max_pending_ = 64;
  fetch_pool pool_;  // last: its threads stop before the members they use go away
};

/// The keys of the objects under `prefix` of an S3 bucket (ListObjectsV2, every page).
std::vector<std::string> list_s3(const std::string& bucket, const std::string& prefix, const remote_options& o) {
  request_counters c;
  std::vector<std::string> keys;
  std::string token;
  auto text_of = [](const std::string& xml, const std::string& tag, std::size_t from, std::size_t& end) -> std::optional<std::string> {
    const auto a = xml.find("<" + tag + ">", from);
    if (a == std::string::npos) return std::nullopt;
    const auto b = xml.find("</" + tag + ">", a);
    if (b == std::string::npos) return std::nullopt;
    end = b;
    return xml.substr(a + tag.size() + 2, b - a - tag.size() - 2);
  };
  auto unescape = [](std::string s) {
    const std::pair<const char*, const char*> entities[] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
    for (const auto& [from, to] : entities)
      for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) s.replace(at, std::strlen(from), to);
    return s;
  };
  auto query_escape = [](const std::string& v) {
    std::string out;
    static const char* hex = "0123456789ABCDEF";
    for (const unsigned char ch : v) {
      if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') out += static_cast<char>(ch);
      else {
        out += '%';
        out += hex[ch >> 4];
        out += hex[ch & 15];
      }
    }
    return out;
  };
  for (int page = 0; page < 100000; ++page) {
    std::string q = "/?list-type=2&prefix=" + query_escape(prefix);
    if (!token.empty()) q = "/?continuation-token=" + query_escape(token) + "&list-type=2&prefix=" + query_escape(prefix);
    const endpoint e = s3_endpoint(bucket, q, "s3://" + bucket + "/" + prefix + " (listing)");
    const response r = fetch(e, {}, o, c, nullptr);
    const std::string xml(reinterpret_cast<const char*>(r.body.data()), r.body.size());
    std::size_t at = 0, end = 0;
    while (auto k = text_of(xml, "Key", at, end)) {
      keys.push_back(unescape(*k));
      at = end;
    }
    const auto truncated = text_of(xml, "IsTruncated", 0, end);
    const auto next = text_of(xml, "NextContinuationToken", 0, end);
    if (!truncated || *truncated != "true" || !next) break;
    token = unescape(*next);
  }
  return keys;
}

}  // namespace

std::vector<std::string> expand_remote_pattern(const std::string& pattern, const remote_options& options) {
  if (!is_remote_location(pattern))
    throw std::invalid_argument("'" + redact_location(pattern) + "' is not an http://, https:// or s3:// location");
  std::vector<std::string> out;
  for (const auto& p : detail::expand_braces(pattern)) {
    const auto slash = p.rfind('/');
    const std::string last = p.substr(slash + 1);
    if (last.find_first_of("*?[") == std::string::npos) {
      out.push_back(p);
      continue;
    }
    if (p.rfind("s3://", 0) != 0)
      throw std::invalid_argument("shard pattern '" + redact_location(pattern) +
                                  "': a glob needs s3:// (an HTTP server has no listing); give a {first..last} range");
    const s3_parts parts = split_s3(p);
    const auto key_slash = parts.key.rfind('/');
    const std::string dir = key_slash == std::string::npos ? "" : parts.key.substr(0, key_slash + 1);
    std::vector<std::string> matched;
    for (const auto& k : list_s3(parts.bucket, dir, options))
      if (k.find('/', dir.size()) == std::string::npos && ::fnmatch(parts.key.c_str(), k.c_str(), 0) == 0)
        matched.push_back("s3://" + parts.bucket + "/" + k);
    std::sort(matched.begin(), matched.end());
    out.insert(out.end(), matched.begin(), matched.end());
  }
  if (out.empty()) throw std::invalid_argument("shard pattern '" + redact_location(pattern) + "' matches no object");
  return out;
}

std::shared_ptr<image_reader> make_remote_shard_reader(const std::vector<std::string>& locations, shard_options shard,
                                                       remote_options remote) {
  return std::make_shared<remote_tar_reader>(locations, std::move(shard), remote);
}

remote_counters remote_stats(const image_reader& reader) {
  const auto* r = dynamic_cast<const remote_tar_reader*>(&reader);
  return r != nullptr ? r->counters() : remote_counters{};
}

#else  // built without libcurl

namespace {
[[noreturn]] void no_curl() {
  throw std::runtime_error("remote shards: this pinfeed was built without libcurl (Debian: libcurl4-openssl-dev)");
}
}  // namespace

std::vector<std::string> expand_remote_pattern(const std::string&, const remote_options&) { no_curl(); }
std::shared_ptr<image_reader> make_remote_shard_reader(const std::vector<std::string>&, shard_options, remote_options) {
  no_curl();
}
remote_counters remote_stats(const image_reader&) { return {}; }

#endif

}  // namespace pinfeed::loaders
