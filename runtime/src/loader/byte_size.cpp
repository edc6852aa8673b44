// Byte sizes as people write them ("512MiB", "2 GB") and as pinfeed prints them.
#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/loader.hpp"

namespace pinfeed {

std::string format_bytes(std::uint64_t bytes) {
  char text[64];
  if (bytes >= (std::uint64_t{1} << 30)) std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (std::uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

std::uint64_t parse_bytes(std::string_view text) {
  const auto bad = [&] {
    return pinfeed::invalid_argument("'" + std::string(text) +
                                 "' is not a size: give bytes, or a number with B, KB, MB, GB, TB or KiB, MiB, GiB, TiB");
  };
  std::size_t at = 0;
  while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '.')) ++at;
  if (at == 0) throw bad();
  double number = 0;
  try {
    std::size_t used = 0;
    number = std::stod(std::string(text.substr(0, at)), &used);
    if (used != at) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  std::string unit(text.substr(at));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},       {"b", 1},         {"kb", 1e3},         {"mb", 1e6},         {"gb", 1e9},         {"tb", 1e12},
      {"kib", 1024}, {"mib", 1048576}, {"gib", 1073741824}, {"tib", 1099511627776}, {"k", 1024}, {"m", 1048576},
      {"g", 1073741824}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name) {
      const double bytes = number * scale;
      if (!(bytes < 1.8e19)) throw bad();
      return static_cast<std::uint64_t>(bytes);
    }
  throw bad();
}

}  // namespace pinfeed
