// A Device that forwards every call to another one: the base of decorators that change one behaviour of a real
// device and keep the rest (in tests: a device whose TimeRuns reports simulated time, one whose queues cannot record).
#ifndef CONVOY_KERNELS_REGISTRY_FORWARDING_DEVICE_H_
#define CONVOY_KERNELS_REGISTRY_FORWARDING_DEVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/registry/device.h"

namespace convoy {

class ForwardingDevice : public Device {
 public:
  // `inner` must outlive this device.
  explicit ForwardingDevice(Device* inner) : inner_(inner) {}

  Backend backend() const override { return inner_->backend(); }
  std::string Identity() const override { return inner_->Identity(); }
  ExecutionContext context() const override { return inner_->context(); }
  absl::StatusOr<DeviceAllocation> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  absl::StatusOr<DeviceAllocation> AllocateStagingHost(size_t bytes) override {
    return inner_->AllocateStagingHost(bytes);
  }
  absl::Status CopyToDevice(void* d, const void* h, size_t n) override { return inner_->CopyToDevice(d, h, n); }
  absl::Status CopyToHost(void* h, const void* d, size_t n) override { return inner_->CopyToHost(h, d, n); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() override { return inner_->CreateQueue(); }
  absl::StatusOr<std::vector<double>> TimeRuns(const std::function<absl::Status()>& fn, int warmup,
                                               int reps) override {
    return inner_->TimeRuns(fn, warmup, reps);
  }

 protected:
  Device& inner() const { return *inner_; }

 private:
  Device* inner_;
};

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_FORWARDING_DEVICE_H_
