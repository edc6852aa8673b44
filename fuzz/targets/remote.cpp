// What a server sends and how locations are written: ListObjectsV2 pages (expat), HTTP status
// and header lines, http(s):// and s3:// locations with their redaction, percent-encoding.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/loaders/remote.hpp"
#include "remote/http.hpp"
#include "remote/location.hpp"
#include "remote/s3.hpp"
#include "targets.hpp"

namespace pinfeed::fuzz {
namespace {

/// Text as XML character data: markup characters and every control character as references.
std::string xml_text(std::string_view s) {
  std::string out;
  for (const unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default:
        if (c < 0x20) out += "&#" + std::to_string(c) + ";";
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string list_xml(const loaders::remote::list_page& p) {
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  x += std::string("<IsTruncated>") + (p.truncated ? "true" : "false") + "</IsTruncated>";
  for (const auto& k : p.keys) x += "<Contents><Key>" + xml_text(k) + "</Key><Size>1</Size></Contents>";
  if (!p.next_token.empty()) x += "<NextContinuationToken>" + xml_text(p.next_token) + "</NextContinuationToken>";
  return x + "</ListBucketResult>";
}

}  // namespace

outcome s3_list(bytes input) {
  constexpr std::string_view name = "s3_list";
  loaders::remote::list_page page;
  try {
    page = loaders::remote::parse_list_page(text_of(input), "fuzz listing");
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  if (page.truncated && page.next_token.empty()) broken(name, "a truncated page without a continuation token was accepted");
  // The page written back as XML reads as the same page.
  const std::string xml = list_xml(page);
  loaders::remote::list_page again;
  try {
    again = loaders::remote::parse_list_page(xml, "printed listing");
  } catch (const std::invalid_argument& e) {
    broken(name, "the page written back as XML is refused: " + std::string(e.what()) + "\n" + xml);
  }
  if (again.keys != page.keys || again.truncated != page.truncated || again.next_token != page.next_token)
    broken(name, "the page written back as XML reads as another page:\n" + xml);
  // Every key, decoded as the listing's encoding-type=url asks, encodes back to a key that decodes the same.
  for (const auto& k : page.keys) {
    const auto decoded = loaders::remote::percent_decode(k);
    if (loaders::remote::percent_decode(loaders::remote::percent_encode(decoded, true)) != decoded)
      broken(name, "key '" + k + "' does not survive percent-encoding");
  }
  return outcome::accepted;
}

outcome http_headers(bytes input) {
  constexpr std::string_view name = "http_headers";
  // The first byte picks what was asked (a range, a HEAD, a body sink), the rest are header lines.
  loaders::remote::response r;
  if (!input.empty()) {
    r.range = (input[0] & 1) != 0;
    r.head = (input[0] & 2) != 0;
    input = input.subspan(1);
  }
  const auto text = text_of(input);
  std::string expect_etag;  // an independent reading: the last ETag since the last status line
  long expect_status = 0;
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    auto line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    loaders::remote::parse_header_line(r, line);
    if (line.substr(0, 5) == "HTTP/") {
      expect_etag.clear();
      const auto sp = line.find(' ');
      expect_status = sp == std::string_view::npos ? 0 : std::strtol(std::string(line.substr(sp + 1)).c_str(), nullptr, 10);
      if (r.have_total) broken(name, "a status line did not forget the last response's size");
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
      std::string field(line.substr(0, colon));
      std::transform(field.begin(), field.end(), field.begin(), [](unsigned char c) { return std::tolower(c); });
      if (field == "etag") {
        auto v = line.substr(colon + 1);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
        expect_etag = std::string(v);
      }
    }
    if (r.etag != expect_etag) broken(name, "ETag '" + r.etag + "', the headers say '" + expect_etag + "'");
    if (r.status_seen != expect_status) broken(name, "status " + std::to_string(r.status_seen) + ", the lines say " + std::to_string(expect_status));
    // What a server says of a body's size never reserves more than a bounded buffer up front.
    if (r.body.capacity() > loaders::remote::kMaxBodyReserve)
      broken(name, "a Content-Length reserved " + std::to_string(r.body.capacity()) + " bytes before any arrived");
  }
  return text.empty() ? outcome::rejected : outcome::accepted;
}

outcome location(bytes input) {
  constexpr std::string_view name = "location";
  const std::string text(text_of(input));
  // Redaction never throws (it is what error messages print) and never prints a query.
  if (const std::string shown = loaders::redact_location(text); text.find('?') == std::string::npos && shown.find('?') != std::string::npos)
    broken(name, "redacting '" + text + "' shows '" + shown + "'");
  // Percent-encoding any bytes decodes back to them, and leaves only unreserved characters.
  for (const bool keep_slash : {false, true}) {
    const auto enc = loaders::remote::percent_encode(text, keep_slash);
    if (loaders::remote::percent_decode(enc) != text) broken(name, "percent-encoding does not decode back");
    for (const unsigned char c : enc)
      if (!(std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '%' || (keep_slash && c == '/')))
        broken(name, "percent-encoding left '" + std::string(1, static_cast<char>(c)) + "'");
  }
  // Credentials and a signature put around the input never show in what may be printed.
  const std::string secret = "SECRETxPW", sig = "SIGNATURExQ";
  if (text.find(secret) == std::string::npos && text.find(sig) == std::string::npos && text.find("://") == std::string::npos) {
    for (const char* scheme : {"https://", "http://"}) {
      const std::string wrapped = std::string(scheme) + "user:" + secret + "@" + text + "?X-Amz-Signature=" + sig;
      const std::string w_shown = loaders::redact_location(wrapped);
      if (w_shown.find(secret) != std::string::npos || w_shown.find(sig) != std::string::npos)
        broken(name, "redacting '" + wrapped + "' shows '" + w_shown + "'");
      try {
        const auto l = loaders::remote::parse_location(wrapped);
        if (l.shown.find(secret) != std::string::npos || l.shown.find(sig) != std::string::npos)
          broken(name, "the location '" + wrapped + "' is shown as '" + l.shown + "'");
      } catch (const std::invalid_argument& e) {
        if (std::string_view(e.what()).find(secret) != std::string_view::npos || std::string_view(e.what()).find(sig) != std::string_view::npos)
          broken(name, "refusing '" + wrapped + "' printed the secret: " + e.what());
      }
    }
  }
  loaders::remote::location l;
  try {
    l = loaders::remote::parse_location(text);
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  if (l.scheme == loaders::remote::scheme::s3) {
    if (l.bucket.empty() || "s3://" + l.bucket + (l.key.empty() && text.size() == 5 + l.bucket.size() ? "" : "/" + l.key) != text)
      broken(name, "s3 location '" + text + "' split into bucket '" + l.bucket + "' and key '" + l.key + "'");
  } else {
    // The path of what may be printed (percent-decoded, for reading) is the path of it redacted
    // again. (Not the host: libcurl normalizes a host anew on each parse, "%32" to "2" to
    // "0.0.0.2".)
    const auto path_of = [](const std::string& u) {
      const auto slash = u.find('/', u.find("://") + 3);
      return slash == std::string::npos ? std::string() : u.substr(slash);
    };
    for (const unsigned char c : l.shown)
      if (c < 0x20 || c >= 0x7F) broken(name, "'" + text + "' is shown with a raw byte " + std::to_string(c));
    const std::string again = loaders::redact_location(l.shown);
    if (again.find("(unparsable") == std::string::npos && path_of(again) != path_of(l.shown))
      broken(name, "'" + l.shown + "', shown for '" + text + "', redacts to '" + again + "'");
  }
  return outcome::accepted;
}

}  // namespace pinfeed::fuzz
