#include "kernels/cuda/memory_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/common/status_macros.h"

namespace convoy::cuda {

absl::StatusOr<std::shared_ptr<CudaMemoryPool>> CudaMemoryPool::Create(const Options& options) {
  if (options.granularity == 0 || (options.granularity & (options.granularity - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaMemoryPool: granularity must be a power of two, got ", options.granularity));
  }
  if (options.max_oversize_ratio < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaMemoryPool: max_oversize_ratio must be >= 1, got ", options.max_oversize_ratio));
  }
  if (options.device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CudaMemoryPool: device must be >= 0, got ", options.device));
  }
  return std::shared_ptr<CudaMemoryPool>(new CudaMemoryPool(options));
}

CudaMemoryPool::~CudaMemoryPool() {
  convoy::MutexLock lock(&mu_);
  (void)FreeCachedLocked();
}

absl::StatusOr<DeviceAllocation> CudaMemoryPool::Allocate(size_t bytes) {
  if (bytes == 0) return DeviceAllocation();
  const size_t g = options_.granularity;
  if (bytes > ~size_t{0} - g) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  const size_t rounded = (bytes + g - 1) / g * g;
  std::shared_ptr<CudaMemoryPool> self = shared_from_this();
  auto make = [self](void* data, size_t block) {
    return DeviceAllocation(data, block, [self, block](void* p) { self->Release(p, block); });
  };
  convoy::MutexLock lock(&mu_);
  const size_t largest_taken = static_cast<size_t>(static_cast<double>(rounded) * options_.max_oversize_ratio);
  if (auto it = free_blocks_.lower_bound(rounded); it != free_blocks_.end() && it->first <= largest_taken) {
    const size_t block = it->first;
    void* data = it->second;
    free_blocks_.erase(it);
    stats_.cached_bytes -= block;
    stats_.in_use_bytes += block;
    ++stats_.reuses;
    return make(data, block);
  }
  if (options_.max_total_bytes != 0 && stats_.in_use_bytes + rounded > options_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("CUDA memory pool of device ", options_.device, ": ", bytes,
                                                     " bytes requested with ", stats_.in_use_bytes,
                                                     " in use exceeds the limit of ", options_.max_total_bytes));
  }
  if (options_.max_total_bytes != 0 &&
      stats_.in_use_bytes + stats_.cached_bytes + rounded > options_.max_total_bytes) {
    CONVOY_RETURN_IF_ERROR(FreeCachedLocked());
  }
  ScopedCudaDevice guard(options_.device);
  if (!guard.status().ok()) return guard.status();
  void* data = nullptr;
  cudaError_t error = cudaMalloc(&data, rounded);
  if (error == cudaErrorMemoryAllocation && !free_blocks_.empty()) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error before retrying
    CONVOY_RETURN_IF_ERROR(FreeCachedLocked());
    error = cudaMalloc(&data, rounded);
  }
  if (error != cudaSuccess) {
    return CudaStatus(error, absl::StrCat("cudaMalloc of ", rounded, " bytes on device ", options_.device, " (",
                                          stats_.in_use_bytes, " bytes in use by the pool)"));
  }
  ++stats_.cuda_mallocs;
  stats_.in_use_bytes += rounded;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.in_use_bytes + stats_.cached_bytes);
  return make(data, rounded);
}

void CudaMemoryPool::Release(void* data, size_t block_bytes) {
  convoy::MutexLock lock(&mu_);
  stats_.in_use_bytes -= block_bytes;
  if (options_.max_cached_bytes != 0 && stats_.cached_bytes + block_bytes > options_.max_cached_bytes) {
    ScopedCudaDevice guard(options_.device);
    (void)cudaFree(data);  // nothing to report to from a destructor; cudaFree only fails on a broken context
    return;
  }
  free_blocks_.emplace(block_bytes, data);
  stats_.cached_bytes += block_bytes;
}

absl::Status CudaMemoryPool::FreeCachedLocked() {
  ScopedCudaDevice guard(options_.device);
  absl::Status status = guard.status();
  for (const auto& [bytes, data] : free_blocks_) {
    const absl::Status freed = CudaStatus(cudaFree(data), "cudaFree of a cached block");
    if (status.ok()) status = freed;
  }
  free_blocks_.clear();
  stats_.cached_bytes = 0;
  return status;
}

absl::Status CudaMemoryPool::ReleaseCached() {
  convoy::MutexLock lock(&mu_);
  return FreeCachedLocked();
}

CudaMemoryPool::Stats CudaMemoryPool::stats() const {
  convoy::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace convoy::cuda
