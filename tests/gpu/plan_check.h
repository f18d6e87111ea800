// The GPU check's whole-plan section: the planner and executor on the device (the server's GPU path), step by step
// and as CUDA graphs, against the reference interpreter; and the time a launch-bound plan takes each way.
#ifndef CONVOY_TESTS_GPU_PLAN_CHECK_H_
#define CONVOY_TESTS_GPU_PLAN_CHECK_H_

#include "kernels/cuda/cuda_device.h"
#include "tests/gpu/case_runner.h"

namespace convoy::gpu_check {

// quick: fewer batch sizes and timing runs (the emulated CI run).
void CheckPlans(cuda::CudaDevice& device, bool quick, CaseRunner& cases);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_PLAN_CHECK_H_
