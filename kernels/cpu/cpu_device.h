// The CPU as a Device: host memory, a thread pool as the "stream", steady-clock timing.
#ifndef CONVOY_KERNELS_CPU_CPU_DEVICE_H_
#define CONVOY_KERNELS_CPU_CPU_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/common/thread_pool.h"
#include "kernels/registry/device.h"

namespace convoy {

class CpuDevice : public Device {
 public:
  struct Options {
    int num_threads = 0;  // 0: ThreadPool::DefaultThreadCount() (CONVOY_CPU_THREADS or all cores)
  };
  static absl::StatusOr<std::unique_ptr<CpuDevice>> Create(const Options& options);
  // A process-wide device with default options.
  static CpuDevice& Default();

  Backend backend() const override { return Backend::kCpu; }
  std::string Identity() const override { return identity_; }
  ExecutionContext context() const override;
  absl::StatusOr<DeviceAllocation> Allocate(size_t bytes) override;
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  // The device's thread pool; copies are memcpy at once; Record is not supported.
  absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() override;
  absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                               int reps) override;
  ThreadPool& thread_pool() { return *pool_; }

 private:
  explicit CpuDevice(int num_threads);
  std::unique_ptr<ThreadPool> pool_;
  std::string identity_;
};

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown-cpu".
std::string CpuModelName();

}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CPU_DEVICE_H_
