#pragma once
// What one attempt of a request came to, and how long to wait before the next: pure functions of
// the attempt's outcome (no I/O), so that every status and libcurl code can be tested alone.

#include <random>
#include <string>

#include <curl/curl.h>

#include "pinfeed/loaders/remote.hpp"
#include "remote/http.hpp"

namespace pinfeed::loaders::remote {

struct verdict {
  enum class kind {
    answer,   ///< the response is the answer
    retry,    ///< worth another attempt; `why` says what went wrong
    fail,     ///< not worth retrying; `why` is the whole message (naming the request and the attempt)
    changed,  ///< the object is not the one indexed; `why` is the whole message
  };
  kind what = kind::answer;
  std::string why;
};

/// Classifies attempt number `attempt` of `q` to `e`, which ended with libcurl's `code` (`error`:
/// its words) and the response `r`:
///   - the object changed (size, ETag, a range past its end now): changed, before anything else;
///   - a server that answers a range with the whole object: fail;
///   - transport errors: retry, but for a malformed URL, an unsupported protocol, a TLS peer or CA
///     failure, a refused login and too many redirects (fail);
///   - HTTP 429, 500, 502, 503, 504: retry; 3xx: fail (from S3: the bucket's region);
///   - 404 and 403 of an optional object (missing_ok): answer; other statuses outside 2xx: fail;
///   - a body shorter than asked (or than the object's size): retry.
[[nodiscard]] verdict classify(const endpoint& e, const request& q, int attempt, CURLcode code, const std::string& error,
                               const response& r);

/// The wait before attempt `attempt + 1` (attempt >= 1): uniform in
/// [0, min(backoff_max_ms, backoff_initial_ms * 2^(attempt - 1))] ms ("full jitter").
[[nodiscard]] double backoff_ms(const remote_options& o, int attempt, std::minstd_rand& jitter);

/// The message of a request that used up its attempts: its last failure and the count.
[[nodiscard]] std::string out_of_attempts(const endpoint& e, const request& q, const std::string& last, int attempts);

/// The message for an object that is not the one indexed.
[[nodiscard]] std::string changed_message(const endpoint& e, const std::string& how);

/// Checks the options a reader or a listing is given: throws std::invalid_argument naming the value.
void check_options(const remote_options& o);

}  // namespace pinfeed::loaders::remote
