// The retry policy (retry.hpp).
#include "remote/retry.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "remote/s3.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::remote {
namespace {

bool permanent(CURLcode code) {
  return code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_PEER_FAILED_VERIFICATION ||
         code == CURLE_SSL_CACERT_BADFILE || code == CURLE_LOGIN_DENIED || code == CURLE_TOO_MANY_REDIRECTS;
}

bool transient_status(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool answered(long status) { return status == 200 || status == 206; }

/// The object as indexed, checked before anything else: a changed object is not a transient fault.
std::optional<std::string> object_changed(const request& q, const response& r) {
  if (q.expect_total != 0 && r.have_total && r.total != q.expect_total && answered(r.status))
    return "size " + std::to_string(q.expect_total) + " then " + std::to_string(r.total) + " bytes";
  if (q.expect_total != 0 && r.status == 416)
    return "a range of the indexed " + std::to_string(q.expect_total) + " bytes is past its end now";
  if (!q.expect_etag.empty() && !r.etag.empty() && r.etag != q.expect_etag && answered(r.status))
    return "ETag " + q.expect_etag + " then " + r.etag;
  return std::nullopt;
}

std::string status_words(const endpoint& e, long status) {
  std::string s = "HTTP " + std::to_string(status);
  if (status >= 300 && status < 400)
    return s + (e.s3 ? " (a redirect: the bucket is in another region than " +
                           (e.creds ? e.creds->region : std::string("?")) + "; set AWS_REGION)"
                     : std::string(" (too many redirects)"));
  return s + (status == 403 ? " (forbidden: check the credentials)" : status == 404 ? " (not found)" : "");
}

}  // namespace

verdict classify(const endpoint& e, const request& q, int attempt, CURLcode code, const std::string& error,
                 const response& r) {
  const auto fail = [&](const std::string& why) {
    return verdict{verdict::kind::fail, describe(e, q) + ": " + why + " (attempt " + std::to_string(attempt) + ", not retried)"};
  };
  if (r.range_ignored)
    return fail("the server answered a range request with the whole object: per-sample reads need range support");
  if (const auto how = object_changed(q, r)) return {verdict::kind::changed, changed_message(e, *how)};
  if (code != CURLE_OK) return permanent(code) ? fail(error) : verdict{verdict::kind::retry, error};
  if (transient_status(r.status)) return {verdict::kind::retry, "HTTP " + std::to_string(r.status)};
  if (r.status >= 300 && r.status < 400) return fail(status_words(e, r.status));
  if (q.missing_ok && (r.status == 404 || r.status == 403)) return {};
  if (r.status < 200 || r.status >= 300) return fail(status_words(e, r.status));
  if (q.range && r.received != q.length)
    return {verdict::kind::retry, "short read: " + std::to_string(r.received) + " of " + std::to_string(q.length) + " bytes"};
  if (!q.range && !q.head && r.have_total && r.received != r.total)
    return {verdict::kind::retry, "short read: " + std::to_string(r.received) + " of " + std::to_string(r.total) + " bytes"};
  return {};
}

double backoff_ms(const remote_options& o, int attempt, std::minstd_rand& jitter) {
  // backoff_initial_ms x 2^(attempt - 1), up to backoff_max_ms: ldexp doubles without a shift's
  // limit (past the largest double it gives infinity, and the minimum the most).
  const double cap = std::min(o.backoff_max_ms, std::ldexp(o.backoff_initial_ms, std::max(attempt - 1, 0)));
  return std::uniform_real_distribution<double>(0.0, cap)(jitter);
}

std::string out_of_attempts(const endpoint& e, const request& q, const std::string& last, int attempts) {
  return describe(e, q) + ": " + last + " after " + std::to_string(attempts) + " attempts";
}

std::string changed_message(const endpoint& e, const std::string& how) {
  return "remote shard " + e.shown + " changed after it was indexed: " + how + "; samples of two versions would be mixed";
}

void check_options(const remote_options& o) {
  if (o.max_attempts < 1)
    throw pinfeed::invalid_argument("remote shards: max_attempts must be at least 1, got " + std::to_string(o.max_attempts));
  if (o.requests_in_flight && (*o.requests_in_flight < 1 || *o.requests_in_flight > kMaxRequestsInFlight))
    throw pinfeed::invalid_argument("remote shards: requests_in_flight must be in [1, " + std::to_string(kMaxRequestsInFlight) +
                                "], got " + std::to_string(*o.requests_in_flight));
  if (!(o.backoff_initial_ms >= 0) || !(o.backoff_max_ms >= o.backoff_initial_ms) || !(o.connect_timeout_s > 0) ||
      !(o.stall_timeout_s > 0))
    throw pinfeed::invalid_argument("remote shards: the backoff must satisfy 0 <= backoff_initial_ms <= backoff_max_ms and "
                                "the timeouts must be positive (got backoff_initial_ms " +
                                std::to_string(o.backoff_initial_ms) + ", backoff_max_ms " +
                                std::to_string(o.backoff_max_ms) + ", connect_timeout_s " +
                                std::to_string(o.connect_timeout_s) + ", stall_timeout_s " +
                                std::to_string(o.stall_timeout_s) + ")");
}

}  // namespace pinfeed::loaders::remote
