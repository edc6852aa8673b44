#pragma once
/// @file jpeg_huffman.hpp
/// pinfeed's Huffman decoder for baseline JPEG scans, plugged into libjpeg in place of its own.
/// On ImageNet-like JPEGs two thirds of the decode time is entropy decoding, which must run for
/// every row down to the bottom of a crop window; the rest of the decode (dequantisation, IDCT,
/// upsampling, colour conversion) stays libjpeg-turbo's, so the pixels are exactly libjpeg's.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

namespace pinfeed::loaders::detail {

/// Built only where libjpeg-turbo's private jpegint.h is available and its version is on the list
/// it was verified against (PINFEED_HAVE_JPEG_HUFFMAN); elsewhere use_pinfeed_huffman() returns false.
///
/// Replaces the entropy decoder of a decompression that jpeg_start_decompress() has started, and
/// returns true; returns false and changes nothing where the scan is not one it decodes
/// (progressive, arithmetic-coded, 12-bit, more than one scan). Uses cinfo->client_data. Decoding
/// errors go through cinfo->err->error_exit with libjpeg's own messages; a corrupt-data warning
/// of libjpeg's (premature end of data, bad Huffman code, missing restart marker) is such an
/// error here. End the decompression with jpeg_abort_decompress(), not jpeg_finish_decompress().
bool use_pinfeed_huffman(j_decompress_ptr cinfo);

/// Scans this thread has given to pinfeed's decoder (tests check that it is really used).
std::size_t pinfeed_huffman_scans();

}  // namespace pinfeed::loaders::detail
