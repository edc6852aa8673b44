// S3 addressing and ListObjectsV2 pages (loaders/src/remote/s3.hpp): no network.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "remote/s3.hpp"
#include "test_util.hpp"

using namespace pinfeed::loaders;
using remote::parse_list_page;

namespace {

// The example answer of AWS's ListObjectsV2 reference (with a continuation token), keys URL-encoded.
constexpr const char* kTruncatedPage = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name>
  <Prefix>train/</Prefix>
  <KeyCount>2</KeyCount>
  <MaxKeys>2</MaxKeys>
  <Delimiter>/</Delimiter>
  <EncodingType>url</EncodingType>
  <IsTruncated>true</IsTruncated>
  <Contents>
    <Key>train/shard-000.tar</Key>
    <LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>"fba9dede5f27731c9771645a39863328"</ETag>
    <Size>434234</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key>train/a%20b%26c.tar</Key>
    <Size>10</Size>
  </Contents>
  <CommonPrefixes><Prefix>train/sub/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;x</NextContinuationToken>
</ListBucketResult>)";

}  // namespace

TEST_CASE("remote.s3.list_pages_are_parsed_as_xml") {
  const auto page = parse_list_page(kTruncatedPage, "s3://bucket/train/");
  // Keys of <Contents> only: neither the page's <Prefix> nor a common prefix is an object.
  CHECK(page.keys == std::vector<std::string>{"train/shard-000.tar", "train/a%20b%26c.tar"});
  CHECK(page.truncated);
  CHECK(page.next_token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&x");  // &amp; decoded
  CHECK(remote::percent_decode(page.keys[1]) == "train/a b&c.tar");

  const auto last = parse_list_page(R"(<ListBucketResult><IsTruncated>false</IsTruncated>
      <Contents><Key>k&lt;1&gt;&amp;&#233;</Key></Contents></ListBucketResult>)", "last");
  CHECK_FALSE(last.truncated);
  CHECK(last.keys == std::vector<std::string>{"k<1>&\xc3\xa9"});
  CHECK(parse_list_page("<ListBucketResult/>", "empty").keys.empty());
}

TEST_CASE("remote.s3.bad_list_pages_are_named") {
  CHECK_THROWS_WITH_AS((void)parse_list_page("<ListBucketResult><Contents><Key>a</Contents>", "s3://b/p (listing)"),
                       doctest::Contains("s3://b/p (listing): the listing is not well-formed XML (line 1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_list_page("", "page 3"), doctest::Contains("page 3: the listing is not well-formed"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_list_page("<Error><Code>AccessDenied</Code></Error>", "p"),
                       doctest::Contains("not a ListBucketResult"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)parse_list_page("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", "p"),
                       doctest::Contains("no NextContinuationToken"), std::invalid_argument);
}

TEST_CASE("remote.s3.list_queries_and_addressing") {
  // Parameters in sorted order, as SigV4's canonical query has them; the token encoded.
  CHECK(remote::list_query("train/", "") == "/?delimiter=%2F&encoding-type=url&list-type=2&prefix=train%2F");
  CHECK(remote::list_query("", "a/b=+") ==
        "/?continuation-token=a%2Fb%3D%2B&delimiter=%2F&encoding-type=url&list-type=2&prefix=");
  const pinfeed::test::scoped_env no_endpoint("AWS_ENDPOINT_URL", nullptr), no_s3_endpoint("AWS_ENDPOINT_URL_S3", nullptr);
  auto creds = std::make_shared<const remote::s3_credentials>(remote::s3_credentials{"id", "secret", "", "eu-west-1"});
  const auto object = remote::resolve(remote::parse_location("s3://bucket/dir/a b.tar"), creds);
  CHECK(object.url == "https://bucket.s3.eu-west-1.amazonaws.com/dir/a%20b.tar");
  CHECK(object.shown == "s3://bucket/dir/a b.tar");
  CHECK(object.s3);
  // A bucket with dots is addressed path-style: its virtual host would not match the certificate.
  CHECK(remote::resolve(remote::parse_location("s3://my.bucket/k"), creds).url ==
        "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
  {
    const pinfeed::test::scoped_env endpoint("AWS_ENDPOINT_URL", "http://127.0.0.1:9000//");
    CHECK(remote::resolve(remote::parse_location("s3://bucket/k"), creds).url == "http://127.0.0.1:9000/bucket/k");
  }
  CHECK(remote::resolve(remote::parse_location("https://h/x.tar?sig=1"), creds).url == "https://h/x.tar?sig=1");
  CHECK_THROWS_WITH_AS((void)remote::resolve(remote::parse_location("s3://bucket"), creds),
                       doctest::Contains("names no object"), std::invalid_argument);
}
