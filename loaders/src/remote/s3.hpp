#pragma once
// S3: credentials from the environment, how a bucket and key are addressed, and listing a prefix
// (ListObjectsV2). Requests are signed by libcurl (CURLOPT_AWS_SIGV4, see http.cpp).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pinfeed/loaders/remote.hpp"
#include "remote/http.hpp"
#include "remote/location.hpp"

namespace pinfeed::loaders::remote {

/// How requests are signed for S3: read from the environment once, when a reader or a listing
/// starts (never from the transfer loop). Region: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1.
struct s3_credentials {
  std::string key_id, secret, token, region;
  [[nodiscard]] static s3_credentials from_env();
};

/// The URL of an S3 bucket with `suffix` (an encoded "/key" or "/?query") appended: path-style
/// under an explicit endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) or for a bucket name with
/// dots (its virtual host would not match the TLS certificate), virtual-hosted otherwise.
[[nodiscard]] endpoint s3_endpoint(const std::string& bucket, const std::string& suffix, const std::string& shown,
                                   std::shared_ptr<const s3_credentials> creds);

/// Where a parsed location is requested from: an http(s) URL as it is, an s3:// object through
/// s3_endpoint(). Throws std::invalid_argument for an s3:// location that names no object.
[[nodiscard]] endpoint resolve(const location& l, const std::shared_ptr<const s3_credentials>& creds);

/// One page of a ListObjectsV2 answer.
struct list_page {
  std::vector<std::string> keys;  ///< as sent (percent-encoded under encoding-type=url)
  bool truncated = false;
  std::string next_token;  ///< NextContinuationToken, when truncated
};

/// Parses a ListObjectsV2 answer (XML; entities such as &amp; decoded). Throws std::invalid_argument
/// naming `what` and the line for text that is not well-formed XML or not a ListBucketResult, and
/// for a truncated page without a continuation token.
[[nodiscard]] list_page parse_list_page(std::string_view xml, const std::string& what);

/// The query of a ListObjectsV2 request for the objects directly under `dir` (a prefix ending in
/// '/', or empty), after the page whose token is `token` (empty: the first): "/?..." with its
/// parameters in sorted order, as the signature's canonical query has them.
[[nodiscard]] std::string list_query(const std::string& dir, const std::string& token);

/// The keys (decoded) of the objects directly under `dir` of `bucket`: every page.
[[nodiscard]] std::vector<std::string> list_objects(const std::string& bucket, const std::string& dir,
                                                    const remote_options& o);

}  // namespace pinfeed::loaders::remote
