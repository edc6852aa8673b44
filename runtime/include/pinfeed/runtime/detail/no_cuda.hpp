#pragma once
// The part of the CUDA runtime API that pinfeed uses, for a CPU-only build (PINFEED_WITH_CUDA=0).
// Include "pinfeed/runtime/cuda_api.hpp", not this file.
//
// The global namespace gets only the handle types pinfeed's API carries, declared exactly as
// CUDA's own headers declare them (an incomplete struct and a pointer typedef), so a translation
// unit may include <cuda_runtime_api.h> before or after pinfeed's headers. Everything else (the
// error enum, the flags, every call, each failing with cudaErrorNoDevice) lives in
// pinfeed::no_cuda: public inline code names it through PINFEED_CUDART(name), and pinfeed's own
// sources, built with PINFEED_INTERNAL_CUDA_NAMES, see it unqualified inside namespace pinfeed.

#include <cstddef>

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

namespace pinfeed::no_cuda {

enum cudaError_t : int {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100, cudaErrorCudartUnloading = 4
};
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode : int {
  cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2
};

struct cudaDeviceProp {
  char name[256];
  int major, minor;
  std::size_t totalGlobalMem;
  int asyncEngineCount, multiProcessorCount;
  int pciDomainID, pciBusID, pciDeviceID;
};

inline constexpr const char* kNoCuda = "pinfeed was built without CUDA (PINFEED_WITH_CUDA=OFF)";

inline cudaError_t cudaGetDeviceCount(int* count) {
  if (count) *count = 0;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaRuntimeGetVersion(int* v) {
  if (v) *v = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDriverGetVersion(int* v) {
  if (v) *v = 0;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int) { return cudaErrorNoDevice; }
inline cudaError_t cudaGetDevice(int* d) {
  if (d) *d = 0;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaSetDevice(int) { return cudaErrorNoDevice; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorCudartUnloading: return "cudaErrorCudartUnloading";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorNoDevice: return kNoCuda;
    default: return "CUDA is not available in this build";
  }
}
inline cudaError_t cudaMalloc(void** p, std::size_t) {
  if (p) *p = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaFree(void*) { return cudaErrorNoDevice; }
inline cudaError_t cudaHostAlloc(void** p, std::size_t, unsigned) {
  if (p) *p = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaFreeHost(void*) { return cudaErrorNoDevice; }
inline cudaError_t cudaHostRegister(void*, std::size_t, unsigned) { return cudaErrorNoDevice; }
inline cudaError_t cudaHostUnregister(void*) { return cudaErrorNoDevice; }
inline cudaError_t cudaMemcpy(void*, const void*, std::size_t, cudaMemcpyKind) { return cudaErrorNoDevice; }
inline cudaError_t cudaMemcpyAsync(void*, const void*, std::size_t, cudaMemcpyKind, cudaStream_t = nullptr) {
  return cudaErrorNoDevice;
}
inline cudaError_t cudaMemset(void*, int, std::size_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaMemsetAsync(void*, int, std::size_t, cudaStream_t = nullptr) { return cudaErrorNoDevice; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (s) *s = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaErrorNoDevice; }
inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) { return cudaErrorNoDevice; }
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  if (g) *g = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  if (e) *e = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaErrorNoDevice; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t, unsigned long long = 0) {
  if (e) *e = nullptr;
  return cudaErrorNoDevice;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaErrorNoDevice; }
inline cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaErrorNoDevice; }

}  // namespace pinfeed::no_cuda

namespace pinfeed::detail {
using no_cuda::kNoCuda;
}

#if defined(PINFEED_INTERNAL_CUDA_NAMES)
// pinfeed's own sources (never a consumer's: the define is set on pinfeed's directories only) call
// the runtime unqualified, as in a CUDA build. The flags are theirs alone: CUDA's headers define
// these names as macros, which a consumer's translation unit may hold.
namespace pinfeed::no_cuda {
inline constexpr unsigned cudaStreamNonBlocking = 0x01, cudaEventDisableTiming = 0x02, cudaEventBlockingSync = 0x01,
                          cudaHostAllocPortable = 0x01, cudaHostAllocMapped = 0x02, cudaHostRegisterPortable = 0x01;
}  // namespace pinfeed::no_cuda
namespace pinfeed {
using namespace no_cuda;
}
#endif
