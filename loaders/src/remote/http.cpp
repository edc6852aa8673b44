// HTTP requests through libcurl (http.hpp): header parsing, and the options of one attempt.
#include "remote/http.hpp"

#include <algorithm>
#include <new>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "remote/s3.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::remote {
namespace {

std::string_view trim(std::string_view s) {
  // Optional whitespace around a field's value is spaces and tabs (RFC 9110, 5.5); the line's end too.
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// libcurl is C: nothing may be thrown through it. An exception is kept and the transfer ended.
std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* r = static_cast<response*>(user);
  if (r->range && r->status_seen == 200) {  // the whole object for a range: stop now
    r->range_ignored = true;
    return 0;
  }
  try {
    const auto* p = reinterpret_cast<const std::byte*>(data);
    // An error page goes to `body` (the retry policy reads the status), never into the sink.
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
    parse_header_line(*r, std::string_view(data, size * n));
  } catch (...) {
    r->error = std::current_exception();
    return 0;
  }
  return size * n;
}

/// Bodies arrive in few large reads (libcurl's default buffer, 16 KiB, takes several a sample).
constexpr std::uint64_t kReceiveBuffer = 256 * 1024;

/// SHA-256 of the empty body of a GET, which S3 wants named in a header of its own.
constexpr const char* kEmptyBodySha256 =
    "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A text option libcurl copies: a copy it cannot make is memory (CURLE_OUT_OF_MEMORY), never a
/// request sent without it (a whole object for a range, "no URL set" for a URL).
void set_text(CURL* h, CURLoption option, const char* text) {
  if (curl_easy_setopt(h, option, text) == CURLE_OUT_OF_MEMORY) throw std::bad_alloc();
}

/// One more request header (libcurl copies it). curl_slist_append gives null when it has no
/// memory, and the list stays as it was: that is std::bad_alloc, never a header left out.
void append_header(transfer& t, const char* header) {
  curl_slist* longer = curl_slist_append(t.headers, header);
  if (longer == nullptr) throw std::bad_alloc();
  t.headers = longer;
}

void set_redirects(CURL* h, bool s3) {
  if (s3) {
    // A redirect from S3 (another region) would drop the signature and carry the session
    // token's header to another host: it is reported instead. Keys are sent as written.
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    set_text(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  }
}

void set_signing(CURL* h, const s3_credentials& creds, transfer& t) {
  t.sigv4 = "aws:amz:" + creds.region + ":s3";
  set_text(h, CURLOPT_AWS_SIGV4, t.sigv4.c_str());
  set_text(h, CURLOPT_USERNAME, creds.key_id.c_str());
  set_text(h, CURLOPT_PASSWORD, creds.secret.c_str());
  append_header(t, kEmptyBodySha256);
  if (!creds.token.empty()) {
    t.token_header = "x-amz-security-token: " + creds.token;
    append_header(t, t.token_header.c_str());
  }
}

}  // namespace

void parse_header_line(response& r, std::string_view line) {
  if (line.substr(0, 5) == "HTTP/") {  // a new response (after a redirect or a 100): forget the last
    r.etag.clear();
    r.have_total = false;
    const auto sp = line.find(' ');
    r.status_seen = sp == std::string_view::npos ? 0 : std::strtol(std::string(line.substr(sp + 1)).c_str(), nullptr, 10);
    return;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string value(trim(line.substr(colon + 1)));
  if (name == "etag") {
    r.etag = value;
  } else if (name == "content-range") {  // bytes a-b/total
    const auto slash = value.rfind('/');
    if (slash != std::string::npos && value.substr(slash + 1) != "*") {
      r.total = std::strtoull(value.c_str() + slash + 1, nullptr, 10);
      r.have_total = true;
    }
  } else if (name == "content-length" && !r.have_total && r.status_seen == 200) {
    r.total = std::strtoull(value.c_str(), nullptr, 10);
    r.have_total = true;
    if (!r.range && !r.head && r.sink == nullptr)
      r.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(r.total, kMaxBodyReserve)));
  }
}

std::string describe(const endpoint& e, const request& q) {
  return (q.head ? "HEAD " : "GET ") + e.shown +
         (q.range ? " bytes " + std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1) : "");
}

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw pinfeed::runtime_error("libcurl failed to initialize");
  });
}

void transfer::release() noexcept {
  if (headers != nullptr) curl_slist_free_all(headers);
  headers = nullptr;
  std::fill(token_header.begin(), token_header.end(), '\0');
}

std::string transfer::error_text(CURLcode code) const {
  return errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(code));
}

void configure(CURL* h, const endpoint& e, const request& q, const remote_options& o, transfer& t) {
  t.r = response{};
  t.r.range = q.range;
  t.r.sink = q.sink.get();
  t.r.head = q.head;
  if (q.sink) q.sink->restart();
  if (q.head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  t.errbuf[0] = '\0';
  set_text(h, CURLOPT_URL, e.url.c_str());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t.errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // A sample's range in one read where it fits (a buffer each handle holds; 16 KiB at least).
  const long buffer = q.range ? static_cast<long>(std::clamp<std::uint64_t>(q.length, 16 * 1024, kReceiveBuffer)) : kReceiveBuffer;
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, buffer);
  set_redirects(h, e.s3);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_s * 1000));
  // Slower than 1 KiB/s for stall_timeout_s counts as a stall (a trickle included).
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(o.stall_timeout_s + 0.999)));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t.r);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t.r);
  if (q.range) {
    // A header of ours, not CURLOPT_RANGE: libcurl (7.88) leaves its own Range line out of the
    // request when it cannot allocate it, and the server then sends the whole object.
    t.range = "Range: bytes=" + std::to_string(q.offset) + "-" + std::to_string(q.offset + q.length - 1);
    append_header(t, t.range.c_str());
  }
  if (e.s3 && e.creds && !e.creds->key_id.empty()) set_signing(h, *e.creds, t);
  if (t.headers != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, t.headers);
}

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

}  // namespace pinfeed::loaders::remote
