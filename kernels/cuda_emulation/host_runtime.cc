// The emulated CUDA runtime subset (see host_runtime.h): host memory as device memory, synchronous streams, stream
// capture into replayable graphs.
#include "kernels/cuda_emulation/host_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_emulation/block_scheduler.h"

// Recorded work, in stream order.
struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> nodes;
};

struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> nodes;
};

// A stream is driven by one thread at a time (as the runtime's users do), so its capture state is not locked.
struct CUstream_st {
  unsigned int flags = 0;
  int device = 0;  // current when the stream was created
  std::unique_ptr<CUgraph_st> capture;  // non-null while capturing
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  std::string invalidated_by;  // non-empty once an unsafe call invalidated the capture
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
  bool from_launch = false;  // a launch already returned it (see TakeUnreadCallError)
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

// The captures this thread opened in the global or thread-local mode: unsafe calls on this thread invalidate them.
thread_local std::vector<CUstream_st*> tls_strict_captures;

bool EnvironmentFlag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

int EnvironmentInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : fallback;
}

// Process-wide state of the checks in host_runtime.h ("what a synchronous CPU runtime would otherwise hide").
struct ProcessState {
  std::atomic<bool> sticky_faults{EnvironmentFlag("CONVOY_EMULATION_STICKY_FAULTS")};
  std::atomic<int> sticky_error{cudaSuccess};
  std::atomic<int> device_count{EnvironmentInt("CONVOY_EMULATION_DEVICES", 1)};
  std::atomic<int64_t> pageable_async_copies{0};
  std::atomic<int64_t> first_launches_in_capture{0};
  absl::Mutex mu;
  std::string sticky_detail ABSL_GUARDED_BY(mu);
  size_t memory_capacity ABSL_GUARDED_BY(mu) = 0;
  size_t memory_outstanding ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<void*, size_t> device_blocks ABSL_GUARDED_BY(mu);
  std::map<uintptr_t, size_t> pinned_blocks ABSL_GUARDED_BY(mu);  // start -> bytes
  absl::flat_hash_set<const void*> loaded_kernels ABSL_GUARDED_BY(mu);
};

ProcessState& State() {
  static ProcessState* state = new ProcessState();
  return *state;
}

thread_local int tls_current_device = 0;

bool IsPinned(const void* pointer) {
  ProcessState& state = State();
  absl::MutexLock lock(&state.mu);
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = state.pinned_blocks.upper_bound(address);
  if (it == state.pinned_blocks.begin()) return false;
  --it;
  return address < it->first + it->second;
}

bool IsLegacyStream(cudaStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }
bool IsCreatedStream(cudaStream_t stream) { return !IsLegacyStream(stream) && stream != cudaStreamPerThread; }

std::string StreamName(cudaStream_t stream) {
  return absl::StrCat("stream ", absl::Hex(reinterpret_cast<uintptr_t>(stream)));
}

// Fails `call` with `error` when this thread is capturing in a strict mode, invalidating those captures.
cudaError_t FailIfCapturing(const char* call, cudaError_t error, const char* why) {
  if (tls_strict_captures.empty()) return cudaSuccess;
  const std::string detail = absl::StrCat(call, " ", why, " while this thread captures ",
                                          StreamName(tls_strict_captures.front()),
                                          " into a CUDA graph; the capture is invalidated");
  for (CUstream_st* stream : tls_strict_captures) {
    if (stream->invalidated_by.empty()) stream->invalidated_by = detail;
  }
  return RecordError(error, detail);
}

cudaError_t UnsafeDuringCapture(const char* call) {
  return FailIfCapturing(call, cudaErrorStreamCaptureUnsupported, "is not allowed");
}

cudaError_t CopyBytes(const char* call, void* destination, const void* source, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return RecordError(cudaErrorInvalidValue,
                       absl::StrCat(call, ": kind ", static_cast<int>(kind), " is not a cudaMemcpyKind"));
  }
  if (bytes != 0) std::memmove(destination, source, bytes);
  return cudaSuccess;
}

}  // namespace

