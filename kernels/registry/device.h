// A compute device as the autotuner and the runtime see it: identity (part of every algorithm-cache key), memory,
// copies, synchronization and timing. The CPU backend implements it in kernels/cpu/cpu_device.h and the CUDA backend
// in kernels/cuda/cuda_device.h.
#ifndef CONVOY_KERNELS_REGISTRY_DEVICE_H_
#define CONVOY_KERNELS_REGISTRY_DEVICE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/registry/algorithm.h"

namespace convoy {

// Move-only owner of one device allocation; frees it through the deleter it was made with.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  DeviceAllocation(void* data, size_t bytes, std::function<void(void*)> deleter)
      : data_(data), bytes_(bytes), deleter_(std::move(deleter)) {}
  ~DeviceAllocation() { Reset(); }
  DeviceAllocation(DeviceAllocation&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), deleter_(std::move(o.deleter_)) {}
  DeviceAllocation& operator=(DeviceAllocation&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      deleter_ = std::move(o.deleter_);
    }
    return *this;
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void Reset() {
    if (data_ != nullptr && deleter_) deleter_(data_);
    data_ = nullptr;
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> deleter_;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual Backend backend() const = 0;
  // Identifies the hardware for the algorithm cache: "cpu:<model>:threads=2", "cuda:NVIDIA H200:sm=132:cc=9.0".
  virtual std::string Identity() const = 0;
  // The default context kernels run in on this device.
  virtual ExecutionContext context() const = 0;
  virtual absl::StatusOr<DeviceAllocation> Allocate(size_t bytes) = 0;
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;
  // Runs fn `warmup` times, then `reps` timed times; returns each timed run's milliseconds (device time on CUDA).
  virtual absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                                       int reps) = 0;
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_DEVICE_H_
