// Remote tar shards (remote.hpp): locations, one libcurl request with its retries, the transfer
// loop that runs a reader's requests (a libcurl multi handle on one thread), and the reader that
// indexes each shard once and range-reads every sample or fetches whole shards into a cache.
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
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <random>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

#include "detail/tar_samples.hpp"
#include "pinfeed/runtime/error.hpp"

#if PINFEED_HAVE_CURL
#include <curl/curl.h>
#endif

namespace pinfeed::loaders {

bool is_remote_location(std::string_view l) noexcept {
  return l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0 || l.rfind("s3://", 0) == 0;
}

#if PINFEED_HAVE_CURL
namespace {
/// One part of a parsed URL, or empty.
std::string url_part(CURLU* u, CURLUPart part) {
  char* text = nullptr;
  std::string out;
  if (curl_url_get(u, part, &text, 0) == CURLUE_OK && text != nullptr) out = text;
  curl_free(text);
  return out;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}
}  // namespace

std::string redact_location(std::string_view l) {
  // Rebuilt from the parts a URL parser finds (scheme, host, port, path), so that no spelling of
  // user information or query survives; what does not parse is not printed at all.
  const auto scheme_end = l.find("://");
  const std::string scheme = scheme_end == std::string_view::npos ? std::string("location") : std::string(l.substr(0, scheme_end));
  CURLU* u = curl_url();
  if (u == nullptr) return scheme + "://(unprintable)";
  std::string out;
  if (curl_url_set(u, CURLUPART_URL, std::string(l).c_str(), CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE) == CURLUE_OK) {
    const std::string port = url_part(u, CURLUPART_PORT), path = url_part(u, CURLUPART_PATH);
    out = url_part(u, CURLUPART_SCHEME) + "://" + url_part(u, CURLUPART_HOST) + (port.empty() ? "" : ":" + port);
    if (path != "/" || l.back() == '/') out += path;  // "s3://bucket" stays without a slash
  } else {
    out = scheme + "://(unparsable location)";
  }
  curl_url_cleanup(u);
  return percent_decode(out);  // for display: keys with spaces read as they were written
}
#else
std::string redact_location(std::string_view l) {
  const auto scheme_end = l.find("://");
  return (scheme_end == std::string_view::npos ? std::string("location") : std::string(l.substr(0, scheme_end))) +
         "://(not printed: built without libcurl's URL parser)";
}
#endif

#if PINFEED_HAVE_CURL

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

const char* const kHex = "0123456789ABCDEF";

/// RFC 3986 encoding: unreserved characters kept, and '/' when `keep_slash`.
std::string percent_encode(std::string_view text, bool keep_slash) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}


/// How requests are signed for S3: read from the environment once, when a reader or a listing
/// starts (never from the transfer loop).
struct s3_credentials {
  std::string key_id, secret, token, region;
  static s3_credentials from_env() {
    s3_credentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"), env("AWS_REGION")};
    if (c.region.empty()) c.region = env("AWS_DEFAULT_REGION");
    if (c.region.empty()) c.region = "us-east-1";
    return c;
  }
};

/// Where a location is requested from and how it is signed.
struct endpoint {
  std::string url;    ///< with credentials nowhere in it
  std::string shown;  ///< for messages
  bool s3 = false;
  std::shared_ptr<const s3_credentials> creds;  ///< s3 only
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

/// The URL of an S3 bucket with `suffix` (an encoded "/key" or "/?query") appended: path-style
/// under an explicit endpoint or for a bucket name with dots (its virtual host would not match
/// the TLS certificate), virtual-hosted otherwise.
endpoint s3_endpoint(const std::string& bucket, const std::string& suffix, const std::string& shown,
                     std::shared_ptr<const s3_credentials> creds) {
  endpoint e;
  e.s3 = true;
  e.shown = shown;
  std::string base = env("AWS_ENDPOINT_URL_S3");
  if (base.empty()) base = env("AWS_ENDPOINT_URL");
  if (!base.empty()) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    e.url = base + "/" + bucket + suffix;
  } else if (bucket.find('.') != std::string::npos) {
    e.url = "https://s3." + creds->region + ".amazonaws.com/" + bucket + suffix;
  } else {
    e.url = "https://" + bucket + ".s3." + creds->region + ".amazonaws.com" + suffix;
  }
  e.creds = std::move(creds);
  return e;
}

endpoint resolve(std::string_view location, const std::shared_ptr<const s3_credentials>& creds) {
  if (location.rfind("s3://", 0) == 0) {
    const s3_parts p = split_s3(location);
    if (p.key.empty()) throw std::invalid_argument("s3 location '" + redact_location(location) + "' names no object");
    return s3_endpoint(p.bucket, "/" + percent_encode(p.key, true), redact_location(location), creds);
  }
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0)
    return {std::string(location), redact_location(location), false, nullptr};
  throw std::invalid_argument("'" + redact_location(location) + "' is not an http://, https:// or s3:// location");
}

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("libcurl failed to initialize");
  });
}

/// Names the calling thread (as top -H and debuggers show it) and, when `batch`, makes it
/// SCHED_BATCH (remote_options::batch_scheduling). Both are hints: a refusal (a seccomp filter,
/// say) leaves the thread as it was.
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

/// One request: a whole object, or `length` bytes at `offset`; `expect_total`, when set, is the
/// object's size as it was indexed.
struct response;

/// Where a body goes as it arrives, instead of into response::body (a shard indexed in one
/// streaming pass). Each attempt of the request starts it anew.
struct body_sink {
  virtual ~body_sink() = default;
  virtual void restart() = 0;
  /// The next bytes of the body; `r` has the status and headers.
  virtual void data(std::span<const std::byte> bytes, const response& r) = 0;
};

struct request {
  std::uint64_t offset = 0, length = 0;
  bool range = false;
  std::uint64_t expect_total = 0;
  std::string expect_etag;
  bool missing_ok = false;  ///< a 404 or 403 is answered, not thrown (for an optional object)
  std::shared_ptr<body_sink> sink;  ///< the body goes here (response::body stays empty)
  bool head = false;                ///< HEAD: the size (response::total) and ETag, no body
};

struct response {
  long status = 0;
  std::vector<std::byte> body;
  std::string etag;
  std::uint64_t total = 0;  ///< the object's size (Content-Range's total, or Content-Length of a 200)
  bool have_total = false;
  bool range_ignored = false;  ///< a range was asked for and the server began sending the whole object
  bool range = false;
  bool head = false;
  std::uint64_t received = 0;  ///< body bytes (kept in `body`, or given to `sink`)
  body_sink* sink = nullptr;
  long status_seen = 0;      ///< the status line seen last, while the body arrives
  std::exception_ptr error;  ///< thrown inside a callback, rethrown after the transfer
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::size_t a = 0;
  while (a < s.size() && s[a] == ' ') ++a;
  return s.substr(a);
}

/// What one attempt of a request owns while libcurl runs it: the response being filled and the
/// strings and header list that its options point at.
struct transfer {
  response r;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::string range, token_header, sigv4;
  curl_slist* headers = nullptr;

  transfer() = default;
  transfer(const transfer&) = delete;
  transfer& operator=(const transfer&) = delete;
  ~transfer() { release(); }
  /// Frees the header list and wipes the session token's copy.
  void release() noexcept {
    if (headers != nullptr) curl_slist_free_all(headers);
    headers = nullptr;
    std::fill(token_header.begin(), token_header.end(), '\0');
  }
  /// Why the attempt failed in libcurl's words, for a transport error.
  [[nodiscard]] std::string error_text(CURLcode code) const {
    return errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(code));
  }
};

// libcurl is C: nothing may be thrown through it. An exception is kept and the transfer ended.
std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<response*>(user);
  if (r->range && r->status_seen == 200) {  // the whole object for a range: stop now
    r->range_ignored = true;
    return 0;
  }
  try {
    const auto* p = reinterpret_cast<const std::byte*>(data);
    // An error page goes to `body` (judge() reads the status), never into the sink.
    if (r->sink != nullptr && r->status_seen >= 200 && r->status_seen < 300) r->sink->data({p, size * n}, *r);
    else r->body.insert(r->body.end(), p, p + size * n);
    r->received += size * n;
  } catch (...) {
    r->error = std::current_exception();
    return 0;
  }
  return size * n;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<response*>(user);
  try {
    const std::string line(data, size * n);
    const auto colon = line.find(':');
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or a 100): forget the last
      r->etag.clear();
      r->have_total = false;
      const auto sp = line.find(' ');
      r->status_seen = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
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
      } else if (name == "content-length" && !r->have_total && r->status_seen == 200) {
        r->total = std::strtoull(value.c_str(), nullptr, 10);
        r->have_total = true;
        if (!r->range && !r->head && r->sink == nullptr) r->body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(r->total, std::uint64_t{1} << 34)));
      }
    }
  } catch (...) {
    r->error = std::current_exception();
    return 0;
  }
  return size * n;
}

/// Bodies arrive in few large reads (libcurl's default buffer, 16 KiB, takes several a sample).
constexpr std::uint64_t kReceiveBuffer = 256 * 1024;

