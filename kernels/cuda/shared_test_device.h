// One CudaDevice (device 0) per test process, created on first use and never destroyed, for tests that run many
// kernels or models on the same (emulated or real) GPU. Aborts the test process, printing the status, when there is
// no device: use it only in tests that must have one (the emulated ones always do).
//
//   cuda::CudaDevice& gpu = cuda::SharedTestDevice();
#ifndef CONVOY_KERNELS_CUDA_SHARED_TEST_DEVICE_H_
#define CONVOY_KERNELS_CUDA_SHARED_TEST_DEVICE_H_

#include "kernels/cuda/cuda_device.h"

namespace convoy::cuda {

CudaDevice& SharedTestDevice();

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_SHARED_TEST_DEVICE_H_