cudaError_t SubmitToStream(cudaStream_t stream, const char* what, std::function<cudaError_t()> work) {
  if (IsLegacyStream(stream)) {
    if (cudaError_t e = FailIfCapturing(what, cudaErrorStreamCaptureImplicit,
                                        "on the legacy default stream (it synchronizes with the capturing stream)");
        e != cudaSuccess) {
      return e;
    }
  }
  if (IsCreatedStream(stream) && stream->capture != nullptr) {
    if (!stream->invalidated_by.empty()) {
      return RecordError(cudaErrorStreamCaptureInvalidated,
                         absl::StrCat(what, " on ", StreamName(stream), ": its capture was invalidated: ",
                                      stream->invalidated_by));
    }
    stream->capture->nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  return work();
}

std::string LastErrorDetail() { return tls_last_error.detail; }

cudaError_t RecordError(cudaError_t error, std::string detail) {
  tls_last_error.error = error;
  tls_last_error.detail = std::move(detail);
  tls_last_error.from_launch = false;
  return error;
}

cudaError_t RecordLaunchError(cudaError_t error, std::string detail) {
  RecordError(error, std::move(detail));
  tls_last_error.from_launch = true;
  return error;
}

cudaError_t TakeUnreadCallError() {
  if (tls_last_error.error == cudaSuccess || tls_last_error.from_launch) return cudaSuccess;
  return std::exchange(tls_last_error.error, cudaSuccess);
}

void SetStickyKernelFaults(bool on) { State().sticky_faults = on; }

cudaError_t StickyFault() { return static_cast<cudaError_t>(State().sticky_error.load()); }

void NoteKernelFailure(cudaError_t error, const std::string& detail) {
  ProcessState& state = State();
  if (!state.sticky_faults) return;
  if (error != cudaErrorLaunchFailure && error != cudaErrorIllegalAddress && error != cudaErrorAssert) return;
  absl::MutexLock lock(&state.mu);
  if (state.sticky_error != cudaSuccess) return;
  state.sticky_detail = absl::StrCat("the context is unusable after an earlier kernel fault (sticky, as on a GPU): ",
                                     detail);
  state.sticky_error = error;
}

cudaError_t CheckStickyFault() {
  ProcessState& state = State();
  const cudaError_t sticky = static_cast<cudaError_t>(state.sticky_error.load());
  if (sticky == cudaSuccess) return cudaSuccess;
  std::string detail;
  {
    absl::MutexLock lock(&state.mu);
    detail = state.sticky_detail;
  }
  return RecordError(sticky, std::move(detail));
}

void SetDeviceCount(int count) { State().device_count = std::max(1, count); }
int DeviceCount() { return State().device_count; }
int StreamDevice(cudaStream_t stream) { return IsCreatedStream(stream) ? stream->device : tls_current_device; }

void SetDeviceMemoryCapacity(size_t bytes) {
  ProcessState& state = State();
  absl::MutexLock lock(&state.mu);
  state.memory_capacity = bytes;
}

int64_t PageableAsyncCopyCount() { return State().pageable_async_copies; }
int64_t FirstLaunchesInCaptureCount() { return State().first_launches_in_capture; }

void ForgetLoadedKernels() {
  ProcessState& state = State();
  absl::MutexLock lock(&state.mu);
  state.loaded_kernels.clear();
}

void NoteKernelLaunch(const void* kernel, cudaStream_t stream) {
  ProcessState& state = State();
  bool first = false;
  {
    absl::MutexLock lock(&state.mu);
    first = state.loaded_kernels.insert(kernel).second;
  }
  if (first && IsCreatedStream(stream) && stream->capture != nullptr) ++state.first_launches_in_capture;
}

size_t MaxDynamicSharedBytes(const void* kernel) {
  KernelAttributes& attributes = Attributes();
  absl::MutexLock lock(&attributes.mu);
  auto it = attributes.max_dynamic_shared.find(kernel);
  return it == attributes.max_dynamic_shared.end() ? kDefaultMaxDynamicSharedBytes : it->second;
}

}  // namespace convoy::cuda_emulation

using convoy::cuda_emulation::RecordError;
using convoy::cuda_emulation::UnsafeDuringCapture;

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
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
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
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorUnknown:
      return "unknown error";
  }
  return "unknown error";
}

