// Every format variant against an independent decoder: Pillow (from PyPI, in the test environment)
// writes a corpus of every mode, bit depth and compression it can of PNG, TIFF, BMP, WebP, PNM and
// JPEG, plus headers, masks and surgery made byte by byte (tests/loaders/formats/pillow_corpus.py),
// and decodes each file. pinfeed decodes each to Pillow's pixels (by the rule the manifest states)
// or refuses it naming the file and the reason; never to other pixels, and never a file Pillow
// refuses. The table of outcomes is docs/formats.md's.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pinfeed/loaders/decode.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pinfeed;
using namespace pinfeed::loaders;

namespace {

std::vector<std::byte> slurp(const fs::path& p) {
  std::vector<std::byte> out;
  read_file(p.string(), out);  // throws naming the path
  return out;
}

/// The corpus in `dir`, written by Pillow; false (and why) where Pillow is not installed.
bool make_corpus(const fs::path& dir, std::string& why) {
  const std::string python = std::string(PINFEED_TEST_VENV) + "/bin/python";
  if (!fs::exists(python)) {
    why = python + " is missing (scripts/install-test-env.sh installs Pillow there)";
    return false;
  }
  if (std::system((python + " -c 'import PIL' 2>/dev/null").c_str()) != 0) {
    why = "Pillow is not installed in " + std::string(PINFEED_TEST_VENV) + " (scripts/install-test-env.sh)";
    return false;
  }
  const std::string cmd = python + " " + PINFEED_TEST_DIR + "/loaders/formats/pillow_corpus.py " + dir.string() + " >" +
                          (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream log(dir / "log.txt");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    FAIL("pillow_corpus.py failed (" << rc << "): " << cmd << "\n" << text);
  }
  return true;
}

}  // namespace

TEST_CASE("formats.every_variant_decodes_to_pillows_pixels_or_is_refused_by_name") {
  test::temp_dir d;
  std::string why;
  if (!make_corpus(d.path, why)) {
    // In CI the comparison must run: a missing install step fails it there.
    const char* ci = std::getenv("CI");
    REQUIRE_MESSAGE(!(ci != nullptr && std::string(ci) == "true"), why);
    test::skip_case(why);
    return;
  }
  const auto manifest = nlohmann::json::parse(std::ifstream(d.path / "manifest.json"));
  std::ostringstream table;
  table << "| format | variant | Pillow | pinfeed |\n|---|---|---|---|\n";
  int identical = 0, converted = 0, refused = 0, both_refused = 0, beyond = 0, turned = 0;
  for (const auto& e : manifest["entries"]) {
    const std::string file = e["file"], format = e["format"], variant = e["variant"];
    CAPTURE(file);
    const auto bytes = slurp(d.path / file);
    std::vector<std::byte> out;
    std::string error;
    image_spec spec{};
    try {
      spec = decode_image(bytes, out, {}, "/data/" + file);
    } catch (const std::exception& x) {
      error = x.what();
    }
    const bool pillow_decoded = e["pillow"] == "decoded";
    std::string pillow = pillow_decoded ? std::string(e["mode"]) : "refused (" + std::string(e["reason"]) + ")";
    std::string ours;
    if (!error.empty()) {
      // Refused: named, with a reason past the name.
      CHECK(error.rfind("/data/" + file + ": ", 0) == 0);
      CHECK(error.size() > file.size() + 10);
      ours = "refused: " + error.substr(error.find(": ") + 2);
      (pillow_decoded ? refused : both_refused) += 1;
    } else if (!pillow_decoded && e.contains("source")) {
      // Made byte by byte from known pixels, and refused by Pillow for a layout it does not read:
      // decoded, to the pixels it was made of.
      const auto source = slurp(d.path / std::string(e["source"]));
      CHECK_MESSAGE(out == source, "decoded to other pixels than the file was made of");
      ours = out == source ? "decoded to the pixels it was made of" : "**other pixels**";
      ++beyond;
    } else if (!pillow_decoded) {
      FAIL_CHECK("decoded a file Pillow refuses (" << std::string(e["reason"]) << ")");
      ours = "**decoded where Pillow refuses**";
    } else {
      const auto ref = slurp(d.path / std::string(e["reference"]));
      const bool same = spec.width == e["width"] && spec.height == e["height"] && out == ref;
      const std::string rule = e["rule"];
      CHECK_MESSAGE(same, "decoded to other pixels than Pillow's (" << rule << "): " << spec.width << "x" << spec.height
                                                                      << " vs " << e["width"] << "x" << e["height"]);
      if (!same) {
        int worst = 0;
        for (std::size_t i = 0; i < std::min(out.size(), ref.size()); ++i)
          worst = std::max(worst, std::abs(static_cast<int>(out[i]) - static_cast<int>(ref[i])));
        ours = "**other pixels** (at most " + std::to_string(worst) + " apart)";
      } else if (rule == "rgb") {
        ours = "identical";
        ++identical;
        if (e.contains("turned")) {
          // Asked to, turned as Pillow's exif_transpose turns it.
          decode_options apply;
          apply.apply_exif_orientation = true;
          std::vector<std::byte> turned_out;
          const image_spec t = decode_image(bytes, turned_out, apply, "/data/" + file);
          const bool turned_same = t.width == e["turned_width"] && t.height == e["turned_height"] &&
                                   turned_out == slurp(d.path / std::string(e["turned"]));
          CHECK_MESSAGE(turned_same, "turned by EXIF orientation " << e["orientation"] << " to other pixels than Pillow's");
          ours += turned_same ? "; with apply_exif_orientation, identical to exif_transpose's" : "; **turned to other pixels**";
          ++turned;
        }
      } else {
        ours = "identical by the stated conversion (" + rule + ")";
        ++converted;
      }
    }
    table << "| " << format << " | " << variant << " | " << pillow << " | " << ours << " |\n";
  }
  MESSAGE("Pillow " << std::string(manifest["pillow"]) << ": " << identical << " identical, " << converted
                    << " identical by a stated conversion, " << refused << " refused where Pillow decodes, "
                    << both_refused << " refused by both, " << beyond << " decoded where Pillow refuses the layout\n"
                    << table.str());
  CHECK(identical > 40);
  CHECK(turned >= 11);  // every orientation of a JPEG, two of PNG, WebP and TIFF (already turned as laid out)
}
