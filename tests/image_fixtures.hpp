#pragma once
// Test images shared by the suites: one picture generator, JPEG files written from it.

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pinfeed/loaders/decode.hpp"
#include "pinfeed/loaders/image_files.hpp"

namespace pinfeed::test {

/// A smooth colourful RGB picture (JPEG-friendly), h x w x 3, different for each seed.
inline std::vector<std::uint8_t> picture_rgb(int h, int w, int seed) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(h) * static_cast<std::size_t>(w) * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = px.data() + (static_cast<std::size_t>(y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(x)) * 3;
      p[0] = static_cast<std::uint8_t>((x + y + seed * 40) % 256);
      p[1] = static_cast<std::uint8_t>((y * 255) / h);
      p[2] = static_cast<std::uint8_t>((x * 255) / w);
    }
  return px;
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream out(p, std::ios::binary);
  REQUIRE(out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size())));
}

/// The name of file i of `count`: letters a-z, as many as `count` needs (a..z for up to 26, then
/// aa, ab, ...), so that the names sort in the order of i.
inline std::string letters_name(int i, int count) {
  int width = 1;
  for (long long n = 26; n < count; n *= 26) ++width;
  std::string name(static_cast<std::size_t>(width), 'a');
  for (int k = width - 1; k >= 0; --k, i /= 26) name[static_cast<std::size_t>(k)] = static_cast<char>('a' + i % 26);
  return name;
}

/// `count` JPEGs a.jpg, b.jpg, ... (letters_name) in <root>/c, image i of size (height + i * grow) x
/// width; their listing as an image folder.
inline std::vector<loaders::image_file> jpeg_class_folder(const std::filesystem::path& root, int count, int height,
                                                          int grow, int width) {
  std::filesystem::create_directories(root / "c");
  for (int i = 0; i < count; ++i) {
    const int h = height + grow * i;
    write_bytes(root / "c" / (letters_name(i, count) + ".jpg"), loaders::encode_jpeg(picture_rgb(h, width, i), width, h));
  }
  return loaders::list_image_folder(root.string()).files;
}

}  // namespace pinfeed::test
