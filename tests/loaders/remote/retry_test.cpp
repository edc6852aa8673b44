// The retry policy and response headers (loaders/src/remote/retry.hpp, http.hpp): no network.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "remote/retry.hpp"
#include "remote/s3.hpp"

using namespace pinfeed::loaders;
using remote::verdict;

namespace {

remote::endpoint http_endpoint() { return {"http://h/a.tar", "http://h/a.tar", false, nullptr}; }

remote::response answer(long status, std::uint64_t received = 0) {
  remote::response r;
  r.status = status;
  r.received = received;
  return r;
}

verdict judge(const remote::response& r, CURLcode code = CURLE_OK, const remote::request& q = {},
              const remote::endpoint& e = http_endpoint()) {
  return remote::classify(e, q, 2, code, code == CURLE_OK ? "" : "libcurl's words", r);
}

}  // namespace

TEST_CASE("remote.retry.statuses") {
  // Contract: every 2xx is an answer, to its last (a 299 from some proxy is still a success).
  for (const long s : {200L, 204L, 206L, 299L}) {
    CAPTURE(s);
    CHECK(judge(answer(s)).what == verdict::kind::answer);
  }
  for (const long s : {429L, 500L, 502L, 503L, 504L}) {
    CAPTURE(s);
    const verdict v = judge(answer(s));
    CHECK(v.what == verdict::kind::retry);
    CHECK(v.why == "HTTP " + std::to_string(s));
  }
  const verdict missing = judge(answer(404));
  CHECK(missing.what == verdict::kind::fail);
  CHECK(missing.why == "GET http://h/a.tar: HTTP 404 (not found) (attempt 2, not retried)");
  CHECK(judge(answer(403)).why.find("(forbidden: check the credentials)") != std::string::npos);
  CHECK(judge(answer(400)).what == verdict::kind::fail);
  CHECK(judge(answer(501)).what == verdict::kind::fail);
  remote::request optional;
  optional.missing_ok = true;
  CHECK(judge(answer(404), CURLE_OK, optional).what == verdict::kind::answer);
  CHECK(judge(answer(403), CURLE_OK, optional).what == verdict::kind::answer);
  CHECK(judge(answer(500), CURLE_OK, optional).what == verdict::kind::retry);
  CHECK(judge(answer(302)).why.find("too many redirects") != std::string::npos);
  // From S3, a redirect is another region: the message says which one was asked.
  auto creds = std::make_shared<const remote::s3_credentials>(remote::s3_credentials{"id", "s", "", "eu-north-1"});
  const remote::endpoint s3{"https://b.s3.eu-north-1.amazonaws.com/k", "s3://b/k", true, creds};
  const verdict moved = judge(answer(301), CURLE_OK, {}, s3);
  CHECK(moved.what == verdict::kind::fail);
  CHECK(moved.why.find("another region than eu-north-1; set AWS_REGION") != std::string::npos);
  // Contract: only a 3xx is called a redirect. A final 1xx (a server that switched protocols,
  // say) fails with its status as it is, from S3 too.
  for (const long s : {100L, 101L, 199L}) {
    CAPTURE(s);
    const verdict odd = judge(answer(s));
    CHECK(odd.what == verdict::kind::fail);
    CHECK(odd.why == "GET http://h/a.tar: HTTP " + std::to_string(s) + " (attempt 2, not retried)");
    CHECK(judge(answer(s), CURLE_OK, {}, s3).why.find("region") == std::string::npos);
  }
}

TEST_CASE("remote.retry.transport_errors") {
  for (const CURLcode c : {CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
                           CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_COULDNT_RESOLVE_HOST}) {
    CAPTURE(c);
    const verdict v = judge(answer(0), c);
    CHECK(v.what == verdict::kind::retry);
    CHECK(v.why == "libcurl's words");
  }
  for (const CURLcode c : {CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_PEER_FAILED_VERIFICATION,
                           CURLE_SSL_CACERT_BADFILE, CURLE_LOGIN_DENIED, CURLE_TOO_MANY_REDIRECTS}) {
    CAPTURE(c);
    const verdict v = judge(answer(0), c);
    CHECK(v.what == verdict::kind::fail);
    CHECK(v.why == "GET http://h/a.tar: libcurl's words (attempt 2, not retried)");
  }
}

