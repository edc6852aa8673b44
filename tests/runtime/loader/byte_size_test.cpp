// Byte sizes: parse_bytes() and format_bytes() (runtime/src/loader/byte_size.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>

#include "pinfeed/runtime/loader.hpp"

using namespace pinfeed;

TEST_CASE("loader.sizes_are_parsed_and_printed") {
  CHECK(parse_bytes("4096") == 4096);
  CHECK(parse_bytes("8GiB") == (std::uint64_t{8} << 30));
  CHECK(parse_bytes("512 MiB") == (std::uint64_t{512} << 20));
  CHECK(parse_bytes("1.5GB") == 1500000000u);
  CHECK(parse_bytes("2k") == 2048);
  CHECK(parse_bytes("1KB") == 1000);
  for (const char* bad : {"", "GiB", "-1GiB", "8 gigs", "1.2.3MB", "1e3", "99999999999TiB"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS((void)parse_bytes(bad), doctest::Contains("is not a size"), std::invalid_argument);
  }
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(3u << 20) == "3.0 MiB");
  CHECK(format_bytes(std::uint64_t{3} << 30) == "3.00 GiB");
}

TEST_CASE("loader.sizes.units_are_case_blind_and_the_largest_size_is_refused_naming_it") {
  CHECK(parse_bytes("3gib") == (std::uint64_t{3} << 30));
  CHECK(parse_bytes("2 TB") == 2'000'000'000'000u);
  CHECK(parse_bytes("0") == 0);
  CHECK_THROWS_WITH_AS((void)parse_bytes("17EiB"), doctest::Contains("'17EiB' is not a size"), std::invalid_argument);
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1024) == "1.0 KiB");
}
