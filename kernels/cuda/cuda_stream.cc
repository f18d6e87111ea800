#include "kernels/cuda/cuda_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

absl::StatusOr<CudaStream> CudaStream::Create(const Options& options) {
  cudaStream_t stream = nullptr;
  CONVOY_RETURN_IF_CUDA_ERROR(
      cudaStreamCreateWithFlags(&stream, options.non_blocking ? cudaStreamNonBlocking : cudaStreamDefault));
  return CudaStream(stream);
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

absl::Status CudaStream::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::StatusOr<CudaEvent> CudaEvent::Create(const Options& options) {
  cudaEvent_t event = nullptr;
  CONVOY_RETURN_IF_CUDA_ERROR(
      cudaEventCreateWithFlags(&event, options.timing ? cudaEventDefault : cudaEventDisableTiming));
  return CudaEvent(event);
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

absl::Status CudaEvent::Record(cudaStream_t stream) const {
  if (event_ == nullptr) return absl::FailedPreconditionError("CudaEvent::Record on an empty (moved-from) event");
  return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord");
}

absl::Status CudaEvent::Synchronize() const {
  if (event_ == nullptr) return absl::FailedPreconditionError("CudaEvent::Synchronize on an empty (moved-from) event");
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

absl::Status CudaEvent::MakeStreamWait(cudaStream_t stream) const {
  if (event_ == nullptr) return absl::FailedPreconditionError("CudaEvent::MakeStreamWait on an empty event");
  return CudaStatus(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

absl::StatusOr<float> CudaEvent::ElapsedMilliseconds(const CudaEvent& start, const CudaEvent& end) {
  if (start.event_ == nullptr || end.event_ == nullptr) {
    return absl::FailedPreconditionError("CudaEvent::ElapsedMilliseconds on an empty event");
  }
  float ms = 0.0f;
  CONVOY_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

ScopedCudaDevice::ScopedCudaDevice(int device) {
  int current = 0;
  status_ = CudaStatus(cudaGetDevice(&current), "cudaGetDevice");
  if (!status_.ok()) return;
  if (current == device) return;
  status_ = CudaStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  if (status_.ok()) previous_ = current;
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace convoy::cuda
