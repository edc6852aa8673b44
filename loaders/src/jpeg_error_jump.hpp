#pragma once
// libjpeg's errors as a jump: error_exit formats the message and longjmps to the caller's setjmp
// (it must not return). A corrupt-data warning (level -1) is an error too, unless the caller
// counts warnings instead (the host decode's default, decode_options::strict off): then libjpeg
// goes on past it as it does by itself, except at the end of the data ("Premature end of JPEG
// file"), which is an error either way. The code between the setjmp and a jump must own nothing a
// jump would skip (see the users: jpeg_window.cpp, jpeg_coefficients.cpp, jpeg_scan.cpp).
#include <csetjmp>

#include <jpeglib.h>
#include <jerror.h>

namespace pinfeed::loaders::detail {

struct jpeg_error_jump {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool count_warnings = false;  ///< set before the first libjpeg call: warnings are counted, not errors
  int warnings = 0;
  char first_warning[JMSG_LENGTH_MAX];
  bool in_pinfeed_scan = false;  ///< pinfeed's Huffman decoder runs the scan (jpeg_window.cpp)
};

/// Makes `err` the error manager of `c` (a compress or decompress object, before its create call).
inline void install_error_jump(jpeg_common_struct& c, jpeg_error_jump& err) {
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = [](j_common_ptr cc) {
    auto* e = reinterpret_cast<jpeg_error_jump*>(cc->err);
    (*cc->err->format_message)(cc, e->message);
    std::longjmp(e->jump, 1);
  };
  err.mgr.emit_message = [](j_common_ptr cc, int level) {
    if (level >= 0) return;
    auto* e = reinterpret_cast<jpeg_error_jump*>(cc->err);
    if (!e->count_warnings || cc->err->msg_code == JWRN_JPEG_EOF) cc->err->error_exit(cc);
    if (e->warnings++ == 0) (*cc->err->format_message)(cc, e->first_warning);
  };
}

}  // namespace pinfeed::loaders::detail