// A sticky fault is never cleared: cudaGetLastError keeps returning it.
cudaError_t cudaGetLastError() {
  if (const cudaError_t sticky = convoy::cuda_emulation::StickyFault(); sticky != cudaSuccess) return sticky;
  return std::exchange(convoy::cuda_emulation::tls_last_error.error, cudaSuccess);
}
cudaError_t cudaPeekAtLastError() {
  if (const cudaError_t sticky = convoy::cuda_emulation::StickyFault(); sticky != cudaSuccess) return sticky;
  return convoy::cuda_emulation::tls_last_error.error;
}

namespace convoy::cuda_emulation {
namespace {
cudaError_t CheckDeviceIndex(const char* call, int device) {
  if (device >= 0 && device < DeviceCount()) return cudaSuccess;
  return RecordError(cudaErrorInvalidDevice, absl::StrCat(call, ": device ", device, " does not exist (the emulation has ",
                                                          DeviceCount(), " device(s))"));
}
}  // namespace
}  // namespace convoy::cuda_emulation

cudaError_t cudaGetDeviceCount(int* count) {
  *count = convoy::cuda_emulation::DeviceCount();
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = convoy::cuda_emulation::tls_current_device;
  return cudaSuccess;
}

namespace convoy::cuda_emulation {

std::atomic<int> emulated_compute_major{9};
std::atomic<int> emulated_compute_minor{0};

void SetEmulatedComputeCapability(int major, int minor) {
  emulated_compute_major.store(major);
  emulated_compute_minor.store(minor);
}

ScopedComputeCapability::ScopedComputeCapability(int major, int minor)
    : previous_major_(emulated_compute_major.load()), previous_minor_(emulated_compute_minor.load()) {
  SetEmulatedComputeCapability(major, minor);
}

ScopedComputeCapability::~ScopedComputeCapability() { SetEmulatedComputeCapability(previous_major_, previous_minor_); }

}  // namespace convoy::cuda_emulation

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = convoy::cuda_emulation::CheckDeviceIndex("cudaSetDevice", device); e != cudaSuccess) return e;
  convoy::cuda_emulation::tls_current_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (cudaError_t e = convoy::cuda_emulation::CheckDeviceIndex("cudaDeviceGetAttribute", device); e != cudaSuccess) {
    return e;
  }
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
    case cudaDevAttrClockRate:  // kHz: an H100/H200 SXM's 1980 MHz boost clock
      *value = 1980000;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrL2CacheSize:
      *value = 50 * 1024 * 1024;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = convoy::cuda_emulation::emulated_compute_major.load();
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = convoy::cuda_emulation::emulated_compute_minor.load();
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = 228 * 1024;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(kMaxSharedBytesPerBlock);
      break;
    // An H200's per-SM limits and clocks (sm_90), for occupancy and the launch-cost model.
    case cudaDevAttrMaxRegistersPerBlock:
    case cudaDevAttrMaxRegistersPerMultiprocessor:
      *value = 65536;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;
      break;
    case cudaDevAttrMaxBlocksPerMultiprocessor:
      *value = 32;
      break;
    case cudaDevAttrReservedSharedMemoryPerBlock:
      *value = 1024;
      break;
    case cudaDevAttrMemoryClockRate:
      *value = 3201000;  // kHz; with the 6144-bit bus, 4.9 TB/s of HBM3e
      break;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 6144;
      break;
    default:
      return RecordError(cudaErrorInvalidValue,
                         absl::StrCat("device attribute ", static_cast<int>(attribute), " is not emulated"));
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return UnsafeDuringCapture("cudaDeviceSynchronize");
}