/// Sets every option of one attempt of `q` on `h` (reset before), pointing into `t`.
void configure(CURL* h, const endpoint& e, const request& q, const remote_options& o, transfer& t) {
  t.r = response{};
  t.r.range = q.range;
  t.r.sink = q.sink.get();
  t.r.head = q.head;
  if (q.sink) q.sink->restart();
  if (q.head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  t.errbuf[0] = '\0';
  curl_easy_setopt(h, CURLOPT_URL, e.url.c_str());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t.errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // A sample's range in one read where it fits (a buffer each handle holds; 16 KiB at least).
  const long buffer = q.range ? static_cast<long>(std::clamp<std::uint64_t>(q.length, 16 * 1024, kReceiveBuffer)) : kReceiveBuffer;
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, buffer);
  if (e.s3) {
    // A redirect from S3 (another region) would drop the signature and carry the session
    // token's header to another host: it is reported instead. Keys are sent as written.
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  }
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_s * 1000));
  // Slower than 1 KiB/s for stall_timeout_s counts as a stall (a trickle included).
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(o.stall_timeout_s + 0.999)));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t.r);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t.r);
  if (q.range) {
    t.range = std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1);
    curl_easy_setopt(h, CURLOPT_RANGE, t.range.c_str());
  }
  if (e.s3 && e.creds && !e.creds->key_id.empty()) {
    t.sigv4 = "aws:amz:" + e.creds->region + ":s3";
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t.sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, e.creds->key_id.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, e.creds->secret.c_str());
    // SHA-256 of the empty body of a GET, which S3 wants named in a header of its own.
    t.headers = curl_slist_append(
        t.headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    if (!e.creds->token.empty()) {
      t.token_header = "x-amz-security-token: " + e.creds->token;
      t.headers = curl_slist_append(t.headers, t.token_header.c_str());
    }
  }
  if (t.headers != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, t.headers);
}

/// After an attempt on `h`: its status into t.r, and nothing of `t` (nor the credentials) left
/// for the handle to use.
void detach(CURL* h, transfer& t) noexcept {
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.r.status);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, nullptr);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, nullptr);
  curl_easy_setopt(h, CURLOPT_USERNAME, nullptr);
  curl_easy_setopt(h, CURLOPT_PASSWORD, nullptr);
  t.release();
}

/// Writes all `n` bytes at `p` to `fd`; false (errno set) when that fails.
bool write_all(int fd, const void* p, std::size_t n) {
  const auto* at = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, at, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    at += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

/// Thrown when a request is abandoned because its reader is going away.
struct cancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct request_counters {
  std::atomic<std::uint64_t> requests{0}, retries{0}, bytes{0}, wait_ns{0}, read_ahead{0};
  std::atomic<std::uint64_t> shards{0}, streamed{0}, sidecars{0}, index_cached{0};
};

std::string describe(const endpoint& e, const request& q) {
  return (q.head ? "HEAD " : "GET ") + e.shown + (q.range ? " bytes " + std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1) : "");
}

[[noreturn]] void changed(const endpoint& e, const std::string& how) {
  throw fatal_error("remote shard " + e.shown + " changed after it was indexed: " + how +
                    "; samples of two versions would be mixed");
}

/// What one attempt's outcome means: nullopt when `r` is the answer, else why another attempt is
/// worth making. Throws fatal_error for an outcome not worth retrying (naming the attempt), and
/// when the object is not the one indexed.
std::optional<std::string> judge(const endpoint& e, const request& q, int attempt, CURLcode code,
                                 const std::string& error, const response& r) {
  auto fail = [&](const std::string& why) -> fatal_error {
    return fatal_error(describe(e, q) + ": " + why + " (attempt " + std::to_string(attempt) + ", not retried)");
  };
  if (r.range_ignored)
    throw fail("the server answered a range request with the whole object: per-sample reads need range support");
  // The object as indexed, before anything else: a changed object is not a transient fault.
  if (q.expect_total != 0 && r.have_total && r.total != q.expect_total && (r.status == 200 || r.status == 206))
    changed(e, "size " + std::to_string(q.expect_total) + " then " + std::to_string(r.total) + " bytes");
  if (q.expect_total != 0 && r.status == 416)
    changed(e, "a range of the indexed " + std::to_string(q.expect_total) + " bytes is past its end now");
  if (!q.expect_etag.empty() && !r.etag.empty() && r.etag != q.expect_etag && (r.status == 200 || r.status == 206))
    changed(e, "ETag " + q.expect_etag + " then " + r.etag);
  if (code != CURLE_OK) {
    const bool permanent = code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL ||
                           code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
                           code == CURLE_LOGIN_DENIED || code == CURLE_TOO_MANY_REDIRECTS;
    if (permanent) throw fail(error);
    return error;
  }
  if (r.status == 429 || r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504)
    return "HTTP " + std::to_string(r.status);
  if (r.status >= 300 && r.status < 400)
    throw fail("HTTP " + std::to_string(r.status) + (e.s3 ? " (a redirect: the bucket is in another region than " +
                                                             (e.creds ? e.creds->region : std::string("?")) +
                                                             "; set AWS_REGION)"
                                                       : std::string(" (too many redirects)")));
  if (q.missing_ok && (r.status == 404 || r.status == 403)) return std::nullopt;
  if (r.status < 200 || r.status >= 300)
    throw fail("HTTP " + std::to_string(r.status) +
               (r.status == 403 ? " (forbidden: check the credentials)" : r.status == 404 ? " (not found)" : ""));
  if (q.range && r.received != q.length)
    return "short read: " + std::to_string(r.received) + " of " + std::to_string(q.length) + " bytes";
  if (!q.range && !q.head && r.have_total && r.received != r.total)
    return "short read: " + std::to_string(r.received) + " of " + std::to_string(r.total) + " bytes";
  return std::nullopt;
}

/// The wait before attempt `attempt + 1`: uniform in [0, min(max, initial * 2^(attempt-1))] ms.
double backoff_ms(const remote_options& o, int attempt, std::minstd_rand& jitter) {
  const double cap = std::min(o.backoff_max_ms, o.backoff_initial_ms * static_cast<double>(1ull << std::min(attempt - 1, 30)));
  return std::uniform_real_distribution<double>(0.0, cap)(jitter);
}

fatal_error out_of_attempts(const endpoint& e, const request& q, const std::string& last, int attempts) {
  return fatal_error(describe(e, q) + ": " + last + " after " + std::to_string(attempts) + " attempts");
}

/// Every request of a reader (or of an S3 listing), on one thread: a libcurl multi handle runs up
/// to `requests_in_flight` transfers at once, each on a keep-alive connection of its own, and
/// retries each (judge(), backoff_ms(), up to max_attempts) without holding a thread while it
/// waits. Urgent requests (a reader waits for them) start at once, past the cap:
/// there are at most as many as reader threads. A request ends in its callback, run on this
/// loop's thread (keep it short; it may submit more): the answer, or the error (fatal_error, or
/// `cancelled` once the loop stops).
class transfer_loop {
 public:
  using done_fn = std::function<void(response&&, std::exception_ptr)>;

