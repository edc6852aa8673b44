#pragma once
// One HTTP request and its response as libcurl runs them: where it goes (endpoint), what is asked
// (request), what came back (response, its headers parsed as they arrive), and the options of one
// attempt on an easy handle (configure, detach).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <curl/curl.h>

#include "pinfeed/loaders/remote.hpp"

namespace pinfeed::loaders::remote {

struct s3_credentials;

/// Where a request goes and how it is signed.
struct endpoint {
  std::string url;    ///< with credentials nowhere in it (an http(s) location's own user information aside)
  std::string shown;  ///< for messages
  bool s3 = false;
  std::shared_ptr<const s3_credentials> creds;  ///< s3 only
};

struct response;

/// Where a body goes as it arrives, instead of into response::body (a shard indexed in one
/// streaming pass). Each attempt of the request starts it anew.
struct body_sink {
  virtual ~body_sink() = default;
  virtual void restart() = 0;
  /// The next bytes of the body; `r` has the status and headers.
  virtual void data(std::span<const std::byte> bytes, const response& r) = 0;
};

/// One request: a whole object, or `length` bytes at `offset` (`range`); `expect_total` and
/// `expect_etag`, when set, are the object's size and ETag as it was indexed.
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

/// The most a response's body reserves when its Content-Length arrives (a server's number, not a
/// promise): larger bodies grow as their bytes come.
inline constexpr std::size_t kMaxBodyReserve = std::size_t{64} << 20;

/// Takes one header line of a response as it arrives: a status line starts a new response (after a
/// redirect or a 100) and forgets the last one's headers; ETag, Content-Range's total and a 200's
/// Content-Length are kept.
void parse_header_line(response& r, std::string_view line);

/// "GET <shown> bytes a-b", as messages name a request.
[[nodiscard]] std::string describe(const endpoint& e, const request& q);

/// libcurl's global state, set up once per process.
void curl_init_once();

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
  void release() noexcept;
  /// Why the attempt failed in libcurl's words, for a transport error.
  [[nodiscard]] std::string error_text(CURLcode code) const;
};

/// Sets every option of one attempt of `q` on `h` (reset before), pointing into `t`.
void configure(CURL* h, const endpoint& e, const request& q, const remote_options& o, transfer& t);

/// After an attempt on `h`: its status into t.r, and nothing of `t` (nor the credentials) left
/// for the handle to use.
void detach(CURL* h, transfer& t) noexcept;

}  // namespace pinfeed::loaders::remote
