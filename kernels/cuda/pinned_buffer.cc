#include "kernels/cuda/pinned_buffer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes) {
  if (bytes == 0) return PinnedHostBuffer();
  void* data = nullptr;
  const cudaError_t error = cudaMallocHost(&data, bytes);
  if (error != cudaSuccess) return CudaStatus(error, absl::StrCat("cudaMallocHost of ", bytes, " bytes"));
  return PinnedHostBuffer(data, bytes);
}

void PinnedHostBuffer::Reset() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
  data_ = nullptr;
  size_ = 0;
}

PinnedHostBuffer::~PinnedHostBuffer() { Reset(); }

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace convoy::cuda
