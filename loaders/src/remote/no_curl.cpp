// Remote shards in a build without libcurl (PINFEED_WITH_CURL=OFF): every entry point says so.
#include <stdexcept>

#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
namespace {

[[noreturn]] void no_curl() {
  throw pinfeed::runtime_error("remote shards: this pinfeed was built without libcurl (Debian: libcurl4-openssl-dev)");
}

}  // namespace

std::string redact_location(std::string_view l) {
  const auto scheme_end = l.find("://");
  return (scheme_end == std::string_view::npos ? std::string("location") : std::string(l.substr(0, scheme_end))) +
         "://(not printed: built without libcurl's URL parser)";
}

std::vector<std::string> expand_remote_pattern(const std::string&, const remote_options&) { no_curl(); }

std::shared_ptr<image_reader> make_remote_shard_reader(const std::vector<std::string>&, shard_options, remote_options) {
  no_curl();
}

}  // namespace pinfeed::loaders
