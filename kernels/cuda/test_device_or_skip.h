// A CudaDevice for tests built twice, against the CUDA emulation and against nvcc: the emulated build always has
// one; the nvcc build on a machine without a GPU skips the test, saying so. The test target brings the CudaDevice
// library (:cuda_device_emulated or :cuda_device) and gtest.
//
//   TEST(MyCudaTest, Runs) {
//     CONVOY_CREATE_DEVICE_OR_SKIP(device);
//     ... *device ...
//   }
#ifndef CONVOY_KERNELS_CUDA_TEST_DEVICE_OR_SKIP_H_
#define CONVOY_KERNELS_CUDA_TEST_DEVICE_OR_SKIP_H_

#include <iostream>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_device.h"

namespace convoy::cuda {

// Device 0, or nullptr (printing why) where there is none.
inline std::unique_ptr<CudaDevice> CreateTestDeviceOrNull() {
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create({});
  if (!device.ok()) {
    std::cout << "no CUDA device: " << device.status() << "\n";
    return nullptr;
  }
  std::cout << "device: " << (*device)->Identity() << "\n";
  return *std::move(device);
}

}  // namespace convoy::cuda

#define CONVOY_CREATE_DEVICE_OR_SKIP(device)                                               \
  std::unique_ptr<::convoy::cuda::CudaDevice> device = ::convoy::cuda::CreateTestDeviceOrNull(); \
  if (device == nullptr) GTEST_SKIP() << "no GPU here: the GPU build ran nothing"

#endif  // CONVOY_KERNELS_CUDA_TEST_DEVICE_OR_SKIP_H_
