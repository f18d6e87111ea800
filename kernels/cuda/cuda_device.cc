#include "kernels/cuda/cuda_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/cuda_graph.h"
#include "kernels/cuda/pinned_buffer.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(const Options& options) {
  CONVOY_ASSIGN_OR_RETURN(GpuInfo info, QueryGpu(options.device_index));
  ScopedCudaDevice guard(options.device_index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  CudaStream stream;
  if (options.own_stream) {
    CONVOY_ASSIGN_OR_RETURN(stream, CudaStream::Create({/*non_blocking=*/true}));
  }
  CudaMemoryPool::Options pool_options = options.pool;
  pool_options.device = options.device_index;
  CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<CudaMemoryPool> pool, CudaMemoryPool::Create(pool_options));
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(info), std::move(stream), std::move(pool)));
}

ExecutionContext CudaDevice::context() const {
  ExecutionContext context;
  context.backend = Backend::kCuda;
  context.cuda_stream = stream_.get();
  context.cuda_device = info_.index;
  return context;
}

absl::StatusOr<DeviceAllocation> CudaDevice::Allocate(size_t bytes) { return pool_->Allocate(bytes); }

absl::StatusOr<DeviceAllocation> CudaDevice::AllocateStagingHost(size_t bytes) {
  if (bytes == 0) return DeviceAllocation();
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  CONVOY_ASSIGN_OR_RETURN(PinnedHostBuffer pinned, PinnedHostBuffer::Allocate(bytes));
  auto owner = std::make_shared<PinnedHostBuffer>(std::move(pinned));
  void* data = owner->data();
  return DeviceAllocation(data, bytes, [owner](void*) mutable { owner.reset(); });
}

absl::Status CudaDevice::CopyToDevice(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  CONVOY_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream()),
                                    absl::StrCat("copying ", bytes, " bytes to device ", info_.index)));
  return stream_.Synchronize();
}

absl::Status CudaDevice::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  CONVOY_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream()),
                                    absl::StrCat("copying ", bytes, " bytes from device ", info_.index)));
  return stream_.Synchronize();
}

absl::Status CudaDevice::Synchronize() {
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  return stream_.Synchronize();
}

namespace {

class RecordedCudaGraph final : public RecordedWork {
 public:
  RecordedCudaGraph(CudaGraph graph, cudaStream_t stream, int device)
      : graph_(std::move(graph)), stream_(stream), device_(device) {}
  absl::Status Replay() override {
    ScopedCudaDevice guard(device_);
    CONVOY_RETURN_IF_ERROR(guard.status());
    return graph_.Launch(stream_);
  }

 private:
  CudaGraph graph_;
  cudaStream_t stream_;
  int device_;
};

// A stream of its own on one GPU.
class CudaQueue final : public DeviceQueue {
 public:
  CudaQueue(CudaStream stream, int device) : stream_(std::move(stream)), device_(device) {}

  ExecutionContext context() const override {
    ExecutionContext context;
    context.backend = Backend::kCuda;
    context.cuda_stream = stream_.get();
    context.cuda_device = device_;
    return context;
  }
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    return Copy(device_dst, host_src, bytes, cudaMemcpyHostToDevice, "to");
  }
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    return Copy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, "from");
  }
  absl::Status Synchronize() override {
    ScopedCudaDevice guard(device_);
    CONVOY_RETURN_IF_ERROR(guard.status());
    return stream_.Synchronize();
  }
  absl::Status RunWithDeviceCurrent(const std::function<absl::Status()>& body) override {
    ScopedCudaDevice guard(device_);
    CONVOY_RETURN_IF_ERROR(guard.status());
    return body();
  }
  bool CanRecord() const override { return CudaGraphsSupported(); }
  absl::StatusOr<std::unique_ptr<RecordedWork>> Record(const std::function<absl::Status()>& body) override {
    ScopedCudaDevice guard(device_);
    CONVOY_RETURN_IF_ERROR(guard.status());
    CONVOY_ASSIGN_OR_RETURN(CudaGraph graph, CudaGraph::Capture(stream_.get(), body));
    return std::unique_ptr<RecordedWork>(new RecordedCudaGraph(std::move(graph), stream_.get(), device_));
  }

 private:
  absl::Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* direction) {
    if (bytes == 0) return absl::OkStatus();
    ScopedCudaDevice guard(device_);
    CONVOY_RETURN_IF_ERROR(guard.status());
    return CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, stream_.get()),
                      absl::StrCat("queueing a copy of ", bytes, " bytes ", direction, " device ", device_));
  }

  CudaStream stream_;
  int device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceQueue>> CudaDevice::CreateQueue() {
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  CONVOY_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create({/*non_blocking=*/true}));
  return std::unique_ptr<DeviceQueue>(new CudaQueue(std::move(stream), info_.index));
}

absl::StatusOr<std::vector<double>> CudaDevice::TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                                         int reps) {
  if (warmup < 0 || reps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("TimeRuns: warmup ", warmup, " and reps ", reps, " must be >= 0"));
  }
  ScopedCudaDevice guard(info_.index);
  CONVOY_RETURN_IF_ERROR(guard.status());
  for (int i = 0; i < warmup; ++i) CONVOY_RETURN_IF_ERROR(fn());
  CONVOY_ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::Create({/*timing=*/true}));
  CONVOY_ASSIGN_OR_RETURN(CudaEvent end, CudaEvent::Create({/*timing=*/true}));
  std::vector<double> times;
  times.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    CONVOY_RETURN_IF_ERROR(start.Record(stream()));
    CONVOY_RETURN_IF_ERROR(fn());
    CONVOY_RETURN_IF_ERROR(end.Record(stream()));
    CONVOY_RETURN_IF_ERROR(end.Synchronize());
    CONVOY_ASSIGN_OR_RETURN(const float ms, CudaEvent::ElapsedMilliseconds(start, end));
    times.push_back(ms);
  }
  return times;
}

}  // namespace convoy::cuda