  transfer_loop(const remote_options& o, request_counters& c)
      : o_(o),
        counters_(c),
        jitter_(static_cast<unsigned>(std::hash<const void*>{}(this))),
        cap_(o.requests_in_flight.value_or(kMinRequestsInFlight)) {
    curl_init_once();
    multi_ = curl_multi_init();
    if (multi_ == nullptr) throw std::runtime_error("libcurl: cannot create a multi handle");
    // One connection a transfer, no HTTP/2 multiplexing, whose one connection would carry (and,
    // reset, fail) every request in flight. Room to keep open more than run under the cap: urgent
    // requests run past it, and a connection closed for want of room is a new one (a handshake,
    // and at a proxy a new session) for the next request.
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_NOTHING));
    // (run() sets it again whenever the cap changes.)
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(2 * cap()));
    connections_for_ = cap();
    running_.reserve(2 * cap());
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {
      curl_multi_cleanup(multi_);
      throw;
    }
  }
  ~transfer_loop() { shutdown(); }
  transfer_loop(const transfer_loop&) = delete;
  transfer_loop& operator=(const transfer_loop&) = delete;

  /// Queues a request; throws `cancelled` once the loop stops. `done` is never run on the
  /// calling thread.
  void submit(const endpoint& e, const request& q, done_fn done, bool urgent = false) {
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
  std::future<response> submit(const endpoint& e, const request& q, bool urgent = false) {
    auto p = std::make_shared<std::promise<response>>();
    auto f = p->get_future();
    submit(e, q, [p](response&& r, std::exception_ptr error) {
      if (error) p->set_exception(error);
      else p->set_value(std::move(r));
    }, urgent);
    return f;
  }
  /// The most requests run at once, urgent ones aside.
  [[nodiscard]] std::size_t cap() const noexcept { return cap_.load(std::memory_order_relaxed); }
  /// From now on, run up to `n` requests at once (1 to kMaxRequestsInFlight).
  void set_cap(std::size_t n) {
    cap_.store(std::clamp<std::size_t>(n, 1, kMaxRequestsInFlight), std::memory_order_relaxed);
    std::lock_guard lock(m_);
    if (!stopping_) curl_multi_wakeup(multi_);
  }
  /// How long a range request's answer has taken of late, from the start of its transfer (a
  /// moving average; 0 before the first).
  [[nodiscard]] double range_latency_s() const noexcept {
    return static_cast<double>(range_latency_ns_.load(std::memory_order_relaxed)) / 1e9;
  }
  /// Whether requests waited for the cap (queued while it was full) since the last call.
  [[nodiscard]] bool take_held_back() noexcept { return held_back_.exchange(false, std::memory_order_relaxed); }

  /// A range answer's body storage, given back once read, for a later range request's body: a
  /// buffer already grown and paged in, instead of a fresh one per sample. At most
  /// requests_in_flight are kept (the rest are freed), each as large as the samples it held.
  void recycle(std::vector<std::byte> buffer) noexcept {
    if (buffer.capacity() == 0) return;
    buffer.clear();
    std::lock_guard lock(pool_m_);
    if (pool_.size() >= cap()) return;
    try {
      pool_.push_back(std::move(buffer));
    } catch (...) {  // not kept: freed here
    }
  }
  /// From now on, requests not yet running (queued, or waiting to retry) end with `error`.
  void fail_queued(std::exception_ptr error) {
    std::lock_guard lock(m_);
    if (stopping_ || failed_) return;
    failed_ = std::move(error);
    curl_multi_wakeup(multi_);
  }
  /// Ends every request (running ones aborted) with `cancelled`, each callback run before this
  /// returns; later submits throw. Idempotent.
  void shutdown() noexcept {
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

 private:
  using clock = std::chrono::steady_clock;
  struct job {
    endpoint e;
    request q;
    done_fn done;
    bool urgent = false;
    int attempt = 0;  ///< attempts started
    clock::time_point started;  ///< the last attempt's start
    transfer t;
  };
  using queue = std::deque<std::unique_ptr<job>>;

  void run() noexcept {
    tune_thread("pinfeed-fetch", o_.batch_scheduling);
    queue starting, ending;
    std::exception_ptr failed;
    for (;;) {
      {
        std::lock_guard lock(m_);
        if (stopping_) break;
        failed = failed_;
        const auto now = clock::now();
        // Retries that are due go first in their queue: they waited already.
        while (!waiting_.empty() && (failed || waiting_.begin()->first <= now)) {
          auto j = std::move(waiting_.begin()->second);
          waiting_.erase(waiting_.begin());
          (j->urgent ? urgent_ : queue_).push_front(std::move(j));
        }
        if (failed) {  // what has not started yet ends with the error
          for (queue* q : {&urgent_, &queue_}) {
            for (auto& j : *q) ending.push_back(std::move(j));
            q->clear();
          }
        }
        for (auto& j : urgent_) starting.push_back(std::move(j));
        urgent_.clear();
        while (running_.size() + starting.size() < cap() && !queue_.empty()) {
          starting.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        if (!queue_.empty()) held_back_.store(true, std::memory_order_relaxed);
      }
      if (const std::size_t c = cap(); c != connections_for_) {  // room to keep as many open again
        curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(2 * c));
        connections_for_ = c;
      }
      for (auto& j : ending) complete(*j, failed);
      ending.clear();
      for (auto& j : starting) start(std::move(j));
      starting.clear();
      int still = 0;
      curl_multi_perform(multi_, &still);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        finish(msg->easy_handle, msg->data.result);
      }
      int wait_ms = 1000;
      {
        std::lock_guard lock(m_);
        if (!waiting_.empty()) {
          const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(waiting_.begin()->first - clock::now());
          wait_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(until.count() + 1, 0, wait_ms));
        }
        if (stopping_ || !urgent_.empty() || (!queue_.empty() && running_.size() < cap())) wait_ms = 0;
      }
      // Returns early on socket activity, libcurl's own timers and curl_multi_wakeup().
      curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
    }
    // Stopping: every request ends, the running ones first.
    const auto stop = std::make_exception_ptr(cancelled("cancelled"));
    for (auto& [h, raw] : running_) {
      std::unique_ptr<job> j(raw);
      curl_multi_remove_handle(multi_, h);
      detach(h, j->t);
      idle_.push_back(h);
      complete(*j, stop);
    }
    running_.clear();
    queue urgent, queued;
    std::multimap<clock::time_point, std::unique_ptr<job>> waiting;
    {
      std::lock_guard lock(m_);
      urgent.swap(urgent_);
      queued.swap(queue_);
      waiting.swap(waiting_);
    }
    for (auto& j : urgent) complete(*j, stop);
    for (auto& j : queued) complete(*j, stop);
    for (auto& [t, j] : waiting) complete(*j, stop);
  }

  /// Starts the job's next attempt; one that cannot start ends with the error.
  void start(std::unique_ptr<job> j) noexcept {
    CURL* h = nullptr;
    try {
      if (!idle_.empty()) {
        h = idle_.back();
        idle_.pop_back();
        curl_easy_reset(h);
      } else {
        h = curl_easy_init();
        if (h == nullptr) throw std::runtime_error("libcurl: cannot create a handle");
      }
      ++j->attempt;
      j->started = clock::now();
      configure(h, j->e, j->q, o_, j->t);
      if (j->q.range) j->t.r.body = body_for(j->q.length);
      running_.emplace(h, j.get());  // (may throw: j still owns the job then)
      if (curl_multi_add_handle(multi_, h) != CURLM_OK) {
        running_.erase(h);
        throw std::runtime_error("libcurl: cannot start a transfer");
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

  /// Storage for a range answer of `length` bytes: a recycled buffer where there is one.
  std::vector<std::byte> body_for(std::uint64_t length) {
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

  /// A handle back to the idle ones, which keep no more than run at once.
  void release_handle(CURL* h) noexcept {
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

  /// An attempt is over: the job ends, or waits for its next attempt.
  void finish(CURL* h, CURLcode code) noexcept {
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
      const auto retry = judge(j->e, j->q, j->attempt, code, code != CURLE_OK ? j->t.error_text(code) : std::string(), r);
      if (!retry) {
        if (j->q.range) note_latency(clock::now() - j->started);
        complete(*j, nullptr);
        return;
      }
      const int attempts = std::max(1, o_.max_attempts);
      if (j->attempt >= attempts) throw out_of_attempts(j->e, j->q, *retry, attempts);
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

  /// One range answer's time into the moving average (a weight of 1/16: about the last 16).
  void note_latency(clock::duration took) noexcept {
    const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    const std::uint64_t was = range_latency_ns_.load(std::memory_order_relaxed);  // this thread's alone to write
    range_latency_ns_.store(was == 0 ? ns : was - was / 16 + ns / 16, std::memory_order_relaxed);
  }

  static void complete(job& j, std::exception_ptr error) noexcept {
    try {
      j.done(error ? response{} : std::move(j.t.r), error);
    } catch (...) {  // a callback's own failure has nowhere to go
    }
  }

  remote_options o_;
  request_counters& counters_;
  std::minstd_rand jitter_;
  CURLM* multi_ = nullptr;
  std::thread thread_;
  // The loop thread's own.
  std::unordered_map<CURL*, job*> running_;  ///< the jobs running, by their handles (owned)
  std::vector<CURL*> idle_;                  ///< handles to reuse
  // Shared, under m_.
  std::mutex m_;
  queue urgent_, queue_;
  std::multimap<clock::time_point, std::unique_ptr<job>> waiting_;  ///< retries, by due time
  std::exception_ptr failed_;
  bool stopping_ = false;
  std::mutex pool_m_;
  std::vector<std::vector<std::byte>> pool_;  ///< recycled bodies (under pool_m_)
  std::atomic<std::size_t> cap_;
  std::atomic<std::uint64_t> range_latency_ns_{0};  ///< written by the loop thread only
  std::atomic<bool> held_back_{false};
  std::size_t connections_for_ = 0;  ///< the cap CURLMOPT_MAXCONNECTS was last set for (loop thread)
};

/// One thread running posted tasks in order: what must not hold up the transfer loop (a shard
/// written to the cache directory). shutdown() runs what is left, then joins; a task posted
/// after it runs on the posting thread.
class task_thread {
 public:
  task_thread() : thread_([this] { run(); }) {}
  ~task_thread() { shutdown(); }
  task_thread(const task_thread&) = delete;
  task_thread& operator=(const task_thread&) = delete;
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(m_);
      if (!closed_) {
        tasks_.push_back(std::move(task));
        cv_.notify_one();
        return;
      }
    }
    task();
  }
  void shutdown() noexcept {
    {
      std::lock_guard lock(m_);
      if (closed_) return;
      closed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() noexcept {
    tune_thread("pinfeed-cache", false);
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return closed_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        task();
      } catch (...) {
      }
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool closed_ = false;
  std::thread thread_;  ///< last: it starts once the members above exist
};

void check_options(const remote_options& o) {
  if (o.max_attempts < 1)
    throw std::invalid_argument("remote shards: max_attempts must be at least 1, got " + std::to_string(o.max_attempts));
  if (o.requests_in_flight && (*o.requests_in_flight < 1 || *o.requests_in_flight > kMaxRequestsInFlight))
    throw std::invalid_argument("remote shards: requests_in_flight must be in [1, " + std::to_string(kMaxRequestsInFlight) +
                                "], got " + std::to_string(*o.requests_in_flight));
  if (!(o.backoff_initial_ms >= 0) || !(o.backoff_max_ms >= o.backoff_initial_ms) || !(o.connect_timeout_s > 0) ||
      !(o.stall_timeout_s > 0))
    throw std::invalid_argument("remote shards: the backoff must satisfy 0 <= backoff_initial_ms <= backoff_max_ms and "
                                "the timeouts must be positive");
}

void check_s3_signing(const endpoint& e) {
  // Older libcurl signs only host and x-amz-date, and S3 refuses the unsigned x-amz-* headers.
  if (e.s3 && curl_version_info(CURLVERSION_NOW)->version_num < 0x075700)
    throw std::runtime_error("remote shards: " + e.shown + " needs libcurl 7.87 or later to sign S3 requests (this is " +
                             curl_version_info(CURLVERSION_NOW)->version + ")");
}

/// A quarter of this process's open-file limit (RLIMIT_NOFILE, soft), within
/// [kMinRequestsInFlight, kMaxRequestsInFlight].
std::size_t open_file_share() noexcept {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return kMaxRequestsInFlight;
  return std::clamp<std::size_t>(static_cast<std::size_t>(files.rlim_cur / 4), kMinRequestsInFlight, kMaxRequestsInFlight);
}

/// The sidecar index of a shard location: ".idx" after the path (before an HTTP query).
std::string sidecar_location(const std::string& location) {
  if (location.rfind("s3://", 0) == 0) return location + ".idx";
  const auto query = location.find_first_of("?#");
  if (query == std::string::npos) return location + ".idx";
  return location.substr(0, query) + ".idx" + location.substr(query);
}

/// The most bytes of samples the adapted read-ahead holds (range reads; their mean size from the
/// index): it caps the requests in flight at half that many samples.
constexpr std::uint64_t kReadAheadBytes = std::uint64_t{256} << 20;

class remote_tar_reader final : public image_reader {
 public:
  remote_tar_reader(const std::vector<std::string>& locations, shard_options so, remote_options ro)
      : shard_(std::move(so)), remote_(ro), whole_(shard_.window_shards.value_or(1) > 0) {
    check_options(remote_);
    if (locations.empty()) throw std::invalid_argument("remote shards: no shard given");
    const auto creds = std::make_shared<const s3_credentials>(s3_credentials::from_env());
    for (const auto& l : locations) {
      shards_.push_back({resolve(l, creds), 0, {}});
      check_s3_signing(shards_.back().where);
    }
    if (!remote_.index_cache_dir.empty()) locations_ = locations;
    loop_ = std::make_unique<transfer_loop>(remote_, counters_);
    if (whole_shards()) completions_ = std::make_unique<task_thread>();
    if (whole_shards() && !remote_.cache_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(remote_.cache_dir, ec);
      if (ec || !std::filesystem::is_directory(remote_.cache_dir))
        throw std::invalid_argument("remote shards: cache directory '" + remote_.cache_dir + "' cannot be made: " +
                                    ec.message());
    }
    if (whole_shards()) cache_.resize(shards_.size());
    // Each shard is indexed once: from its sidecar index when there is one (pinfeed pack writes
    // them; all asked for at once), else by fetching it whole, a few at a time as each is held
    // whole while it is indexed (with whole shards, kept in the cache while it has room: the
    // first epoch need not fetch it again).
    std::vector<std::vector<detail::shard_sample>> groups(shards_.size());
    std::vector<endpoint> sidecars;
    std::vector<std::future<response>> answers;
    for (const auto& l : locations) sidecars.push_back(resolve(sidecar_location(l), creds));
    request optional;
    optional.missing_ok = true;
    for (const auto& side : sidecars) answers.push_back(loop_->submit(side, optional));
    std::vector<std::size_t> whole;  // shards without a usable sidecar
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      const response r = answers[s].get();
      std::optional<std::vector<detail::shard_sample>> samples;
      if (r.status >= 200 && r.status < 300) {
        const std::string_view text(reinterpret_cast<const char*>(r.body.data()), r.body.size());
        samples = detail::parse_shard_index(text, static_cast<std::uint32_t>(s), sidecars[s].shown, shard_, shards_[s].size);
      }
      if (!samples) {
        whole.push_back(s);
        continue;
      }
      counters_.sidecars.fetch_add(1, std::memory_order_relaxed);
      shard_bytes_ += shards_[s].size;
      groups[s] = std::move(*samples);
    }
    if (!remote_.index_cache_dir.empty()) whole = from_index_cache(whole, groups);
    // Scanned as they arrive: only the tar headers and the labels are held, and, with whole
    // shards, the shard's bytes when the cache has room for them.
    // A few at a time with whole shards: the copies kept for the cache are in memory until placed.
    const std::size_t at_once = whole_shards() ? std::min<std::size_t>(16, loop_->cap()) : loop_->cap();
    for (std::size_t first = 0; first < whole.size(); first += at_once) {
      const std::size_t last = std::min(whole.size(), first + at_once);
      answers.clear();
      std::vector<std::shared_ptr<index_sink>> sinks;
      for (std::size_t k = first; k < last; ++k) {
        request q;
        q.sink = sinks.emplace_back(std::make_shared<index_sink>(*this, static_cast<std::uint32_t>(whole[k])));
        answers.push_back(loop_->submit(shards_[whole[k]].where, q));
      }
      for (std::size_t k = first; k < last; ++k) {
        const auto s = static_cast<std::uint32_t>(whole[k]);
        const response r = answers[k - first].get();
        shard& sh = shards_[s];
        sh.size = r.received;
        sh.etag = r.etag;
        shard_bytes_ += sh.size;
        index_sink& sink = *sinks[k - first];
        groups[s] = sink.scan->samples();
        if (!remote_.index_cache_dir.empty()) to_index_cache(s, groups[s]);
        if (sink.kept) place_indexed(s, std::move(sink.body));
        else if (sink.reserved_ > 0) release_indexed(s);  // the size changed between attempts
        sinks[k - first].reset();
      }
    }
    for (auto& g : groups) entries_.insert(entries_.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
    if (entries_.empty())
      throw std::invalid_argument("remote shards: no samples in " + std::to_string(shards_.size()) + " shard(s)");
    if (whole_shards()) {
      std::uint64_t samples_max = 0;
      for (const auto& g : groups) samples_max = std::max<std::uint64_t>(samples_max, g.size());
      window_ = shard_.window_shards ? *shard_.window_shards : default_window();
      // Far enough ahead to see the next two windows of shards while this one is read.
      lookahead_ = std::max<std::uint64_t>(remote_.read_ahead.value_or(2 * kMinRequestsInFlight), 2 * samples_max * window_);
    }
    set_depth(loop_->cap());
    if (!whole_shards() && !remote_.requests_in_flight) {  // adapt()'s bound
      std::uint64_t image_bytes = 0;
      for (const auto& e : entries_) image_bytes += e.image.size;
      const std::uint64_t mean = std::max<std::uint64_t>(1, image_bytes / entries_.size());
      ceiling_ = most_in_flight_ = std::clamp<std::uint64_t>(kReadAheadBytes / (2 * mean), kMinRequestsInFlight, open_file_share());
    }
  }
  ~remote_tar_reader() override {
    stopping_.store(true);  // requests in flight abort, queued ones fail with `cancelled`
    {
      std::lock_guard lock(cache_m_);  // wakes readers waiting for a shard (none in a loader's life)
    }
    cache_cv_.notify_all();
    loop_->shutdown();  // every request ends (callbacks run) before the members they use go
    if (completions_) completions_->shutdown();  // and every answer handed over is handled
    for (auto& c : cache_) c.data.reset();  // a directory cache's files go with their shards
  }

  std::uint64_t size() const override { return entries_.size(); }
  image_spec image_shape() const override { return {-1, -1, 3, dtype::u8}; }
  std::vector<field_spec> extra_fields() const override { return {{"label", dtype::i64, {}}}; }
  std::string name() const override {
    return std::to_string(entries_.size()) + " samples in " + std::to_string(shards_.size()) + " remote tar shard(s)";
  }
  std::string identity() const override {
    std::vector<std::string> shown;
    for (const auto& sh : shards_) shown.push_back(sh.where.shown);
    return detail::shards_identity(shown, entries_);
  }
  std::shared_ptr<const sample_groups> groups() const override {
    return detail::shard_groups(entries_, shards_.size(), window_);
  }
  bool stores_encoded() const override { return true; }

  read_result read(sample& s, std::vector<std::byte>& image, const decode_planner& plan) override {
    thread_local std::vector<std::byte> stored;
    if (!whole_shards()) return decode_stored(s, read_stored(s, stored), image, plan);
    // Decoded from the cached shard itself, which `held` keeps until then: no copy of the sample.
    std::shared_ptr<const blob> held;
    return decode_stored(s, read_whole(s, stored, held), image, plan);
  }
  std::span<const std::byte> read_stored(sample& s, std::vector<std::byte>& storage) override {
    if (whole_shards()) {  // a view into storage: the caller may keep it past an eviction
      std::shared_ptr<const blob> held;
      const auto bytes = read_whole(s, storage, held);
      if (held) storage.assign(bytes.begin(), bytes.end());
      return storage;
    }
    const detail::shard_sample& e = entries_.at(s.index());
    s.set_origin(shards_[e.shard].where.shown + ":" + e.image.name);
    s.as<std::int64_t>(1)[0] = e.label;
    std::future<std::vector<std::byte>> bytes = take(s.epoch(), s.index(), s.pass());  // first: it may jump the queue
    read_ahead(s);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
      std::vector<std::byte> spent = std::move(storage);  // the last sample's, done with
      storage = bytes.get();
      loop_->recycle(std::move(spent));
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
    remote_counters c{counters_.requests.load(), counters_.retries.load(), counters_.bytes.load(),
                      static_cast<double>(counters_.wait_ns.load()) / 1e6, counters_.read_ahead.load()};
    c.shards = counters_.shards.load();
    c.streamed = counters_.streamed.load();
    c.sidecars = counters_.sidecars.load();
    c.index_cached = counters_.index_cached.load();
    c.shard_bytes = shard_bytes_;
    c.cache_bytes = whole_shards() ? remote_.cache_bytes : 0;
    c.window_shards = window_;
    c.requests_in_flight = loop_->cap();
    c.read_ahead_depth = whole_shards() ? 0 : depth_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  struct shard {
    endpoint where;
    std::uint64_t size;
    std::string etag;  ///< as first seen (under etag_m_ once reading starts)
  };

  [[nodiscard]] bool whole_shards() const noexcept { return whole_; }

  /// Whole shards with no window given: as many shards as a third of the cache holds (the window
  /// read, and the look-ahead's one to two more), from 1 to kMaxDefaultWindow.
  [[nodiscard]] std::uint32_t default_window() const noexcept {
    std::uint64_t largest = 1;
    for (const auto& sh : shards_) largest = std::max(largest, sh.size);
    return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(remote_.cache_bytes / (3 * largest), 1, std::uint64_t{kMaxDefaultWindow}));
  }

  // ---- the index cache (remote_options::index_cache_dir) ----

  /// An index cache file's first line; then the location, the ETag and the sidecar index's text.
  static constexpr std::string_view kIndexCacheMagic = "pinfeed-remote-index 1";
  /// A file's name: kHashDigits hex digits of the location's hash, then kIndexCacheExt; a file
  /// being written has kTempTemplate after that, whose X's mkostemp replaces.
  static constexpr std::size_t kHashDigits = 16;
  static constexpr std::string_view kIndexCacheExt = ".idx", kTempTemplate = ".XXXXXX";

  /// Shard s's file in the index cache: named by a hash of its whole location (query included:
  /// locations that differ only there are other objects).
  std::filesystem::path index_cache_file(std::uint32_t s) const {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (const unsigned char c : locations_[s]) h = (h ^ c) * 1099511628211ull;
    char hex[kHashDigits + 1];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
    return std::filesystem::path(remote_.index_cache_dir) / (hex + std::string(kIndexCacheExt));
  }

  /// Of the shards `unindexed`, those whose cached index still holds (its shard has the size and ETag
  /// it had: one HEAD request each) get their samples into groups; the others are returned.
  std::vector<std::size_t> from_index_cache(const std::vector<std::size_t>& unindexed,
                                            std::vector<std::vector<detail::shard_sample>>& groups) {
    std::error_code ec;
    std::filesystem::create_directories(remote_.index_cache_dir, ec);
    if (ec || !std::filesystem::is_directory(remote_.index_cache_dir))
      throw std::invalid_argument("remote shards: index cache directory '" + remote_.index_cache_dir +
                                  "' cannot be made: " + ec.message());
    remove_stale_index_temps();
    struct entry {
      std::size_t shard;
      std::string etag, index;
      std::future<response> head;
    };
    std::vector<entry> found;
    std::vector<std::size_t> rest;
    for (const std::size_t s : unindexed) {
      std::ifstream in(index_cache_file(static_cast<std::uint32_t>(s)), std::ios::binary);
      std::string magic, where, etag;
      if (!in || !std::getline(in, magic) || magic != kIndexCacheMagic || !std::getline(in, where) ||
          where != shards_[s].where.shown || !std::getline(in, etag) || etag.empty()) {
        rest.push_back(s);
        continue;
      }
      std::string index((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      request q;
      q.head = true;
      found.push_back({s, std::move(etag), std::move(index), loop_->submit(shards_[s].where, q)});
    }
    for (auto& f : found) {
      response r;
      try {
        r = f.head.get();
      } catch (const fatal_error&) {  // no HEAD here (405, 501, a URL signed for GET alone): scanned
        rest.push_back(f.shard);
        continue;
      }
      const auto s = static_cast<std::uint32_t>(f.shard);
      std::optional<std::vector<detail::shard_sample>> samples;
      std::uint64_t size = 0;
      if (r.have_total && r.etag == f.etag) {
        try {
          samples = detail::parse_shard_index(f.index, s, index_cache_file(s).string(), shard_, size);
        } catch (const std::invalid_argument&) {  // a damaged cache file: the shard is scanned again
        }
      }
      if (!samples || size != r.total) {
        rest.push_back(f.shard);
        continue;
      }
      shard& sh = shards_[s];
      sh.size = size;
      sh.etag = r.etag;
      shard_bytes_ += size;
      groups[s] = std::move(*samples);
      counters_.index_cached.fetch_add(1, std::memory_order_relaxed);
    }
    std::sort(rest.begin(), rest.end());
    return rest;
  }

  /// Removes what a process killed between writing an index cache file and renaming it into place
  /// left: temporaries (an index file's name and mkostemp's suffix) untouched for an hour (a
  /// writer in another process is seconds old). Failures are ignored: the files only take room.
  void remove_stale_index_temps() const noexcept {
    std::error_code ec;
    const auto now = std::filesystem::file_time_type::clock::now();
    for (std::filesystem::directory_iterator it(remote_.index_cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const std::string_view hash = std::string_view(name).substr(0, kHashDigits);
      if (name.size() != kHashDigits + kIndexCacheExt.size() + kTempTemplate.size() ||
          !std::all_of(hash.begin(), hash.end(), [](unsigned char c) { return std::isxdigit(c) != 0; }) ||
          name.compare(kHashDigits, kIndexCacheExt.size(), kIndexCacheExt) != 0 ||
          name[kHashDigits + kIndexCacheExt.size()] != kTempTemplate[0])
        continue;
      std::error_code e2;
      const auto when = std::filesystem::last_write_time(it->path(), e2);
      if (!e2 && now - when > std::chrono::hours(1)) std::filesystem::remove(it->path(), e2);
    }
  }

  /// Keeps shard s's index (just built by scanning it) in the index cache, when the shard has an
  /// ETag to check it by later. Written to a new file renamed into place: readers never see half
  /// of one. A file that cannot be written (the directory was made, so: a full disk, say) costs
  /// the next run a scan, nothing else.
  void to_index_cache(std::uint32_t s, const std::vector<detail::shard_sample>& samples) const {
    const shard& sh = shards_[s];
    if (sh.etag.empty() || sh.etag.find('\n') != std::string::npos) return;
    const auto file = index_cache_file(s);
    std::string tmp = file.string() + std::string(kTempTemplate);
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return;
    const std::string text = std::string(kIndexCacheMagic) + "\n" + sh.where.shown + "\n" + sh.etag + "\n" +
                             detail::format_shard_index(samples, sh.size, shard_);
    const bool written = write_all(fd, text.data(), text.size());
    const bool closed = ::close(fd) == 0;
    if (!written || !closed || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
  }

  /// A shard fetched whole to be indexed, scanned as it arrives (a request's sink). With whole
  /// shards its bytes are kept too when the cache has room for them as the body begins: that
  /// copy then stays in the cache (least recently used, it is the first to go when the order
  /// needs room), so the first epoch need not fetch it again.
  struct index_sink final : body_sink {
    index_sink(remote_tar_reader& reader, std::uint32_t shard) : reader_(reader), shard_(shard) {}
    void restart() override {
      scan.emplace(shard_, reader_.shards_[shard_].where.shown, reader_.shard_);
      body.clear();
      kept = false;
      first_ = true;
    }
    void data(std::span<const std::byte> bytes, const response& r) override {
      if (first_) {
        first_ = false;
        if (r.have_total) scan->limit(r.total);  // a member running past the shard fails at its header
        if (reserved_ == 0 && r.have_total && reader_.whole_shards() && reader_.reserve_indexed(shard_, r.total))
          reserved_ = r.total;
        if (reserved_ > 0 && r.have_total && r.total == reserved_) {
          kept = true;
          body.reserve(static_cast<std::size_t>(reserved_));
        }
      }
      scan->feed(bytes);
      if (kept) body.insert(body.end(), bytes.begin(), bytes.end());
    }
    std::optional<detail::shard_scanner> scan;
    std::vector<std::byte> body;  ///< the shard's bytes, when kept
    bool kept = false;

   private:
    remote_tar_reader& reader_;
    std::uint32_t shard_;
    std::uint64_t reserved_ = 0;  ///< counted against the cache cap for this shard
    bool first_ = true;
    friend class remote_tar_reader;
  };

  /// Counts `size` bytes against the cache cap for shard s's indexing copy; false when they do not
  /// fit (nothing is evicted: only indexing copies are resident yet).
  bool reserve_indexed(std::uint32_t s, std::uint64_t size) {
    std::lock_guard lock(cache_m_);
    if (cache_used_ + size > remote_.cache_bytes) return false;
    cache_used_ += size;  // counted now, so that concurrent indexers never overfill the cache
    cache_[s].reserved = size;
    return true;
  }
  void release_indexed(std::uint32_t s) noexcept {
    std::lock_guard lock(cache_m_);
    cache_used_ -= cache_[s].reserved;
    cache_[s].reserved = 0;
  }
  /// The kept copy of shard s, whose bytes reserve_indexed() counted, made resident. During the
  /// indexing, before any reader.
  void place_indexed(std::uint32_t s, std::vector<std::byte>&& body) {
    std::shared_ptr<const blob> data;
    try {
      data = std::make_shared<const blob>(std::move(body), remote_.cache_dir, s);
    } catch (...) {
      release_indexed(s);
      throw;
    }
    std::lock_guard lock(cache_m_);
    cache_[s].data = std::move(data);
    cache_[s].last_use = ++use_clock_;
  }

  /// The ETag a shard had when first seen; a later response with another one is an error.
  std::string expected_etag(std::uint32_t s) {
    std::lock_guard lock(etag_m_);
    return shards_[s].etag;
  }
  void note_etag(std::uint32_t s, const std::string& etag) {
    if (etag.empty()) return;
    std::lock_guard lock(etag_m_);
    std::string& known = shards_[s].etag;
    if (known.empty()) known = etag;
    else if (known != etag) changed(shards_[s].where, "ETag " + known + " then " + etag);
  }

  // ---- whole-shard mode: shards fetched whole ahead of use into a bounded cache ----

  /// A resident shard: in memory, or in a file of the cache directory, unlinked as soon as it is
  /// made: its descriptor and then its mapping keep the blocks until the shard goes, and a
  /// process that is killed leaves nothing behind in the directory.
  class blob {
   public:
    blob(std::vector<std::byte> bytes, const std::string& dir, std::uint32_t shard) {
      if (dir.empty()) {
        memory_ = std::move(bytes);
        view_ = memory_;
        return;
      }
      // A unique new file (O_EXCL), so that processes sharing the directory never meet.
      std::string templ = (std::filesystem::path(dir) / ("pinfeed-shard-" + std::to_string(shard) + "-XXXXXX")).string();
      const int fd = ::mkostemp(templ.data(), O_CLOEXEC);
      if (fd < 0) throw std::runtime_error("cannot make a cache file in '" + dir + "': " + std::strerror(errno));
      ::unlink(templ.c_str());  // the descriptor, then the mapping, keep the blocks
      if (!write_all(fd, bytes.data(), bytes.size())) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error("cannot write the cache file '" + templ + "': " + std::strerror(err));
      }
      if (!bytes.empty()) {
        void* p = ::mmap(nullptr, bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
          const int err = errno;
          ::close(fd);
          throw std::runtime_error("cannot map the cache file '" + templ + "': " + std::strerror(err));
        }
        view_ = {static_cast<const std::byte*>(p), bytes.size()};
        mapped_ = true;
      }
      ::close(fd);
    }
    ~blob() {
      if (mapped_) ::munmap(const_cast<std::byte*>(view_.data()), view_.size());
    }
    blob(const blob&) = delete;
    blob& operator=(const blob&) = delete;
    [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return view_; }

   private:
    std::vector<std::byte> memory_;
    std::span<const std::byte> view_;
    bool mapped_ = false;
  };

  struct cache_slot {
    std::shared_ptr<const blob> data;  ///< resident
    bool fetching = false;
    std::uint64_t reserved = 0;        ///< bytes counted against the cap (resident or being fetched)
    std::uint64_t last_use = 0;
    std::uint64_t pending = 0;         ///< its samples the look-ahead met this epoch that no reader took yet
    bool queued = false;               ///< in wanted_
    bool next_epoch = false;           ///< queued for the start of the next epoch
  };

  /// Whole-shard mode: sample s's fields, and its bytes (see read_from_cache).
  std::span<const std::byte> read_whole(sample& s, std::vector<std::byte>& storage, std::shared_ptr<const blob>& held) {
    const detail::shard_sample& e = entries_.at(s.index());
    s.set_origin(shards_[e.shard].where.shown + ":" + e.image.name);
    s.as<std::int64_t>(1)[0] = e.label;
    return read_from_cache(s, e, storage, held);
  }

  /// Sample e's bytes from its shard in the cache (fetched whole first, or waited for): a view into
  /// the shard, which `held` keeps (so that an eviction meanwhile frees nothing under the view).
  /// When the cache has no room for the shard, the sample alone is range-read into `storage`:
  /// never a wait for space.
  std::span<const std::byte> read_from_cache(sample& s, const detail::shard_sample& e, std::vector<std::byte>& storage,
                                             std::shared_ptr<const blob>& held) {
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<const blob> data;
    {
      const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
      std::unique_lock lock(cache_m_);
      try {
        const std::optional<std::uint32_t> counted = look_ahead(s);
        data = acquire(e.shard, lock);
        // Taken: once no sample is pending, the shard may go. The count is the one s's position
        // holds, which is not e's shard when e is a stand-in for a bad sample.
        if (counted && cache_[*counted].pending > 0) --cache_[*counted].pending;
      } catch (const cancelled&) {  // a fetch could not be queued: the reader is going
        throw fatal_error("remote shards: the reader was destroyed while " + s.origin() + " was read");
      }
    }
    std::span<const std::byte> bytes;
    if (data) {
      bytes = data->bytes().subspan(e.image.offset, e.image.size);
      held = std::move(data);
    } else {
      counters_.streamed.fetch_add(1, std::memory_order_relaxed);
      const stage_timer timer(stage::fetch, s.stats(), s.trace(), s.index());
      try {
        storage = load(s.index(), /*urgent=*/true).get();
      } catch (const cancelled&) {
        throw fatal_error("remote shards: the reader was destroyed while " + s.origin() + " was read");
      }
      bytes = storage;
    }
    counters_.wait_ns.fetch_add(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
    return bytes;
  }

  /// Walks the epoch's order up to lookahead_ positions past s (each position once per epoch),
  /// counting each shard's samples to come and queueing the shards met, then starts the fetches
  /// there is room for. Returns the shard whose count holds s's own position when that position
  /// was walked (the shard of the sample the order puts there). Under cache_m_.
  std::optional<std::uint32_t> look_ahead(const sample& s) {
    const auto at = s.position();
    if (!at) return std::nullopt;  // outside a loader: no order to look along
    const std::uint64_t pos = *at, epoch_size = s.epoch_size(entries_.size());
    const bool restarted = pos + 4 * lookahead_ + 4096 < scan_start_ || pos > frontier_ + 4 * lookahead_ + 4096;
    if (s.epoch() != ahead_epoch_ || epoch_size != ahead_size_ || s.pass() != ahead_pass_ || restarted) {
      // A new epoch, the same one restricted anew, a new pass over it, or restarted: nothing
      // counted so far holds.
      ahead_epoch_ = s.epoch();
      ahead_pass_ = s.pass();
      ahead_size_ = epoch_size;
      scan_start_ = frontier_ = pos;
      next_frontier_ = 0;
      wanted_.clear();
      for (auto& c : cache_) {
        c.pending = 0;
        c.queued = false;
        c.next_epoch = false;
      }
    }
    while (frontier_ < pos + lookahead_) {
      const auto next = s.index_at_position(frontier_);
      if (!next || *next >= entries_.size()) break;
      const std::uint32_t sh = entries_[*next].shard;
      cache_slot& c = cache_[sh];
      ++c.pending;
      if (!c.data && !c.fetching && !c.queued) {
        wanted_.push_back(sh);
        c.queued = true;
      }
      ++frontier_;
    }
    // Near the end of the epoch, on into the next one's first positions: its first window is then
    // on its way before the epoch turns (most trainers start the next epoch next).
    if (frontier_ >= epoch_size && s.epoch() != ~0u) {
      while (epoch_size + next_frontier_ < pos + lookahead_) {
        const auto next = s.index_in_epoch(s.epoch() + 1, next_frontier_);
        if (!next || *next >= entries_.size()) break;
        cache_slot& c = cache_[entries_[*next].shard];
        c.next_epoch = true;  // resident ones too: kept until that epoch starts
        if (!c.data && !c.fetching && !c.queued) {
          wanted_.push_back(entries_[*next].shard);
          c.queued = true;
        }
        ++next_frontier_;
      }
    }
    while (!wanted_.empty()) {
      const std::uint32_t sh = wanted_.front();
      cache_slot& c = cache_[sh];
      // Not for a shard that never fits (its samples are range-read) or whose samples were all
      // read while it waited for room.
      const bool pointless = shards_[sh].size > remote_.cache_bytes || (c.pending == 0 && !c.next_epoch);
      if (!c.data && !c.fetching && !pointless) {
        if (!reserve(sh)) break;  // no room yet: the order of need is kept
        start_fetch(sh, /*urgent=*/false);
        counters_.read_ahead.fetch_add(1, std::memory_order_relaxed);
      }
      c.queued = false;
      wanted_.pop_front();
    }
    if (pos < scan_start_ || pos >= frontier_) return std::nullopt;
    const auto mine = s.index_at_position(pos);
    if (!mine || *mine >= entries_.size()) return std::nullopt;
    return entries_[*mine].shard;
  }

  /// Counts shard sh's bytes against the cap, first evicting resident shards with no sample to
  /// come that the look-ahead met (least recently used first). False when that does not make
  /// room. Under cache_m_.
  bool reserve(std::uint32_t sh) {
    const std::uint64_t need = shards_[sh].size;
    if (need > remote_.cache_bytes) return false;
    while (cache_used_ + need > remote_.cache_bytes) {
      std::optional<std::size_t> victim;
      for (std::size_t i = 0; i < cache_.size(); ++i) {
        const cache_slot& c = cache_[i];
        if (!c.data || c.pending > 0 || c.next_epoch) continue;  // absent, or still to be read
        if (!victim || c.last_use < cache_[*victim].last_use) victim = i;
      }
      if (!victim) return false;
      cache_slot& v = cache_[*victim];
      v.data.reset();
      cache_used_ -= v.reserved;
      v.reserved = 0;
    }
    cache_used_ += need;
    cache_[sh].reserved = need;
    return true;
  }

  /// Fetches shard sh whole (a request of the transfer loop); its slot is reserved. Under cache_m_.
  void start_fetch(std::uint32_t sh, bool urgent) {
    cache_[sh].fetching = true;
    try {
      const shard& d = shards_[sh];
      // The answer is handled on completions_, not on the transfer loop: writing a shard to the
      // cache directory (or waiting for cache_m_) must not hold up the other transfers.
      loop_->submit(d.where, {0, 0, false, d.size, expected_etag(sh)},
                    [this, sh](response&& r, std::exception_ptr error) {
                      std::shared_ptr<response> answer;
                      try {
                        answer = std::make_shared<response>(std::move(r));
                        completions_->post([this, sh, answer, error] { whole_arrived(sh, std::move(*answer), error); });
                      } catch (...) {  // no memory to hand it over: here, then
                        whole_arrived(sh, answer ? std::move(*answer) : std::move(r), error);
                      }
                    },
                    urgent);
    } catch (...) {  // not queued: the slot is free again
      cache_[sh].fetching = false;
      cache_used_ -= cache_[sh].reserved;
      cache_[sh].reserved = 0;
      throw;
    }
    counters_.shards.fetch_add(1, std::memory_order_relaxed);
  }

  /// The end of start_fetch()'s request, on completions_: whatever happened, the slot ends
  /// up resident or free again, and waiting readers are woken.
  void whole_arrived(std::uint32_t sh, response&& r, std::exception_ptr failure) noexcept {
    std::shared_ptr<const blob> data;
    std::exception_ptr error;
    try {
      if (failure) std::rethrow_exception(failure);
      const shard& d = shards_[sh];
      if (r.body.size() != d.size)
        changed(d.where, "size " + std::to_string(d.size) + " then " + std::to_string(r.body.size()) + " bytes");
      note_etag(sh, r.etag);
      data = std::make_shared<const blob>(std::move(r.body), remote_.cache_dir, sh);
    } catch (const cancelled&) {
    } catch (const fatal_error&) {
      error = std::current_exception();
    } catch (const std::exception& ex) {  // the cache directory, memory: not the shard's fault, but fatal
      error = std::current_exception();
      try {
        error = std::make_exception_ptr(fatal_error(std::string("remote shards: ") + ex.what()));
      } catch (...) {
      }
    } catch (...) {
      error = std::current_exception();
    }
    if (error) record_failure(error);
    {
      std::lock_guard lock(cache_m_);
      cache_slot& c = cache_[sh];
      c.fetching = false;
      if (data) {
        c.data = std::move(data);
        c.last_use = ++use_clock_;
      } else {
        cache_used_ -= c.reserved;
        c.reserved = 0;
      }
    }
    cache_cv_.notify_all();
  }

  /// The first request that failed for good stops the reader: every later read rethrows it, and
  /// the requests not yet running end with it.
  void record_failure(std::exception_ptr error) noexcept {
    {
      std::lock_guard lock(failed_mutex_);
      if (failed_ || stopping_.load()) return;
      failed_ = error;
      failed_flag_.store(true, std::memory_order_release);
    }
    loop_->fail_queued(error);
  }
  void rethrow_failure() {
    if (!failed_flag_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(failed_mutex_);
    std::rethrow_exception(failed_);
  }

  /// Shard sh resident (fetching it now if it is neither resident nor on its way), or null when
  /// the cache has no room for it. Rethrows the failure that stopped the reader. Under cache_m_.
  std::shared_ptr<const blob> acquire(std::uint32_t sh, std::unique_lock<std::mutex>& lock) {
    for (;;) {
      if (stopping_.load()) throw fatal_error("remote shards: the reader was destroyed while a shard was read");
      rethrow_failure();
      cache_slot& c = cache_[sh];
      if (c.data) {
        c.last_use = ++use_clock_;
        return c.data;
      }
      if (c.fetching) {
        cache_cv_.wait(lock, [&] { return !cache_[sh].fetching || stopping_.load(); });
        continue;
      }
      if (!reserve(sh)) return nullptr;
      start_fetch(sh, /*urgent=*/true);
    }
  }

  static std::uint64_t key(std::uint32_t epoch, std::uint64_t index) { return (std::uint64_t{epoch} << 44) ^ index; }

  /// The image bytes of sample `index`, checked against the shard as it was indexed (`urgent`:
  /// before the read-ahead). Once one request has failed for good, later ones fail with its error.
  std::future<std::vector<std::byte>> load(std::uint64_t index, bool urgent) {
    auto p = std::make_shared<std::promise<std::vector<std::byte>>>();
    auto f = p->get_future();
    const detail::shard_sample& e = entries_[index];
    const shard& sh = shards_[e.shard];
    try {
      rethrow_failure();
      if (e.image.size == 0) {
        p->set_value({});
        return f;
      }
      loop_->submit(sh.where, {e.image.offset, e.image.size, true, sh.size, expected_etag(e.shard)},
                    [this, p, s = e.shard](response&& r, std::exception_ptr failure) {
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
                    },
                    urgent);
    } catch (...) {
      p->set_exception(std::current_exception());
    }
    return f;
  }

  /// Queues the samples of the epoch's order up to read_ahead positions past s's that are
  /// neither queued nor taken, with a bounded number pending; near the epoch's end, on into the
  /// next epoch's first positions (most trainers start it next: its first batches then do not
  /// wait a round trip or two each). Each position is looked at once an epoch (a restart walks
  /// again from its position).
  void read_ahead(const sample& s) {
    const auto at = s.position();
    if (!at) return;
    const std::uint64_t pos = *at, epoch_size = s.epoch_size(entries_.size());
    std::lock_guard lock(m_);
    if (!remote_.requests_in_flight) adapt();
    const std::size_t depth = depth_.load(std::memory_order_relaxed);
    if (depth == 0) return;
    // A new epoch, the same one restricted anew, a new pass over it, or restarted behind
    // (further than workers lag: a reset by a lagging worker only walks again positions that are
    // pending or taken).
    if (s.pass() != ra_pass_ || s.epoch() != ra_epoch_ || epoch_size != ra_size_ || ra_next_ > pos + 1 + depth + 512) {
      ra_pass_ = s.pass();
      ra_epoch_ = s.epoch();
      ra_size_ = epoch_size;
      ra_next_ = ra_low_ = pos + 1;
      ra_next_epoch_ = 0;
    }
    // A worker behind where the walk began (the first sample of a pass that a worker takes need
    // not be its first position): the positions between are walked too, not left to be requested
    // one by one by the workers that take them.
    const bool behind = pos + 1 < ra_low_;
    std::uint64_t back_to = ra_low_;
    if (behind) ra_low_ = pos + 1;
    ra_next_ = std::max(ra_next_, pos + 1);
    // The next epoch's reads number at most read_ahead, so a quarter of max_pending_ at most.
    const bool no_next_epoch = s.epoch() == ~0u;  // (epoch + 1 would wrap)
    if (pending_.size() >= max_pending_) {  // restarts leave other epochs' reads behind: drop those
      for (auto it = pending_.begin(); it != pending_.end();) {
        const bool kept = it->second.epoch == s.epoch() || (!no_next_epoch && it->second.epoch == s.epoch() + 1);
        it = kept ? std::next(it) : pending_.erase(it);
      }
    }
    const auto queue = [&](std::uint32_t epoch, std::uint64_t index) {
      const std::uint64_t id = key(epoch, index);
      if (index >= entries_.size() || pending_.count(id) != 0 || taken_.count(id) != 0) return;
      pending_.emplace(id, pending{epoch, load(index, /*urgent=*/false)});
      counters_.read_ahead.fetch_add(1, std::memory_order_relaxed);
    };
    if (behind)  // (at most depth + 512 positions: further behind restarts the walk above)
      for (std::uint64_t p = pos + 1; p < std::min(back_to, epoch_size) && pending_.size() < max_pending_; ++p)
        if (const auto next = s.index_at_position(p)) queue(s.epoch(), *next);
    const std::uint64_t end = pos + 1 + depth;
    while (ra_next_ < std::min(epoch_size, end) && pending_.size() < max_pending_) {
      const auto next = s.index_at_position(ra_next_);
      if (!next) break;
      ++ra_next_;
      queue(s.epoch(), *next);
    }
    if (ra_next_ < epoch_size || no_next_epoch) return;
    while (epoch_size + ra_next_epoch_ < end && pending_.size() < max_pending_) {
      const auto next = s.index_in_epoch(s.epoch() + 1, ra_next_epoch_);
      if (!next) break;
      ++ra_next_epoch_;
      queue(s.epoch() + 1, *next);
    }
  }

  /// The read-ahead for `in_flight` requests at once: read_ahead as given, else twice them (128
  /// at least); and the read-ahead answers that may be pending, four times that. Under m_ (or
  /// before any read).
  void set_depth(std::size_t in_flight) {
    const std::size_t depth = remote_.read_ahead.value_or(std::max<std::size_t>(2 * in_flight, 2 * kMinRequestsInFlight));
    depth_.store(depth, std::memory_order_relaxed);
    max_pending_ = std::max<std::size_t>(4 * depth, 64);
  }

  /// Range reads with no requests_in_flight given: the requests in flight follow Little's law.
  /// Over windows of kAdaptEvery samples read and at least max(250 ms, two latencies), the target
  /// is twice the samples read per second times a request's latency (room for both to vary),
  /// within [kMinRequestsInFlight, most_in_flight_].
  ///   - They grow, by half to double a window, only where the cap held requests back (the
  ///     transfer loop had requests queued with the cap full): a consumer that is slower than
  ///     the link keeps them as they are. A growth is kept only when the next window reads at
  ///     least 10% faster; else they go back and stay below it (a link that is full, or a server
  ///     at its limit, gains nothing from more) until the latency doubles.
  ///   - They shrink, by a quarter a window at most, where the target is under half of them and
  ///     the cap held nothing back, so that a bursty consumer does not swing them.
  ///   - A pause (a gap between two reads of over max(1 s, four latencies): between epochs, a
  ///     checkpoint) starts the window anew instead of reading as a slow rate.
  /// Under m_.
  void adapt() {
    constexpr std::uint64_t kAdaptEvery = 64;
    using seconds = std::chrono::duration<double>;
    const auto now = std::chrono::steady_clock::now();
    const double latency = loop_->range_latency_s();
    const bool paused = adapt_count_ > 0 && seconds(now - adapt_last_).count() > std::max(1.0, 4 * latency);
    adapt_last_ = now;
    if (adapt_count_ == 0 || paused) {
      adapt_count_ = 1;
      adapt_mark_ = now;
      grew_ = false;  // a growth is judged on windows next to each other only
      (void)loop_->take_held_back();
      return;
    }
    ++adapt_count_;
    const double elapsed = seconds(now - adapt_mark_).count();
    if (adapt_count_ <= kAdaptEvery || elapsed < std::max(0.25, 2 * latency)) return;
    const double rate = static_cast<double>(adapt_count_ - 1) / elapsed;
    adapt_count_ = 1;
    adapt_mark_ = now;
    const bool held_back = loop_->take_held_back();
    if (!(latency > 0) || !(rate > 0)) return;
    const std::size_t cap = loop_->cap();
    if (grew_) {
      grew_ = false;
      if (rate < 1.1 * rate_before_growth_) {  // no gain: back, and no higher until the latency doubles
        ceiling_ = cap_before_growth_;
        ceiling_latency_ = latency;
        apply_cap(cap_before_growth_);
        return;
      }
    }
    if (ceiling_ < most_in_flight_ && latency > 2 * ceiling_latency_) ceiling_ = most_in_flight_;
    const double want = std::ceil(2.0 * rate * latency);
    const std::size_t target = want >= static_cast<double>(ceiling_)
                                   ? ceiling_
                                   : std::max(kMinRequestsInFlight, static_cast<std::size_t>(want));
    if (held_back && target > cap) {
      // By half at least: a window that began with the epoch reads a rate below what the cap allows.
      const std::size_t next = std::min({std::max(target, cap + cap / 2), 2 * cap, ceiling_});
      if (next <= cap) return;
      cap_before_growth_ = cap;
      rate_before_growth_ = rate;
      grew_ = true;
      apply_cap(next);
    } else if (!held_back && 2 * target < cap) {
      apply_cap(std::max(target, cap - cap / 4));
    }
  }
  void apply_cap(std::size_t n) {
    // With read_ahead given, more in flight than it (and the workers' own requests) is no use.
    if (remote_.read_ahead) n = std::min(n, std::max(kMinRequestsInFlight, *remote_.read_ahead));
    loop_->set_cap(n);
    set_depth(n);
  }

  /// The bytes of (epoch, index): its read-ahead, or a request queued ahead of the read-ahead ones.
  std::future<std::vector<std::byte>> take(std::uint32_t epoch, std::uint64_t index, std::uint64_t pass) {
    const std::uint64_t id = key(epoch, index);
    std::lock_guard lock(m_);
    remember_taken(id, pass);
    const auto it = pending_.find(id);
    if (it != pending_.end()) {
      auto f = std::move(it->second.bytes);
      pending_.erase(it);
      return f;
    }
    return load(index, /*urgent=*/true);
  }

  /// Keeps the last few thousand samples taken in this pass, so that a late read-ahead does not
  /// fetch them again; a new pass (sample::pass()) forgets the last one's.
  void remember_taken(std::uint64_t id, std::uint64_t pass) {
    if (pass != taken_pass_) {
      taken_.clear();
      taken_order_.clear();
      taken_pass_ = pass;
    }
    if (!taken_.insert(id).second) return;
    taken_order_.push_back(id);
    while (taken_order_.size() > 4 * max_pending_) {
      taken_.erase(taken_order_.front());
      taken_order_.pop_front();
    }
  }

  struct pending {
    std::uint32_t epoch;
    std::future<std::vector<std::byte>> bytes;
  };

  shard_options shard_;
  remote_options remote_;
  bool whole_;                ///< whole-shard mode (a window given >= 1, or none given)
  std::uint32_t window_ = 0;  ///< its window (0: range mode); set once the shards are indexed
  std::vector<shard> shards_;
  std::vector<std::string> locations_;  ///< as given (with an index cache: its files' keys)
  std::vector<detail::shard_sample> entries_;
  mutable request_counters counters_;
  std::mutex failed_mutex_;
  std::exception_ptr failed_;  ///< the first request that failed for good (under failed_mutex_)
  std::atomic<bool> failed_flag_{false};
  std::mutex m_;
  std::unordered_map<std::uint64_t, pending> pending_;
  std::unordered_set<std::uint64_t> taken_;
  std::deque<std::uint64_t> taken_order_;
  std::uint64_t taken_pass_ = 0;
  std::size_t max_pending_ = 64;
  std::atomic<std::size_t> depth_{0};  ///< samples read ahead (written under m_)
  // adapt()'s, under m_.
  std::uint64_t adapt_count_ = 0;  ///< samples read since adapt_mark_, plus one
  std::chrono::steady_clock::time_point adapt_mark_, adapt_last_;
  bool grew_ = false;  ///< the last window grew the cap from cap_before_growth_ at rate_before_growth_
  std::size_t cap_before_growth_ = 0;
  double rate_before_growth_ = 0;
  /// The most adapt() takes: kMaxRequestsInFlight, a quarter of the open-file limit (a connection
  /// each, and as many again kept for reuse), and no more than keep the read-ahead within
  /// kReadAheadBytes; kMinRequestsInFlight at least (set once indexed).
  std::size_t most_in_flight_ = kMinRequestsInFlight;
  std::size_t ceiling_ = kMinRequestsInFlight;  ///< the most for now (lowered where a growth gained nothing)
  double ceiling_latency_ = 0;            ///< the latency when it was lowered
  std::uint32_t ra_epoch_ = ~0u;  ///< the read-ahead looked at positions [.., ra_next_) of this epoch
  std::uint64_t ra_pass_ = 0;     ///< in this pass (sample::pass())
  std::uint64_t ra_low_ = 0;      ///< and from this position on (the walk can reach back: read_ahead())
  std::uint64_t ra_size_ = 0, ra_next_ = 0;
  std::uint64_t ra_next_epoch_ = 0;  ///< and positions [0, ra_next_epoch_) of the next epoch
  std::mutex etag_m_;
  std::uint64_t shard_bytes_ = 0;
  // Whole-shard mode (under cache_m_).
  std::mutex cache_m_;
  std::condition_variable cache_cv_;
  std::vector<cache_slot> cache_;
  std::uint64_t cache_used_ = 0, use_clock_ = 0;
  std::deque<std::uint32_t> wanted_;  ///< shards the look-ahead met, in order of need, not yet fetching
  std::uint32_t ahead_epoch_ = ~0u;
  std::uint64_t ahead_pass_ = 0;      ///< (sample::pass())
  std::uint64_t ahead_size_ = 0;
  std::uint64_t scan_start_ = 0;      ///< the look-ahead walked the epoch's positions [scan_start_, frontier_)
  std::uint64_t frontier_ = 0;
  std::uint64_t next_frontier_ = 0;   ///< the next epoch's positions [0, next_frontier_) were walked too
  std::uint64_t lookahead_ = 0;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<task_thread> completions_;  ///< whole-shard mode: the shards' answers are handled here
  std::unique_ptr<transfer_loop> loop_;  ///< last: it stops first (its callbacks use the members above)
};


/// The keys of the objects directly under `dir` (a prefix ending in '/', or empty) of an S3
/// bucket: ListObjectsV2 with a '/' delimiter, every page.
std::vector<std::string> list_s3(const std::string& bucket, const std::string& dir, const remote_options& o) {
  request_counters c;
  transfer_loop loop(o, c);
  const auto creds = std::make_shared<const s3_credentials>(s3_credentials::from_env());
  std::vector<std::string> keys;
  std::string token;
  auto text_of = [](const std::string& xml, const std::string& tag, std::size_t from,
                    std::size_t& end) -> std::optional<std::string> {
    const auto a = xml.find("<" + tag + ">", from);
    if (a == std::string::npos) return std::nullopt;
    const auto b = xml.find("</" + tag + ">", a);
    if (b == std::string::npos) return std::nullopt;
    end = b;
    return xml.substr(a + tag.size() + 2, b - a - tag.size() - 2);
  };
  constexpr int kMaxPages = 100000;  // 10^8 objects
  for (int page = 0;; ++page) {
    if (page == kMaxPages)
      throw std::invalid_argument("s3://" + bucket + "/" + dir + ": more than " + std::to_string(kMaxPages) +
                                  " pages of objects; name the shards with a {first..last} range instead");
    // Parameters in sorted order, as the signature's canonical query has them.
    std::string q = "/?";
    if (!token.empty()) q += "continuation-token=" + percent_encode(token, false) + "&";
    q += "delimiter=%2F&encoding-type=url&list-type=2&prefix=" + percent_encode(dir, false);
    const endpoint e = s3_endpoint(bucket, q, "s3://" + bucket + "/" + dir + " (listing)", creds);
    check_s3_signing(e);
    const response r = loop.submit(e, {}).get();
    const std::string xml(reinterpret_cast<const char*>(r.body.data()), r.body.size());
    std::size_t at = 0, end = 0;
    while (auto k = text_of(xml, "Key", at, end)) {
      keys.push_back(percent_decode(*k));  // encoding-type=url: keys come percent-encoded
      at = end;
    }
    const auto truncated = text_of(xml, "IsTruncated", 0, end);
    const auto next = text_of(xml, "NextContinuationToken", 0, end);
    if (!truncated || *truncated != "true" || !next) break;
    token = *next;
  }
  return keys;
}

}  // namespace

std::vector<std::string> expand_remote_pattern(const std::string& pattern, const remote_options& options) {
  if (!is_remote_location(pattern))
    throw std::invalid_argument("'" + redact_location(pattern) + "' is not an http://, https:// or s3:// location");
  check_options(options);
  // A query (a presigned URL's signature) is not part of the pattern: kept aside, put back on each.
  const bool http = pattern.rfind("s3://", 0) != 0;
  const auto query_at = http ? pattern.find_first_of("?#") : std::string::npos;
  const std::string base = pattern.substr(0, query_at), query = query_at == std::string::npos ? "" : pattern.substr(query_at);
  std::vector<std::string> names;
  try {
    names = detail::expand_braces(base);
  } catch (const std::invalid_argument& e) {
    // The message quotes the pattern: say it again without what the location must not show.
    const std::string what = e.what();
    const auto colon = what.find("': ");
    throw std::invalid_argument("shard pattern '" + redact_location(base) + "'" +
                                (colon == std::string::npos ? std::string(": malformed") : what.substr(colon + 1)));
  }
  std::vector<std::string> out;
  for (const auto& p : names) {
    const auto slash = p.rfind('/');
    const std::string last = p.substr(slash + 1);
    if (last.find_first_of("*?[") == std::string::npos) {
      out.push_back(p + query);
      continue;
    }
    if (http)
      throw std::invalid_argument("shard pattern '" + redact_location(pattern) +
                                  "': a glob needs s3:// (an HTTP server has no listing); give a {first..last} range");
    const s3_parts parts = split_s3(p);
    const auto key_slash = parts.key.rfind('/');
    const std::string dir = key_slash == std::string::npos ? "" : parts.key.substr(0, key_slash + 1);
    std::vector<std::string> matched;
    for (const auto& k : list_s3(parts.bucket, dir, options))
      if (k.size() > dir.size() && k.find('/', dir.size()) == std::string::npos &&
          ::fnmatch(parts.key.c_str(), k.c_str(), 0) == 0)
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
