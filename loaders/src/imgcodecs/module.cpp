// libpinfeed_imgcodecs.so: OpenCV imgcodecs behind plugin_abi.hpp, opened by the loaders on the
// first image that is not a plain JPEG.
#include <algorithm>
#include <cstring>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "pinfeed/version.hpp"
#include "plugin_abi.hpp"

namespace {

void copy_message(const char* text, char* message, std::size_t message_size) {
  if (message_size == 0) return;
  const std::size_t n = std::min(std::strlen(text), message_size - 1);
  std::memcpy(message, text, n);
  message[n] = '\0';
}

int decode(const unsigned char* bytes, std::size_t size, pinfeed_imgcodecs_output output, void* context,
           char* message, std::size_t message_size) {
  cv::Mat decoded;
  // imdecode catches what its decoder throws, memory included, and returns nothing: an image it
  // cannot decode is tried once more before it counts as bad (a transient failure to allocate then
  // decodes).
  for (int attempt = 0; attempt < 2 && decoded.empty(); ++attempt) {
    try {
      const cv::Mat raw(1, static_cast<int>(size), CV_8UC1, const_cast<unsigned char*>(bytes));
      // The pixels as stored: EXIF orientation is pinfeed's to apply, for every format alike.
      decoded = cv::imdecode(raw, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
    } catch (const cv::Exception& e) {
      copy_message(e.what(), message, message_size);
      return pinfeed_imgcodecs_corrupt;
    }
  }
  if (decoded.empty()) return pinfeed_imgcodecs_empty;
  // The caller's buffer has the size and type cvtColor writes, so it allocates nothing there.
  cv::Mat rgb(decoded.rows, decoded.cols, CV_8UC3, output(context, decoded.rows, decoded.cols));
  cv::cvtColor(decoded, rgb, cv::COLOR_BGR2RGB);
  return pinfeed_imgcodecs_ok;
}

const pinfeed_imgcodecs_v1 entry{PINFEED_IMGCODECS_ABI, PINFEED_VERSION_STRING, CV_VERSION, &decode};

}  // namespace

extern "C" __attribute__((visibility("default"))) const pinfeed_imgcodecs_v1* pinfeed_imgcodecs_entry_v1() {
  return &entry;
}
