// The emulated CUDA runtime subset (see host_runtime.h): host memory as device memory, synchronous streams.
#include "kernels/cuda_emulation/host_runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_emulation/block_scheduler.h"

struct CUstream_st {
  unsigned int flags = 0;
};

struct CUevent_st {
  std::chrono::steady_clock::time_point recorded_at;
  bool recorded = false;
  bool timing = true;
};

namespace convoy::cuda_emulation {
namespace {

constexpr size_t kDeviceAllocationAlignment = 256;  // cudaMalloc's guarantee

struct LastError {
  cudaError_t error = cudaSuccess;
  std::string detail;
};
thread_local LastError tls_last_error;

struct KernelAttributes {
  absl::Mutex mu;
  absl::flat_hash_map<const void*, size_t> max_dynamic_shared ABSL_GUARDED_BY(mu);
};

KernelAttributes& Attributes() {
  static KernelAttributes* attributes = new KernelAttributes();
  return *attributes;
}

}  // namespace

std::string LastErrorDetail() { return tls_last_error.detail; }

cudaError_t RecordError(cudaError_t error, std::string detail) {
  tls_last_error.error = error;
  tls_last_error.detail = std::move(detail);
  return error;
}

size_t MaxDynamicSharedBytes(const void* kernel) {
  KernelAttributes& attributes = Attributes();
  absl::MutexLock lock(&attributes.mu);
  auto it = attributes.max_dynamic_shared.find(kernel);
  return it == attributes.max_dynamic_shared.end() ? kDefaultMaxDynamicSharedBytes : it->second;
}

}  // namespace convoy::cuda_emulation

using convoy::cuda_emulation::RecordError;

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorAssert:
      return "cudaErrorAssert";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorUnknown:
      return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorAssert:
      return "device-side assert triggered";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorUnknown:
      return "unknown error";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() { return std::exchange(convoy::cuda_emulation::tls_last_error.error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return convoy::cuda_emulation::tls_last_error.error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0)
    return RecordError(cudaErrorInvalidDevice, absl::StrCat("device ", device, ": the emulation has one device, 0"));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0)
    return RecordError(cudaErrorInvalidDevice, absl::StrCat("device ", device, ": the emulation has one device, 0"));
  using namespace convoy::cuda_emulation;  // NOLINT: the limits
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = kMaxThreadsPerBlock;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(kDefaultMaxDynamicSharedBytes);
      break;
    case cudaDevAttrWarpSize:
      *value = kWarpSize;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrL2CacheSize:
      *value = 50 * 1024 * 1024;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = 228 * 1024;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(kMaxSharedBytesPerBlock);
      break;
    default:
      return RecordError(cudaErrorInvalidValue,
                         absl::StrCat("device attribute ", static_cast<int>(attribute), " is not emulated"));
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  // posix_memalign keeps the exact size, so ASAN reports an access one element past the end.
  if (posix_memalign(pointer, convoy::cuda_emulation::kDeviceAllocationAlignment, bytes) != 0) {
    *pointer = nullptr;
    return RecordError(cudaErrorMemoryAllocation, absl::StrCat("cudaMalloc of ", bytes, " bytes failed"));
  }
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) { return cudaMalloc(pointer, bytes); }
cudaError_t cudaFreeHost(void* pointer) { return cudaFree(pointer); }

cudaError_t cudaMemcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return RecordError(cudaErrorInvalidValue,
                       absl::StrCat("cudaMemcpy: kind ", static_cast<int>(kind), " is not a cudaMemcpyKind"));
  }
  if (bytes != 0) std::memmove(destination, source, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(destination, source, bytes, kind);
}

cudaError_t cudaMemset(void* destination, int value, size_t bytes) {
  if (bytes != 0) std::memset(destination, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(destination, value, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return RecordError(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream cannot be destroyed");
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st();
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->recorded_at = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded || !start->timing || !end->timing) {
    return RecordError(cudaErrorInvalidResourceHandle,
                       "cudaEventElapsedTime: both events must be recorded and created with timing enabled");
  }
  *milliseconds = std::chrono::duration<float, std::milli>(end->recorded_at - start->recorded_at).count();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value) {
  using convoy::cuda_emulation::kMaxSharedBytesPerBlock;
  if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    return RecordError(cudaErrorInvalidValue, absl::StrCat("cudaFuncSetAttribute: attribute ",
                                                           static_cast<int>(attribute), " is not emulated"));
  }
  if (value < 0 || static_cast<size_t>(value) > kMaxSharedBytesPerBlock) {
    return RecordError(cudaErrorInvalidValue,
                       absl::StrCat("cudaFuncSetAttribute: max dynamic shared memory ", value,
                                    " bytes is outside the device limit [0, ", kMaxSharedBytesPerBlock, "]"));
  }
  auto& attributes = convoy::cuda_emulation::Attributes();
  absl::MutexLock lock(&attributes.mu);
  attributes.max_dynamic_shared[function] = static_cast<size_t>(value);
  return cudaSuccess;
}