namespace convoy::cuda_emulation {
namespace {
// Device (pinned = false) or pinned host (true) memory, counted against the device memory capacity.
cudaError_t AllocateBlock(const char* call, void** pointer, size_t bytes, bool pinned) {
  *pointer = nullptr;
  if (cudaError_t e = CheckStickyFault(); e != cudaSuccess) return e;
  if (cudaError_t e = UnsafeDuringCapture(call); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  ProcessState& state = State();
  absl::MutexLock lock(&state.mu);
  if (!pinned && state.memory_capacity != 0 && state.memory_outstanding + bytes > state.memory_capacity) {
    return RecordError(cudaErrorMemoryAllocation,
                       absl::StrCat(call, " of ", bytes, " bytes: ", state.memory_outstanding, " of the device's ",
                                    state.memory_capacity, " bytes are in use"));
  }
  // posix_memalign keeps the exact size, so ASAN reports an access one element past the end.
  if (posix_memalign(pointer, kDeviceAllocationAlignment, bytes) != 0) {
    *pointer = nullptr;
    return RecordError(cudaErrorMemoryAllocation, absl::StrCat(call, " of ", bytes, " bytes failed"));
  }
  if (pinned) {
    state.pinned_blocks[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  } else {
    state.device_blocks[*pointer] = bytes;
    state.memory_outstanding += bytes;
  }
  return cudaSuccess;
}

void FreeBlock(void* pointer, bool pinned) {
  if (pointer == nullptr) return;
  ProcessState& state = State();
  {
    absl::MutexLock lock(&state.mu);
    if (pinned) {
      state.pinned_blocks.erase(reinterpret_cast<uintptr_t>(pointer));
    } else if (auto it = state.device_blocks.find(pointer); it != state.device_blocks.end()) {
      state.memory_outstanding -= it->second;
      state.device_blocks.erase(it);
    }
  }
  std::free(pointer);
}
}  // namespace
}  // namespace convoy::cuda_emulation

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  return convoy::cuda_emulation::AllocateBlock("cudaMalloc", pointer, bytes, /*pinned=*/false);
}

cudaError_t cudaFree(void* pointer) {
  if (cudaError_t e = UnsafeDuringCapture("cudaFree"); e != cudaSuccess) return e;
  convoy::cuda_emulation::FreeBlock(pointer, /*pinned=*/false);
  return convoy::cuda_emulation::CheckStickyFault();
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  return convoy::cuda_emulation::AllocateBlock("cudaMallocHost", pointer, bytes, /*pinned=*/true);
}

cudaError_t cudaFreeHost(void* pointer) {
  if (cudaError_t e = UnsafeDuringCapture("cudaFreeHost"); e != cudaSuccess) return e;
  convoy::cuda_emulation::FreeBlock(pointer, /*pinned=*/true);
  return convoy::cuda_emulation::CheckStickyFault();
}

cudaError_t cudaMemcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  if (cudaError_t e = UnsafeDuringCapture("cudaMemcpy"); e != cudaSuccess) return e;
  return convoy::cuda_emulation::CopyBytes("cudaMemcpy", destination, source, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  using namespace convoy::cuda_emulation;  // NOLINT: the checks
  if (cudaError_t e = CheckStickyFault(); e != cudaSuccess) return e;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return RecordError(cudaErrorInvalidValue,
                       absl::StrCat("cudaMemcpyAsync: kind ", static_cast<int>(kind), " is not a cudaMemcpyKind"));
  }
  const void* host = kind == cudaMemcpyHostToDevice ? source : kind == cudaMemcpyDeviceToHost ? destination : nullptr;
  if (host != nullptr && bytes != 0 && !IsPinned(host)) ++State().pageable_async_copies;
  return SubmitToStream(stream, "cudaMemcpyAsync", [=] {
    return CopyBytes("cudaMemcpyAsync", destination, source, bytes, kind);
  });
}

