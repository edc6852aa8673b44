#pragma once
// A remote location (http://, https://, s3://), parsed once: what it is requested as, what may be
// printed of it, its sidecar index, and for s3:// its bucket and key. The only place that parses
// a location's text.

#include <string>
#include <string_view>

namespace pinfeed::loaders::remote {

enum class scheme { http, https, s3 };

struct location {
  remote::scheme scheme = scheme::http;
  std::string text;     ///< as given: may hold credentials or a signature, never printed
  std::string shown;    ///< scheme, host, port and path only (redact_location())
  std::string sidecar;  ///< the location of its sidecar index: ".idx" after the path, before a query
  std::string bucket;   ///< s3:// only
  std::string key;      ///< s3:// only: the object key as written (may be empty: a bucket or prefix)
};

/// Parses `text`. Throws std::invalid_argument, naming the location as it may be printed, for a
/// location that is not http://, https:// or s3://, one that libcurl's URL parser refuses, or an
/// s3:// location without a bucket.
[[nodiscard]] location parse_location(std::string_view text);

/// RFC 3986 percent-encoding: unreserved characters kept, and '/' when `keep_slash`.
[[nodiscard]] std::string percent_encode(std::string_view text, bool keep_slash);
/// Decodes %XX sequences; anything else (a lone '%' included) is kept as it is.
[[nodiscard]] std::string percent_decode(std::string_view text);

}  // namespace pinfeed::loaders::remote
