// S3 addressing and listing (s3.hpp). The listing's XML is read with expat.
#include "remote/s3.hpp"

#include <cstdlib>
#include <stdexcept>

#include <expat.h>

#include "remote/transfer_loop.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders::remote {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

/// The text of the elements a ListObjectsV2 page is read for, as expat hands it over.
struct list_parser {
  list_page page;
  std::vector<std::string> path;  ///< the open elements
  std::string text;               ///< of the innermost open element
  bool saw_result = false;

  static void on_start(void* user, const XML_Char* name, const XML_Char**) {
    auto* p = static_cast<list_parser*>(user);
    if (p->path.empty()) p->saw_result = std::string_view(name) == "ListBucketResult";
    p->path.emplace_back(name);
    p->text.clear();
  }
  static void on_end(void* user, const XML_Char* name) {
    auto* p = static_cast<list_parser*>(user);
    const std::string_view n(name);
    // Keys of <Contents> only: <CommonPrefixes><Prefix> and the page's own <Prefix> are not objects.
    const bool in_contents = p->path.size() == 3 && p->path[1] == "Contents";
    if (p->path.size() == 2 || in_contents) {
      if (in_contents && n == "Key") p->page.keys.push_back(p->text);
      else if (p->path.size() == 2 && n == "IsTruncated") p->page.truncated = p->text == "true";
      else if (p->path.size() == 2 && n == "NextContinuationToken") p->page.next_token = p->text;
    }
    p->path.pop_back();
    p->text.clear();
  }
  static void on_text(void* user, const XML_Char* s, int len) {
    static_cast<list_parser*>(user)->text.append(s, static_cast<std::size_t>(len));
  }
};

}  // namespace

s3_credentials s3_credentials::from_env() {
  s3_credentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"), env("AWS_REGION")};
  if (c.region.empty()) c.region = env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = "us-east-1";
  return c;
}

endpoint s3_endpoint(const std::string& bucket, const std::string& suffix, const std::string& shown,
                     std::shared_ptr<const s3_credentials> creds) {
  endpoint e;
  e.s3 = true;
  e.shown = shown;
  std::string base = env("AWS_ENDPOINT_URL_S3");
  if (base.empty()) base = env("AWS_ENDPOINT_URL");
  if (!base.empty()) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    e.url = base + "/" + bucket + suffix;
  } else if (bucket.find('.') != std::string::npos) {
    e.url = "https://s3." + creds->region + ".amazonaws.com/" + bucket + suffix;
  } else {
    e.url = "https://" + bucket + ".s3." + creds->region + ".amazonaws.com" + suffix;
  }
  e.creds = std::move(creds);
  return e;
}

endpoint resolve(const location& l, const std::shared_ptr<const s3_credentials>& creds) {
  if (l.scheme != scheme::s3) return {l.text, l.shown, false, nullptr};
  if (l.key.empty()) throw pinfeed::invalid_argument("s3 location '" + l.shown + "' names no object");
  std::string path = "/";
  path += percent_encode(l.key, true);  // (appended: GCC 12 warns falsely of "/" + a temporary)
  return s3_endpoint(l.bucket, path, l.shown, creds);
}

list_page parse_list_page(std::string_view xml, const std::string& what) {
  list_parser p;
  const std::unique_ptr<std::remove_pointer_t<XML_Parser>, decltype(&XML_ParserFree)> parser(XML_ParserCreate("UTF-8"),
                                                                                            &XML_ParserFree);
  if (!parser) throw pinfeed::runtime_error("expat: cannot create a parser");
  XML_SetUserData(parser.get(), &p);
  XML_SetElementHandler(parser.get(), &list_parser::on_start, &list_parser::on_end);
  XML_SetCharacterDataHandler(parser.get(), &list_parser::on_text);
  if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE) != XML_STATUS_OK)
    throw pinfeed::invalid_argument(what + ": the listing is not well-formed XML (line " +
                                std::to_string(XML_GetCurrentLineNumber(parser.get())) + ": " +
                                XML_ErrorString(XML_GetErrorCode(parser.get())) + ")");
  if (!p.saw_result) throw pinfeed::invalid_argument(what + ": the listing is not a ListBucketResult");
  if (p.page.truncated && p.page.next_token.empty())
    throw pinfeed::invalid_argument(what + ": a truncated listing page has no NextContinuationToken");
  return p.page;
}

std::string list_query(const std::string& dir, const std::string& token) {
  std::string q = "/?";
  if (!token.empty()) q += "continuation-token=" + percent_encode(token, false) + "&";
  return q + "delimiter=%2F&encoding-type=url&list-type=2&prefix=" + percent_encode(dir, false);
}

std::vector<std::string> list_objects(const std::string& bucket, const std::string& dir, const remote_options& o) {
  request_counters c;
  transfer_loop loop(o, c);
  const auto creds = std::make_shared<const s3_credentials>(s3_credentials::from_env());
  const std::string shown = "s3://" + bucket + "/" + dir + " (listing)";
  std::vector<std::string> keys;
  std::string token;
  constexpr int kMaxPages = 100000;  // 10^8 objects
  for (int page = 0;; ++page) {
    if (page == kMaxPages)
      throw pinfeed::invalid_argument("s3://" + bucket + "/" + dir + ": more than " + std::to_string(kMaxPages) +
                                  " pages of objects; name the shards with a {first..last} range instead");
    const response r = loop.submit(s3_endpoint(bucket, list_query(dir, token), shown, creds), {}).get();
    const list_page p =
        parse_list_page({reinterpret_cast<const char*>(r.body.data()), r.body.size()}, shown + ", page " + std::to_string(page + 1));
    for (const auto& k : p.keys) keys.push_back(percent_decode(k));  // encoding-type=url: keys come percent-encoded
    if (!p.truncated) break;
    token = p.next_token;
  }
  return keys;
}

}  // namespace pinfeed::loaders::remote
