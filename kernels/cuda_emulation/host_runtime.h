// The subset of the CUDA runtime API that Convoy's launchers and tests use, for the CUDA emulation. Device memory is
// host memory, every call is synchronous (a launch has finished when it returns), streams and events only order and
// time work. It has CUDA's names in the global namespace (C++ linkage, so a binary never mixes it up with libcudart,
// but never link an emulated kernel library and an nvcc-built one into the same binary).
//
// Stream capture (CUDA graphs) is emulated too: while a stream captures, what is queued on it (kernel launches,
// async copies and memsets, event records, graph launches) is recorded instead of run, and cudaGraphLaunch replays
// it. Like CUDA in the global and thread-local capture modes, calls that are unsafe during a capture fail on the
// capturing thread with cudaErrorStreamCaptureUnsupported and invalidate the capture (allocation and free, synchronous
// copies and memsets, any synchronization, queries of the capturing stream), and work queued on the legacy default
// stream fails with cudaErrorStreamCaptureImplicit: the bugs that make a captured plan wrong on a GPU show up here.
//
// Errors: a failing call returns its cudaError_t and records it as the thread's last error (cudaGetLastError reads and
// clears it). The emulation also keeps a detailed message for the last failure (which thread, which barrier, which
// limit): convoy::cuda_emulation::LastErrorDetail(), which kernels/cuda_emulation/cuda_status.h puts into the
// absl::Status it builds.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_HOST_RUNTIME_H_
#define CONVOY_KERNELS_CUDA_EMULATION_HOST_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda_emulation/vector_types.h"

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorAssert = 710,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

struct CUstream_st;
typedef CUstream_st* cudaStream_t;
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
struct CUgraph_st;
typedef CUgraph_st* cudaGraph_t;
struct CUgraphExec_st;
typedef CUgraphExec_st* cudaGraphExec_t;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMaxRegistersPerBlock = 12,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrMaxBlocksPerMultiprocessor = 106,
  cudaDevAttrReservedSharedMemoryPerBlock = 111,
};

const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** pointer, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** pointer, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaMemcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* destination, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream = nullptr);

// __constant__ and __device__ variables are ordinary globals in the emulation.
template <typename T>
cudaError_t cudaMemcpyToSymbol(T& symbol, const void* source, size_t bytes, size_t offset = 0,
                               cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return cudaMemcpy(reinterpret_cast<char*>(&symbol) + offset, source, bytes, kind);
}
template <typename T>
cudaError_t cudaMemcpyFromSymbol(void* destination, const T& symbol, size_t bytes, size_t offset = 0,
                                 cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  return cudaMemcpy(destination, reinterpret_cast<const char*>(&symbol) + offset, bytes, kind);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// The dynamic shared memory a kernel may request above the default 48 KiB, up to 227 KiB (as on sm_90).
cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value);
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

namespace convoy::cuda_emulation {

// The detailed message of the last failing runtime call or launch on this thread ("" if none failed yet).
std::string LastErrorDetail();

// The compute capability the emulated device reports (cudaDevAttrComputeCapabilityMajor/Minor): 9.0 (an H100/H200)
// unless a test sets another, e.g. to check that sm_90a-only algorithms decline on an emulated 8.0 part.
void SetEmulatedComputeCapability(int major, int minor);
class ScopedComputeCapability {
 public:
  ScopedComputeCapability(int major, int minor);
  ~ScopedComputeCapability();
  ScopedComputeCapability(const ScopedComputeCapability&) = delete;
  ScopedComputeCapability& operator=(const ScopedComputeCapability&) = delete;

 private:
  int previous_major_, previous_minor_;
};
// Records a failure: sets the thread's last error and detail; returns `error`.
cudaError_t RecordError(cudaError_t error, std::string detail);
// The same for a failed launch, which the launch itself returns (the emulation reports a kernel's own failure at
// launch; a GPU would report it at the next synchronization, sticky).
cudaError_t RecordLaunchError(cudaError_t error, std::string detail);
// The last error of a failed runtime call (not a launch) that nobody read yet, cleared: what cudaGetLastError()
// after kernel<<<...>>> returns on a GPU. cudaSuccess when there is none.
cudaError_t TakeUnreadCallError();
// Queues `work` on `stream`: runs it now (the emulation is synchronous) and returns its result, or, while `stream`
// captures a graph, records it for cudaGraphLaunch and returns cudaSuccess. `what` names the work in errors.
cudaError_t SubmitToStream(cudaStream_t stream, const char* what, std::function<cudaError_t()> work);
// The dynamic shared memory limit set for `kernel` with cudaFuncSetAttribute (48 KiB by default).
size_t MaxDynamicSharedBytes(const void* kernel);

// ---- What a synchronous CPU runtime would otherwise hide (host-side bugs that only a GPU shows) ----------------
//
// Sticky kernel faults. On a GPU a faulting kernel (illegal address, __trap, device assert) poisons the context:
// every later runtime call of the process returns that error. With this on (SetStickyKernelFaults(true), or
// CONVOY_EMULATION_STICKY_FAULTS=1 in the environment), a kernel that fails with cudaErrorLaunchFailure,
// cudaErrorIllegalAddress or cudaErrorAssert does the same here. Off by default: the bug-catcher tests run many
// deliberately failing kernels in one process.
void SetStickyKernelFaults(bool on);
// The error every runtime call returns since a sticky fault (cudaSuccess while none happened).
cudaError_t StickyFault();
// Called when a launch failed with `error`: makes it sticky when the option is on and the error is a kernel fault.
void NoteKernelFailure(cudaError_t error, const std::string& detail);
// cudaSuccess, or the sticky fault recorded as this thread's last error (the check at the top of runtime calls).
cudaError_t CheckStickyFault();

// Devices: one by default (CONVOY_EMULATION_DEVICES=N or SetDeviceCount(N) for more). Each thread has a current
// device (cudaSetDevice / cudaGetDevice); a stream belongs to the device that was current when it was created, and,
// as on a GPU, a kernel launched into a stream of another device than the current one fails with
// cudaErrorInvalidResourceHandle. Memory is shared host memory whatever the device.
void SetDeviceCount(int count);
int DeviceCount();
// The device a created stream belongs to (the current device for the legacy and per-thread streams).
int StreamDevice(cudaStream_t stream);

// Device memory capacity: cudaMalloc fails with cudaErrorMemoryAllocation (recorded as the thread's last error, as
// CUDA does) when the bytes outstanding would exceed it. 0 (the default) = no limit beyond the host's.
void SetDeviceMemoryCapacity(size_t bytes);

// cudaMemcpyAsync between the device and pageable host memory is synchronous with the host on a GPU (nothing
// overlaps it): the number of such copies so far. Host memory from cudaMallocHost is pinned.
int64_t PageableAsyncCopyCount();
// Kernels launched for the first time in this process into a stream that was capturing: with lazy module loading
// (the default since CUDA 12.2) that first launch loads the kernel's module inside the capture. ForgetLoadedKernels()
// makes every kernel count as never launched (for tests).
int64_t FirstLaunchesInCaptureCount();
void ForgetLoadedKernels();
// Records that `kernel` is launched into `stream` (counts a first launch inside a capture).
void NoteKernelLaunch(const void* kernel, cudaStream_t stream);

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_HOST_RUNTIME_H_
