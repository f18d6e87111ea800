// A GPU as a Device (kernels/registry/device.h): its identity for the algorithm cache, an owned stream kernels run
// on, device memory from a caching pool, copies, synchronization and event timing.
//
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaDevice> gpu, cuda::CudaDevice::Create({.device_index = 0}));
//   ExecutionContext context = gpu->context();          // {kCuda, stream, device}
//   CONVOY_ASSIGN_OR_RETURN(DeviceAllocation y, gpu->Allocate(bytes));
//   CONVOY_RETURN_IF_ERROR(algorithm->Run(problem, args, workspace, context));
//   CONVOY_RETURN_IF_ERROR(gpu->Synchronize());
//
// Create() fails with UNAVAILABLE "no CUDA device: ..." where there is no GPU or driver (it never aborts), so a server
// can fall back to the CPU backend.
//
// The same class compiled against the CUDA emulation (target //kernels/cuda:cuda_device_emulated) is the emulated
// device: memory is host memory, the stream runs each kernel to completion on the calling thread, and Identity()
// starts with "cuda-emulated:". The cross-backend suite runs the CUDA kernels on it in CI.
//
// Thread-compatibility: Allocate and CreateQueue are thread-safe (the pool locks); the device's own stream orders
// work, so threads that share it must coordinate what they queue on it. The runtime gives each model instance its own
// queue (CreateQueue: its own stream), so instances run concurrently on one device.
#ifndef CONVOY_KERNELS_CUDA_CUDA_DEVICE_H_
#define CONVOY_KERNELS_CUDA_CUDA_DEVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/gpu_info.h"
#include "kernels/cuda/memory_pool.h"
#include "kernels/registry/device.h"

namespace convoy::cuda {

class CudaDevice : public Device {
 public:
  struct Options {
    int device_index = 0;
    // Limits of the device-memory pool (its `device` field is set from device_index). The defaults cache every
    // freed block with no cap: right for a process that owns the GPU; cap max_total_bytes when several model
    // instances share one.
    CudaMemoryPool::Options pool;
    // Kernels run on a created non-blocking stream (true) or on the legacy default stream (false; tests only: it
    // serializes with every other user of stream 0 and cannot be graph-captured).
    bool own_stream = true;
  };
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(const Options& options);

  Backend backend() const override { return Backend::kCuda; }
  std::string Identity() const override { return info_.Identity(); }
  ExecutionContext context() const override;
  // From the pool; the allocation returns its block to the pool when destroyed (it may outlive this device).
  absl::StatusOr<DeviceAllocation> Allocate(size_t bytes) override;
  // Page-locked host memory (cudaMallocHost), freed when the allocation is destroyed.
  absl::StatusOr<DeviceAllocation> AllocateStagingHost(size_t bytes) override;
  // Copies on the device's stream and waits for them: on return the data is in place (the stream's earlier work
  // is done too).
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  // Waits for the stream; an asynchronous kernel fault shows up here as a status.
  absl::Status Synchronize() override;
  // A queue on a new non-blocking stream of this device, with graph recording (CudaGraph). Its copies are queued
  // on that stream (they overlap other queues' work when the host buffer is pinned).
  absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() override;
  // Device time of each timed run, measured with a pair of events around fn's launches on the stream.
  absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                               int reps) override;

  const GpuInfo& info() const { return info_; }
  int device_index() const { return info_.index; }
  cudaStream_t stream() const { return stream_.get(); }
  CudaMemoryPool& pool() { return *pool_; }
  bool emulated() const { return info_.emulated; }

 private:
  CudaDevice(GpuInfo info, CudaStream stream, std::shared_ptr<CudaMemoryPool> pool)
      : info_(std::move(info)), stream_(std::move(stream)), pool_(std::move(pool)) {}

  GpuInfo info_;
  CudaStream stream_;
  std::shared_ptr<CudaMemoryPool> pool_;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CUDA_DEVICE_H_
