// A stand-in for libnvjpeg with nvJPEG's C entry points, for the tests of loading it at run time
// (tests/loaders/nvjpeg_test.cpp): what each call returns is set through fake_nvjpeg_set(), and
// the calls are counted. Built twice: whole, and (PINFEED_FAKE_NVJPEG_PARTIAL) without
// nvjpegDecodeBatched, a library too old or too new to have every call pinfeed makes.
#include <cstddef>

namespace {
int g_status[8] = {};     // what each call returns (fake_nvjpeg_set)
int g_calls[8] = {};      // how often each was made
int g_handles = 0;        // handles made and not destroyed
char g_hardware, g_hybrid, g_state;
}  // namespace

extern "C" {

/// Which call: 0 create (hardware backend), 1 create (default backend), 2 state create,
/// 3 batched initialize, 4 batched decode on the hardware handle, 5 on the default handle.
void fake_nvjpeg_set(int call, int status) { g_status[call] = status; }
int fake_nvjpeg_calls(int call) { return g_calls[call]; }
int fake_nvjpeg_handles() { return g_handles; }
void fake_nvjpeg_reset() {
  for (int k = 0; k < 8; ++k) g_status[k] = g_calls[k] = 0;
  g_handles = 0;
}

int nvjpegCreateEx(int backend, void*, void*, unsigned, void** handle) {
  const int call = backend == 3 ? 0 : 1;
  ++g_calls[call];
  if (g_status[call] != 0) return g_status[call];
  *handle = backend == 3 ? static_cast<void*>(&g_hardware) : static_cast<void*>(&g_hybrid);
  ++g_handles;
  return 0;
}
int nvjpegDestroy(void*) {
  --g_handles;
  return 0;
}
int nvjpegJpegStateCreate(void*, void** state) {
  ++g_calls[2];
  if (g_status[2] != 0) return g_status[2];
  *state = &g_state;
  return 0;
}
int nvjpegJpegStateDestroy(void*) { return 0; }
int nvjpegDecodeBatchedInitialize(void*, void*, int, int, int format) {
  ++g_calls[3];
  return format == 5 ? g_status[3] : 2;  // RGBI only, else NVJPEG_STATUS_INVALID_PARAMETER
}
#ifndef PINFEED_FAKE_NVJPEG_PARTIAL
int nvjpegDecodeBatched(void* handle, void*, const unsigned char* const*, const std::size_t*, void*, void*) {
  const int call = handle == &g_hardware ? 4 : 5;
  ++g_calls[call];
  return g_status[call];
}
#endif
}
