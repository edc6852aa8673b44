#pragma once
// libjpeg's errors as a jump: error_exit formats the message and longjmps to the caller's setjmp
// (it must not return), and a corrupt-data warning (level -1) is an error, as TurboJPEG's
// TJFLAG_STOPONWARNING makes it on the host decode path. The code between the setjmp and a jump
// must own nothing a jump would skip (see the users: jpeg_window.cpp, jpeg_coefficients.cpp).
#include <csetjmp>

#include <jpeglib.h>

namespace pinfeed::loaders::detail {

struct jpeg_error_jump {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
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
    if (level < 0) cc->err->error_exit(cc);
  };
}

}  // namespace pinfeed::loaders::detail