TEST_CASE("remote.retry.short_bodies_changed_objects_and_ranges") {
  remote::request range;
  range.range = true;
  range.offset = 100;
  range.length = 50;
  range.expect_total = 1000;
  range.expect_etag = "\"v1\"";
  CHECK(judge(answer(206, 50), CURLE_OK, range).what == verdict::kind::answer);
  const verdict short_read = judge(answer(206, 20), CURLE_OK, range);
  CHECK(short_read.what == verdict::kind::retry);
  CHECK(short_read.why == "short read: 20 of 50 bytes");
  remote::response whole = answer(200, 0);
  whole.range_ignored = true;
  CHECK(judge(whole, CURLE_OK, range).why.find("per-sample reads need range support") != std::string::npos);
  // An object that changed is refused before anything else, even a transport error.
  remote::response bigger = answer(206, 50);
  bigger.have_total = true;
  bigger.total = 1200;
  const verdict grown = judge(bigger, CURLE_RECV_ERROR, range);
  CHECK(grown.what == verdict::kind::changed);
  CHECK(grown.why == "remote shard http://h/a.tar changed after it was indexed: size 1000 then 1200 bytes; samples of two "
                     "versions would be mixed");
  remote::response retagged = answer(206, 50);
  retagged.etag = "\"v2\"";
  CHECK(judge(retagged, CURLE_OK, range).why.find("ETag \"v1\" then \"v2\"") != std::string::npos);
  CHECK(judge(answer(416), CURLE_OK, range).what == verdict::kind::changed);
  // Contract: a 416 says an object changed only against a size that was indexed; a range read of
  // an object whose size is not known (expect_total 0) gets the HTTP status as it is.
  remote::request unsized = range;
  unsized.expect_total = 0;
  const verdict past = judge(answer(416), CURLE_OK, unsized);
  CHECK(past.what != verdict::kind::changed);
  CHECK(past.why.find("HTTP 416") != std::string::npos);
  CHECK(past.why.find("changed") == std::string::npos);
  // A whole object shorter than its Content-Length is retried.
  remote::response cut = answer(200, 10);
  cut.have_total = true;
  cut.total = 40;
  CHECK(judge(cut).why == "short read: 10 of 40 bytes");
  remote::request head;
  head.head = true;
  CHECK(judge(cut, CURLE_OK, head).what == verdict::kind::answer);
}

TEST_CASE("remote.retry.backoff_is_full_jitter_within_its_bounds") {
  remote_options o;
  o.backoff_initial_ms = 50;
  o.backoff_max_ms = 2000;
  std::minstd_rand jitter(7);
  for (int attempt = 1; attempt <= 40; ++attempt) {
    CAPTURE(attempt);
    const double cap = std::min(2000.0, 50.0 * std::ldexp(1.0, attempt - 1));
    double most = 0;
    for (int i = 0; i < 2000; ++i) {
      const double w = remote::backoff_ms(o, attempt, jitter);
      REQUIRE(w >= 0);
      REQUIRE(w <= cap);
      most = std::max(most, w);
    }
    CHECK(most > 0.9 * cap);  // the whole range is used, not a fixed wait
  }
  o.backoff_initial_ms = o.backoff_max_ms = 0;
  CHECK(remote::backoff_ms(o, 3, jitter) == 0);
  // The doubling goes on however many attempts it takes to reach the most (here 2^40 x the first
  // wait): it does not stop at a shift's width, and a huge attempt count waits up to the most.
  o.backoff_initial_ms = 1e-9;
  o.backoff_max_ms = 1e9;
  for (const int attempt : {31, 32, 33, 41, 60, 1 << 30}) {
    CAPTURE(attempt);
    const double cap = std::min(1e9, std::ldexp(1e-9, attempt - 1));
    double most = 0;
    for (int i = 0; i < 200; ++i) most = std::max(most, remote::backoff_ms(o, attempt, jitter));
    CHECK(most <= cap);
    CHECK(most > 0.9 * cap);
  }
}

