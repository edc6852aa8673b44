// Locations (location.hpp): libcurl's URL parser (CURLU) for http(s):// and for redaction; s3://
// split into bucket and key by hand, since a key may hold '?', '#' or spaces that a URL parser
// would take for a query, a fragment or an error.
#include "remote/location.hpp"

#include <cctype>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <stdexcept>

#include <curl/curl.h>

#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed::loaders {
namespace remote {
namespace {

using url_handle = std::unique_ptr<CURLU, decltype(&curl_url_cleanup)>;

/// One part of a parsed URL, or empty.
std::string url_part(CURLU* u, CURLUPart part) {
  char* raw = nullptr;
  const CURLUcode rc = curl_url_get(u, part, &raw, 0);
  const std::unique_ptr<char, decltype(&curl_free)> text(raw, &curl_free);  // freed however this ends
  if (rc == CURLUE_OUT_OF_MEMORY) throw std::bad_alloc();  // memory, not a part the URL lacks
  return rc == CURLUE_OK && text ? std::string(text.get()) : std::string();
}

/// The text before "://", or "location" when there is none.
std::string scheme_of(std::string_view l) {
  const auto end = l.find("://");
  return end == std::string_view::npos ? std::string("location") : std::string(l.substr(0, end));
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// %XX sequences of printable ASCII decoded for reading (keys with spaces read as they were
/// written); control characters and bytes past ASCII are shown encoded, raw or not (a message must
/// not carry a raw escape to a terminal or a log), and so are '%', '?', '#', '/', '.' and the hex
/// digits (what is shown stays unambiguous: a path, not a query or a fragment, no new escape
/// formed with the characters before it, no "/./" or "/../" that a URL parser would remove).
std::string decode_for_display(std::string_view text) {
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  const auto value = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(static_cast<unsigned char>(c)) - 'a' + 10); };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) && hex(text[i + 2])) {
      const auto c = static_cast<unsigned char>(value(text[i + 1]) * 16 + value(text[i + 2]));
      if (c >= 0x20 && c < 0x7F && std::strchr("%?#/.", c) == nullptr && !std::isxdigit(c)) {
        out += static_cast<char>(c);
        i += 2;
        continue;
      }
    }
    const auto raw = static_cast<unsigned char>(text[i]);
    if (raw < 0x20 || raw >= 0x7F) {  // a raw one (libcurl keeps bytes past ASCII as given) is encoded
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[raw >> 4];
      out += kHex[raw & 15];
      continue;
    }
    out += text[i];
  }
  return out;
}

/// What may be printed of `text`, parsed into `u`: rebuilt from the parts (scheme, host, port,
/// path), so that no spelling of user information or query survives.
std::string shown_from(CURLU* u, std::string_view text) {
  const std::string port = url_part(u, CURLUPART_PORT), path = url_part(u, CURLUPART_PATH);
  std::string out = url_part(u, CURLUPART_SCHEME) + "://" + url_part(u, CURLUPART_HOST) + (port.empty() ? "" : ":" + port);
  if (path != "/" || (!text.empty() && text.back() == '/')) out += path;  // "s3://bucket" stays without a slash
  return decode_for_display(out);
}

}  // namespace

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string percent_decode(std::string_view text) {
  const auto hex = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10); };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

location parse_location(std::string_view text) {
  location l;
  l.text = std::string(text);
  if (starts_with(text, "s3://")) {
    l.shown = redact_location(text);
    l.scheme = scheme::s3;
    const std::string_view rest = text.substr(5);
    const auto slash = rest.find('/');
    l.bucket = std::string(rest.substr(0, slash));
    l.key = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
    if (l.bucket.empty()) throw pinfeed::invalid_argument("s3 location '" + l.shown + "' has no bucket");
    l.sidecar = l.text + ".idx";
    return l;
  }
  if (starts_with(text, "http://")) l.scheme = scheme::http;
  else if (starts_with(text, "https://")) l.scheme = scheme::https;
  else throw pinfeed::invalid_argument("'" + redact_location(text) + "' is not an http://, https:// or s3:// location");
  // Parsed strictly (as libcurl will request it); what does not parse is named as redact_location shows it.
  const url_handle u(curl_url(), &curl_url_cleanup);
  if (!u) throw std::bad_alloc();  // (libcurl's only reason for no handle)
  if (const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, l.text.c_str(), 0); rc != CURLUE_OK) {
    if (rc == CURLUE_OUT_OF_MEMORY) throw std::bad_alloc();  // memory, not the URL's fault
    throw pinfeed::invalid_argument("'" + redact_location(text) + "' is not a valid URL");
  }
  l.shown = shown_from(u.get(), text);
  // ".idx" goes after the path: before a query (a presigned URL's signature) or a fragment.
  const auto authority = l.text.find("://") + 3;
  const auto query = l.text.find_first_of("?#", authority);
  l.sidecar = query == std::string::npos ? l.text + ".idx" : l.text.substr(0, query) + ".idx" + l.text.substr(query);
  return l;
}

}  // namespace remote

std::string redact_location(std::string_view l) {
  // What does not parse is not printed at all.
  const remote::url_handle u(curl_url(), &curl_url_cleanup);
  if (!u) return remote::scheme_of(l) + "://(unprintable)";
  if (curl_url_set(u.get(), CURLUPART_URL, std::string(l).c_str(), CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE) != CURLUE_OK)
    return remote::scheme_of(l) + "://(unparsable location)";
  return remote::shown_from(u.get(), l);
}

}  // namespace pinfeed::loaders
