// Owned CUDA streams and events, and a scoped current-device guard. Every object here is move-only and releases its
// CUDA handle in the destructor (errors at destruction are ignored: there is nobody to report them to). Works in both
// build modes: with nvcc/cudart on a GPU, and against the CUDA emulation (where streams only order and time work).
//
//   CONVOY_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create({.non_blocking = true}));
//   CONVOY_ASSIGN_OR_RETURN(CudaEvent done, CudaEvent::Create({.timing = false}));
//   CONVOY_RETURN_IF_ERROR(done.Record(stream.get()));
//   ScopedCudaDevice guard(1);  CONVOY_RETURN_IF_ERROR(guard.status());
#ifndef CONVOY_KERNELS_CUDA_CUDA_STREAM_H_
#define CONVOY_KERNELS_CUDA_CUDA_STREAM_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda_emulation/cuda_host_api.h"

namespace convoy::cuda {

// A stream this object owns (cudaStreamCreateWithFlags ... cudaStreamDestroy).
class CudaStream {
 public:
  struct Options {
    // cudaStreamNonBlocking: do not synchronize with the legacy default stream. Servers want this (another library
    // launching on stream 0 would otherwise serialize with every request).
    bool non_blocking = true;
  };
  static absl::StatusOr<CudaStream> Create(const Options& options);

  CudaStream() = default;  // empty: get() is null, the legacy default stream
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for all work queued on the stream; the status carries the first asynchronous kernel error.
  absl::Status Synchronize() const;

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// An event this object owns.
class CudaEvent {
 public:
  struct Options {
    // Timing events can be passed to ElapsedMilliseconds; plain ones are cheaper for pure synchronization.
    bool timing = true;
  };
  static absl::StatusOr<CudaEvent> Create(const Options& options);

  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  absl::Status Record(cudaStream_t stream) const;
  absl::Status Synchronize() const;
  // Makes `stream` wait for this event (cross-stream dependency without blocking the host).
  absl::Status MakeStreamWait(cudaStream_t stream) const;
  // Milliseconds between `start` and `end`, both recorded with timing on and completed.
  static absl::StatusOr<float> ElapsedMilliseconds(const CudaEvent& start, const CudaEvent& end);

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

// Makes `device` current for its lifetime and restores the previous device (Triton's ScopedSetDevice). Setting the
// device can fail (invalid index, no driver): check status() before relying on it; the destructor restores only
// what it changed.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;  // -1: nothing to restore
  absl::Status status_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CUDA_STREAM_H_