TEST_CASE("remote.retry.bad_options_are_named") {
  remote_options o;
  o.max_attempts = 0;
  CHECK_THROWS_WITH_AS(remote::check_options(o), "remote shards: max_attempts must be at least 1, got 0", std::invalid_argument);
  o = {};
  o.requests_in_flight = 2000;
  CHECK_THROWS_WITH_AS(remote::check_options(o), doctest::Contains("requests_in_flight must be in [1, 1024], got 2000"),
                       std::invalid_argument);
  o = {};
  o.backoff_max_ms = 10;
  o.backoff_initial_ms = 20;
  CHECK_THROWS_WITH_AS(remote::check_options(o), doctest::Contains("backoff_initial_ms 20.0"), std::invalid_argument);
  o = {};
  o.stall_timeout_s = 0;
  // Every value of the rule, each named (the message is the whole of what a user sees).
  CHECK_THROWS_WITH_AS(remote::check_options(o),
                       ("remote shards: the backoff must satisfy 0 <= backoff_initial_ms <= backoff_max_ms and the timeouts "
                        "must be positive (got backoff_initial_ms " + std::to_string(o.backoff_initial_ms) + ", backoff_max_ms " +
                        std::to_string(o.backoff_max_ms) + ", connect_timeout_s " + std::to_string(o.connect_timeout_s) +
                        ", stall_timeout_s 0.000000)").c_str(),
                       std::invalid_argument);
  CHECK_NOTHROW(remote::check_options({}));
  // A timeout of zero or below, or not a number, is no timeout.
  for (const double bad : {0.0, -1.0, -1e-9, std::nan("")}) {
    CAPTURE(bad);
    o = {};
    o.stall_timeout_s = bad;
    CHECK_THROWS_WITH_AS(remote::check_options(o), doctest::Contains("the timeouts must be positive"), std::invalid_argument);
    o = {};
    o.connect_timeout_s = bad;
    CHECK_THROWS_WITH_AS(remote::check_options(o), doctest::Contains("the timeouts must be positive"), std::invalid_argument);
  }
  // The bounds themselves are allowed: no backoff at all (retry at once), or a fraction of a ms.
  for (const double initial : {0.0, 0.25}) {
    CAPTURE(initial);
    o = {};
    o.backoff_initial_ms = initial;
    o.backoff_max_ms = initial;
    CHECK_NOTHROW(remote::check_options(o));
  }
  o = {};
  o.backoff_initial_ms = -1;
  CHECK_THROWS_WITH_AS(remote::check_options(o), doctest::Contains("0 <= backoff_initial_ms"), std::invalid_argument);
}

TEST_CASE("remote.http.header_lines") {
  remote::response r;
  remote::parse_header_line(r, "HTTP/1.1 301 Moved Permanently\r\n");
  CHECK(r.status_seen == 301);
  remote::parse_header_line(r, "ETag: \"old\"\r\n");
  remote::parse_header_line(r, "Content-Length: 5\r\n");  // not a 200: not the object's size
  CHECK_FALSE(r.have_total);
  remote::parse_header_line(r, "HTTP/1.1 206 Partial Content\r\n");  // after a redirect: the last one's forgotten
  CHECK(r.status_seen == 206);
  CHECK(r.etag.empty());
  remote::parse_header_line(r, "content-range: bytes 0-99/12345\r\n");
  remote::parse_header_line(r, "eTaG:   \"v7\"  \r\n");
  CHECK(r.have_total);
  CHECK(r.total == 12345);
  CHECK(r.etag == "\"v7\"");
  remote::parse_header_line(r, "Content-Length: 100\r\n");  // Content-Range's total wins
  CHECK(r.total == 12345);
  remote::response star;
  remote::parse_header_line(star, "HTTP/2 206\r\n");
  remote::parse_header_line(star, "Content-Range: bytes 0-9/*\r\n");
  CHECK_FALSE(star.have_total);
  remote::response whole;
  remote::parse_header_line(whole, "HTTP/1.1 200 OK\r\n");
  remote::parse_header_line(whole, "Content-Length: 4096\r\n");
  CHECK(whole.have_total);
  CHECK(whole.total == 4096);
  CHECK(whole.body.capacity() >= 4096);  // a whole body is reserved for up front
  remote::parse_header_line(whole, "garbage without a colon\r\n");
  remote::parse_header_line(whole, "\r\n");
  CHECK(whole.total == 4096);
  // Optional whitespace is spaces and tabs.
  remote::parse_header_line(whole, "ETag:\t\"t\"\t\r\n");
  CHECK(whole.etag == "\"t\"");
  // A server's Content-Length is a number, not a promise: a bounded buffer is reserved up front.
  remote::response huge;
  remote::parse_header_line(huge, "HTTP/1.1 200 OK\r\n");
  remote::parse_header_line(huge, "Content-Length: 17179869184\r\n");
  CHECK(huge.total == 17179869184ull);
  CHECK(huge.body.capacity() <= remote::kMaxBodyReserve);
}