cudaError_t cudaMemset(void* destination, int value, size_t bytes) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  if (cudaError_t e = UnsafeDuringCapture("cudaMemset"); e != cudaSuccess) return e;
  if (bytes != 0) std::memset(destination, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return convoy::cuda_emulation::SubmitToStream(stream, "cudaMemsetAsync", [=] {
    if (bytes != 0) std::memset(destination, value, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = nullptr;
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  *stream = new CUstream_st{flags, convoy::cuda_emulation::tls_current_device};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!convoy::cuda_emulation::IsCreatedStream(stream)) {
    return RecordError(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream cannot be destroyed");
  }
  auto& captures = convoy::cuda_emulation::tls_strict_captures;
  captures.erase(std::remove(captures.begin(), captures.end(), stream), captures.end());
  delete stream;
  return cudaSuccess;
}

namespace convoy::cuda_emulation {
namespace {
// Waiting on or querying a stream that captures is an error from any thread; other waits only on a capturing thread.
cudaError_t CheckWaitAllowed(const char* call, cudaStream_t stream) {
  if (IsCreatedStream(stream) && stream->capture != nullptr) {
    if (stream->invalidated_by.empty()) stream->invalidated_by = absl::StrCat(call, " on the capturing stream");
    return RecordError(cudaErrorStreamCaptureUnsupported,
                       absl::StrCat(call, ": ", StreamName(stream), " is capturing a CUDA graph (nothing it holds "
                                    "runs until the graph is launched); the capture is invalidated"));
  }
  return UnsafeDuringCapture(call);
}
}  // namespace
}  // namespace convoy::cuda_emulation

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return convoy::cuda_emulation::CheckWaitAllowed("cudaStreamSynchronize", stream);
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return convoy::cuda_emulation::CheckWaitAllowed("cudaStreamQuery", stream);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  using namespace convoy::cuda_emulation;  // NOLINT: the capture helpers
  if (!IsCreatedStream(stream)) {
    return RecordError(cudaErrorStreamCaptureUnsupported,
                       "cudaStreamBeginCapture: the legacy default stream cannot be captured; capture a created stream");
  }
  if (stream->capture != nullptr) {
    return RecordError(cudaErrorIllegalState,
                       absl::StrCat("cudaStreamBeginCapture: ", StreamName(stream), " is already capturing"));
  }
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) {
    return RecordError(cudaErrorInvalidValue, absl::StrCat("cudaStreamBeginCapture: mode ", static_cast<int>(mode),
                                                           " is not a cudaStreamCaptureMode"));
  }
  stream->capture = std::make_unique<CUgraph_st>();
  stream->capture_mode = mode;
  stream->capture_thread = std::this_thread::get_id();
  stream->invalidated_by.clear();
  if (mode != cudaStreamCaptureModeRelaxed) tls_strict_captures.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  using namespace convoy::cuda_emulation;  // NOLINT: the capture helpers
  *graph = nullptr;
  if (!IsCreatedStream(stream) || stream->capture == nullptr) {
    return RecordError(cudaErrorIllegalState,
                       absl::StrCat("cudaStreamEndCapture: ", StreamName(stream), " is not capturing"));
  }
  if (stream->capture_mode != cudaStreamCaptureModeRelaxed && stream->capture_thread != std::this_thread::get_id()) {
    return RecordError(cudaErrorStreamCaptureWrongThread,
                       "cudaStreamEndCapture: the capture was begun on another thread");
  }
  auto& captures = tls_strict_captures;
  captures.erase(std::remove(captures.begin(), captures.end(), stream), captures.end());
  std::unique_ptr<CUgraph_st> captured = std::move(stream->capture);
  if (!stream->invalidated_by.empty()) {
    return RecordError(cudaErrorStreamCaptureInvalidated,
                       absl::StrCat("cudaStreamEndCapture: the capture was invalidated: ", stream->invalidated_by));
  }
  *graph = captured.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  using convoy::cuda_emulation::IsCreatedStream;
  if (!IsCreatedStream(stream) || stream->capture == nullptr) {
    *status = cudaStreamCaptureStatusNone;
  } else {
    *status = stream->invalidated_by.empty() ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = nullptr;
  if (graph == nullptr) return RecordError(cudaErrorInvalidValue, "cudaGraphInstantiate: graph is null");
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  if (exec == nullptr) return RecordError(cudaErrorInvalidValue, "cudaGraphLaunch: graph exec is null");
  return convoy::cuda_emulation::SubmitToStream(stream, "cudaGraphLaunch", [exec] {
    for (const auto& node : exec->nodes) {
      if (cudaError_t e = node(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

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

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return convoy::cuda_emulation::SubmitToStream(stream, "cudaEventRecord", [event] {
    event->recorded_at = std::chrono::steady_clock::now();
    event->recorded = true;
    return cudaSuccess;
  });
}

cudaError_t cudaEventSynchronize(cudaEvent_t) {
  if (cudaError_t e = convoy::cuda_emulation::CheckStickyFault(); e != cudaSuccess) return e;
  return convoy::cuda_emulation::UnsafeDuringCapture("cudaEventSynchronize");
}
cudaError_t cudaEventQuery(cudaEvent_t) { return convoy::cuda_emulation::UnsafeDuringCapture("cudaEventQuery"); }

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
