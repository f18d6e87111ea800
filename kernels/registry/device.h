// A compute device as the autotuner and the runtime see it: identity (part of every algorithm-cache key), memory,
// copies, synchronization and timing. The CPU backend implements it in kernels/cpu/cpu_device.h and the CUDA backend
// in kernels/cuda/cuda_device.h.
#ifndef CONVOY_KERNELS_REGISTRY_DEVICE_H_
#define CONVOY_KERNELS_REGISTRY_DEVICE_H_

#include <cstddef>
#include <functional>
#include <memory>
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

// Work recorded from a DeviceQueue (on CUDA: a CUDA graph), replayable on that queue. A replay reads and writes the
// very buffers the recorded work was given: put new inputs into them before replaying.
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  // Queues one replay on the queue the work was recorded from (asynchronous, like a kernel launch).
  virtual absl::Status Replay() = 0;
};

// One ordered queue of device work with its own owner: on CUDA a stream of its own, so that model instances run
// concurrently; on the CPU the device's thread pool, with copies done at once. Work queued on one queue runs in
// order. Copies are asynchronous where the device is: the host buffer must stay valid and unchanged until
// Synchronize() returns.
//
// Thread-compatible: one thread queues at a time.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // What kernels queued on this queue get (its stream on CUDA).
  virtual ExecutionContext context() const = 0;
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  // Waits for everything queued; an asynchronous kernel fault shows up here.
  virtual absl::Status Synchronize() = 0;
  // Runs `body` with this queue's device current on the calling thread, restoring the previous one after (CUDA: a
  // kernel launched into a stream of another device than the current one fails, and a server thread may have any
  // device current). Where there is nothing to set (the CPU), runs `body`.
  virtual absl::Status RunWithDeviceCurrent(const std::function<absl::Status()>& body) { return body(); }
  // True where Record works (CUDA).
  virtual bool CanRecord() const { return false; }
  // Records what `body` queues on this queue, without running it, for replay. Inside `body` nothing may allocate,
  // copy synchronously or wait (Algorithm::Run never does). Fails with the body's error or the device's reason.
  virtual absl::StatusOr<std::unique_ptr<RecordedWork>> Record(const std::function<absl::Status()>& body) {
    (void)body;
    return absl::UnimplementedError("this device cannot record work for replay");
  }
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
  // Host memory to stage copies to and from this device through: page-locked on CUDA (a queued copy from it is
  // asynchronous and overlaps kernels; from pageable memory the host waits for the copy), ordinary 64-byte aligned
  // memory elsewhere. Slow to allocate: allocate once per user (an executor does at Create), not per copy.
  virtual absl::StatusOr<DeviceAllocation> AllocateStagingHost(size_t bytes);
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;
  // A new queue of work on this device, owned by the caller (which must not outlive the device).
  virtual absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() = 0;
  // Runs fn `warmup` times, then `reps` timed times; returns each timed run's milliseconds (device time on CUDA).
  virtual absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                                       int reps) = 0;
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_DEVICE_H_
