// Remote locations parsed once (loaders/src/remote/location.hpp): no network.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "pinfeed/loaders/remote.hpp"
#include "remote/location.hpp"

using namespace pinfeed::loaders;
using remote::parse_location;

TEST_CASE("remote.location.http_parts_and_sidecar") {
  const auto l = parse_location("https://user:secret@host:8443/data/train-000.tar?X-Amz-Signature=abc&x=1#frag");
  CHECK(l.scheme == remote::scheme::https);
  CHECK(l.shown == "https://host:8443/data/train-000.tar");
  CHECK(l.text == "https://user:secret@host:8443/data/train-000.tar?X-Amz-Signature=abc&x=1#frag");
  // The sidecar goes after the path, before the signature: the signature stays byte for byte.
  CHECK(l.sidecar == "https://user:secret@host:8443/data/train-000.tar.idx?X-Amz-Signature=abc&x=1#frag");
  CHECK(l.bucket.empty());
  const auto plain = parse_location("http://h/a.tar");
  CHECK(plain.scheme == remote::scheme::http);
  CHECK(plain.sidecar == "http://h/a.tar.idx");
  const auto fragment_only = parse_location("http://h/a.tar#part");
  CHECK(fragment_only.sidecar == "http://h/a.tar.idx#part");
}

TEST_CASE("remote.location.ipv6_hosts_and_percent_coding") {
  const auto v6 = parse_location("http://[::1]:8080/shards/a.tar");
  CHECK(v6.shown == "http://[::1]:8080/shards/a.tar");
  CHECK(v6.sidecar == "http://[::1]:8080/shards/a.tar.idx");
  // Percent-coded paths are shown decoded (as written by people), requested as given.
  const auto coded = parse_location("https://h/train%20dir/a%2Bb.tar");
  CHECK(coded.shown == "https://h/train dir/a+b.tar");
  CHECK(coded.text == "https://h/train%20dir/a%2Bb.tar");
  // ...but never into a control character, a byte past ASCII or a '%' (a message must not carry a
  // terminal escape, and what is shown redacts to itself).
  const auto controls = parse_location("https://h/a%0Bb%1B%5B2J%C3%A9%2541%3F%23.tar");
  CHECK(controls.shown == "https://h/a%0Bb%1B[2J%C3%A9%2541%3F%23.tar");
  CHECK(redact_location(controls.shown) == controls.shown);
  CHECK(remote::percent_encode("a b/c+d~e", true) == "a%20b/c%2Bd~e");
  CHECK(remote::percent_encode("a b/c", false) == "a%20b%2Fc");
  CHECK(remote::percent_decode("a%20b%2fc%2F") == "a b/c/");
  CHECK(remote::percent_decode("100%") == "100%");        // a lone '%' stays
  CHECK(remote::percent_decode("%zz%4") == "%zz%4");      // as do malformed escapes
  for (const std::string text : {"x y/z", "100%", "~-._", "\xc3\xa9t\xc3\xa9 \x01"})
    CHECK(remote::percent_decode(remote::percent_encode(text, false)) == text);
}

TEST_CASE("remote.location.s3_bucket_and_key_as_written") {
  const auto l = parse_location("s3://my-bucket/train dir/shard?000#1.tar");
  CHECK(l.scheme == remote::scheme::s3);
  CHECK(l.bucket == "my-bucket");
  CHECK(l.key == "train dir/shard?000#1.tar");  // '?' and '#' are part of a key, not a query
  CHECK(l.sidecar == "s3://my-bucket/train dir/shard?000#1.tar.idx");
  const auto bucket_only = parse_location("s3://my-bucket");
  CHECK(bucket_only.key.empty());
  CHECK(bucket_only.shown == "s3://my-bucket");
  CHECK_THROWS_WITH_AS((void)parse_location("s3:///key.tar"), doctest::Contains("has no bucket"), std::invalid_argument);
}

TEST_CASE("remote.location.bad_locations_are_named_without_credentials") {
  CHECK_THROWS_WITH_AS((void)parse_location("ftp://h/a.tar"), "'ftp://h/a.tar' is not an http://, https:// or s3:// location",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_location("/local/a.tar"), doctest::Contains("is not an http://"), std::invalid_argument);
  try {
    (void)parse_location("http://user:pw@bad host/a.tar");
    FAIL("a URL with a space in its host parsed");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("not a valid URL") != std::string::npos);
    CHECK(what.find("pw") == std::string::npos);
  }
  CHECK(redact_location("") == "location://(unparsable location)");
  CHECK(redact_location("https://u:pw@h/x.tar?token=pw") == "https://h/x.tar");
}
