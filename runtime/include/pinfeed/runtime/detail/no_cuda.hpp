#pragma once
// The part of the CUDA runtime API that pinfeed uses, for a CPU-only build (PINFEED_WITH_CUDA=0):
// the same names and types, every call failing with cudaErrorNoDevice. Internal linkage only
// (static inline), so nothing here can clash with a real CUDA runtime at link time. Include
// "pinfeed/runtime/cuda_api.hpp", not this file.

#include <cstddef>

#if defined(__CUDA_RUNTIME_API_H__)
#error "a CPU-only pinfeed (PINFEED_WITH_CUDA=0) cannot share a translation unit with the real CUDA runtime headers"
#endif

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;

enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorCudartUnloading = 4,
};
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode : int {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
inline constexpr unsigned cudaStreamNonBlocking = 0x01;
inline constexpr unsigned cudaEventDisableTiming = 0x02;
inline constexpr unsigned cudaEventBlockingSync = 0x01;
inline constexpr unsigned cudaHostAllocPortable = 0x01;
inline constexpr unsigned cudaHostAllocMapped = 0x02;

struct cudaDeviceProp {
  char name[256];
  int major, minor;
  std::size_t totalGlobalMem;
  int asyncEngineCount, multiProcessorCount;
  int pciDomainID, pciBusID, pciDeviceID;
};

namespace pinfeed::detail {
inline constexpr const char* kNoCuda = "pinfeed was built without CUDA (PINFEED_WITH_CUDA=OFF)";
}

static inline cudaError_t cudaGetDeviceCount(int* count) {
  if (count) *count = 0;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaRuntimeGetVersion(int* v) {
  if (v) *v = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaDriverGetVersion(int* v) {
  if (v) *v = 0;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp*, int) { return cudaErrorNoDevice; }
static inline cudaError_t cudaGetDevice(int* d) {
  if (d) *d = 0;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaSetDevice(int) { return cudaErrorNoDevice; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
static inline const char* cudaGetErrorName(cudaError_t e) {
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
static inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorNoDevice: return pinfeed::detail::kNoCuda;
    default: return "CUDA is not available in this build";
  }
}
static inline cudaError_t cudaMalloc(void** p, std::size_t) {
  if (p) *p = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaFree(void*) { return cudaErrorNoDevice; }
static inline cudaError_t cudaHostAlloc(void** p, std::size_t, unsigned) {
  if (p) *p = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaFreeHost(void*) { return cudaErrorNoDevice; }
inline constexpr unsigned cudaHostRegisterPortable = 0x01;
static inline cudaError_t cudaHostRegister(void*, std::size_t, unsigned) { return cudaErrorNoDevice; }
static inline cudaError_t cudaHostUnregister(void*) { return cudaErrorNoDevice; }
static inline cudaError_t cudaMemcpy(void*, const void*, std::size_t, cudaMemcpyKind) { return cudaErrorNoDevice; }
static inline cudaError_t cudaMemcpyAsync(void*, const void*, std::size_t, cudaMemcpyKind, cudaStream_t = nullptr) {
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaMemset(void*, int, std::size_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (s) *s = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaErrorNoDevice; }
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) { return cudaErrorNoDevice; }
static inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  if (g) *g = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  if (e) *e = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaErrorNoDevice; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t, unsigned long long = 0) {
  if (e) *e = nullptr;
  return cudaErrorNoDevice;
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaErrorNoDevice; }
static inline cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaErrorNoDevice; }
