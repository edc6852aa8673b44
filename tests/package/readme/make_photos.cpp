// Writes an ImageFolder of generated JPEG photos for the README's trainer to train on:
// make_photos ROOT COUNT -> ROOT/<class>/<n>.jpg over three classes, sizes varying, and one file
// that is not a picture (the trainer's skip policy must pass over it).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <pinfeed/loaders/decode.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_photos ROOT COUNT\n");
    return 2;
  }
  const std::filesystem::path root = argv[1];
  const int count = std::stoi(argv[2]);
  const char* classes[] = {"ants", "bees", "wasps"};
  for (int i = 0; i < count; ++i) {
    const int h = 180 + 7 * (i % 9), w = 240 + 5 * (i % 7);
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(h) * w * 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)  // smooth gradients and a ring: photo-like, compressible
          rgb[(static_cast<std::size_t>(y) * w + x) * 3 + c] = static_cast<std::uint8_t>(
              127 + 120 * std::sin(0.02 * (x + 3 * i) * (c + 1) + 0.03 * y) * std::cos(0.001 * ((x - w / 2) * (x - w / 2) + (y - h / 2) * (y - h / 2))));
    const auto dir = root / classes[i % 3];
    std::filesystem::create_directories(dir);
    const auto jpeg = pinfeed::loaders::encode_jpeg(rgb, w, h);
    std::ofstream(dir / (std::to_string(i) + ".jpg"), std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
  }
  std::ofstream(root / "bees" / "broken.jpg") << "not a picture";
  return 0;
}
