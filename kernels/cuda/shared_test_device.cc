// The test process's shared CudaDevice (see shared_test_device.h).
#include "kernels/cuda/shared_test_device.h"

#include <cstdlib>
#include <iostream>

namespace convoy::cuda {

CudaDevice& SharedTestDevice() {
  static CudaDevice* device = [] {
    absl::StatusOr<std::unique_ptr<CudaDevice>> created = CudaDevice::Create({});
    if (!created.ok()) {
      std::cerr << "CudaDevice::Create: " << created.status() << "\n";
      std::abort();
    }
    return created->release();
  }();
  return *device;
}

}  // namespace convoy::cuda
