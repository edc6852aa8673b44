// expand_remote_pattern: brace ranges, and for s3:// a glob in the last path component matched
// against a listing of its prefix.
#include <fnmatch.h>

#include <algorithm>
#include <stdexcept>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "remote/location.hpp"
#include "remote/retry.hpp"
#include "remote/s3.hpp"

namespace pinfeed::loaders {
namespace {

/// The objects of the listing of `l`'s prefix whose names match its last component.
std::vector<std::string> matching_objects(const remote::location& l, const remote_options& options) {
  const auto key_slash = l.key.rfind('/');
  const std::string dir = key_slash == std::string::npos ? "" : l.key.substr(0, key_slash + 1);
  std::vector<std::string> matched;
  for (const auto& k : remote::list_objects(l.bucket, dir, options))
    if (k.size() > dir.size() && k.find('/', dir.size()) == std::string::npos && ::fnmatch(l.key.c_str(), k.c_str(), 0) == 0)
      matched.push_back("s3://" + l.bucket + "/" + k);
  std::sort(matched.begin(), matched.end());
  return matched;
}

/// The brace ranges of `base` expanded; the error names the pattern as it may be printed.
std::vector<std::string> expand(const std::string& base) {
  try {
    return detail::expand_braces(base);
  } catch (const std::invalid_argument& e) {
    // The message quotes the pattern: say it again without what the location must not show.
    const std::string what = e.what();
    const auto colon = what.find("': ");
    throw pinfeed::invalid_argument("shard pattern '" + redact_location(base) + "'" +
                                (colon == std::string::npos ? std::string(": malformed") : what.substr(colon + 1)));
  }
}

}  // namespace

std::vector<std::string> expand_remote_pattern(const std::string& pattern, const remote_options& options) {
  if (!is_remote_location(pattern))
    throw pinfeed::invalid_argument("'" + redact_location(pattern) + "' is not an http://, https:// or s3:// location");
  remote::check_options(options);
  // A query (a presigned URL's signature) is not part of the pattern: kept aside, put back on each.
  const bool http = pattern.rfind("s3://", 0) != 0;
  const auto query_at = http ? pattern.find_first_of("?#", pattern.find("://") + 3) : std::string::npos;
  const std::string base = pattern.substr(0, query_at), query = query_at == std::string::npos ? "" : pattern.substr(query_at);
  std::vector<std::string> out;
  for (const auto& p : expand(base)) {
    if (p.substr(p.rfind('/') + 1).find_first_of("*?[") == std::string::npos) {
      out.push_back(p + query);
      continue;
    }
    if (http)
      throw pinfeed::invalid_argument("shard pattern '" + redact_location(pattern) +
                                  "': a glob needs s3:// (an HTTP server has no listing); give a {first..last} range");
    const auto matched = matching_objects(remote::parse_location(p), options);
    out.insert(out.end(), matched.begin(), matched.end());
  }
  if (out.empty()) throw pinfeed::invalid_argument("shard pattern '" + redact_location(pattern) + "' matches no object");
  return out;
}

}  // namespace pinfeed::loaders
