// Page-locked (pinned) host memory, owned: the staging area for host<->device copies. cudaMemcpyAsync from pageable
// memory is synchronous with respect to the host; from pinned memory it overlaps with kernels and runs at full PCIe /
// NVLink speed. Allocating pinned memory is slow (it maps pages for the driver): allocate staging buffers once per
// model instance, not per request.
//
//   CONVOY_ASSIGN_OR_RETURN(PinnedHostBuffer staging, PinnedHostBuffer::Allocate(input_bytes));
//   std::memcpy(staging.data(), request_bytes, input_bytes);
//   cudaMemcpyAsync(device_input, staging.data(), input_bytes, cudaMemcpyHostToDevice, stream);
#ifndef CONVOY_KERNELS_CUDA_PINNED_BUFFER_H_
#define CONVOY_KERNELS_CUDA_PINNED_BUFFER_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace convoy::cuda {

class PinnedHostBuffer {
 public:
  // `bytes` of pinned host memory (cudaMallocHost); 0 -> an empty buffer. RESOURCE_EXHAUSTED / the CUDA error as a
  // status on failure (INTERNAL naming cudaErrorInsufficientDriver where there is no driver).
  static absl::StatusOr<PinnedHostBuffer> Allocate(size_t bytes);

  PinnedHostBuffer() = default;
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  PinnedHostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void Reset();
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_PINNED_BUFFER_H_
