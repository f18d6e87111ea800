// The GPU check's correctness phases: every CUDA algorithm of one op against the CPU reference on the device (the
// shared cross-backend case runner, fresh random inputs, NaN-poisoned outputs, the suite's tolerances), run directly
// and again recorded into a CUDA graph on a stream of its own and replayed (as plans with cuda_graphs run them).
// conv2d and GEMM also run the Hopper-aimed shapes (conv2d_gemm_test_problems.h; not with --quick), and each Hopper
// (sm_90a, tensor map) algorithm runs every problem whose tensors are all under 128 KiB 20 times on the device
// against one reference (twice with --quick): the case's label carries "x20", and a failure says how many
// repetitions failed.
//
// Phases (one process each, see supervisor.h): "ops.<op>" for every op of ForEachOp (kernels/registry/algorithm.h),
// "ops.quantized_conv2d" (the INT8 convolutions on the shared INT8 problem list,
// kernels/testing/quantized_conv2d_cases.h, bit-exact against the integer reference, with the multipliers in the
// arguments and fixed in the problem; not recorded into a graph), "ops.quantized_steps" (the quantize / dequantize
// converts and the quantized add of INT8 plans, kernels/testing/quantized_step_cases.h, exact) and "ops.conv2d_full"
// (three full-size ResNet-50 layers at batch 1 in FP16, for the tensor-core kernels).
#ifndef CONVOY_TESTS_GPU_OPS_CHECK_H_
#define CONVOY_TESTS_GPU_OPS_CHECK_H_

#include <string>
#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "tests/gpu/case_runner.h"

namespace convoy::gpu_check {

// The names of the correctness phases, in the order they run.
std::vector<std::string> OpsPhaseNames(bool quick);
// Runs one of them; false when `phase` is not one.
bool RunOpsPhase(const std::string& phase, bool quick, cuda::CudaDevice& device, CaseRunner& cases);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_OPS_CHECK_H_
