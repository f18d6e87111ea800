// Test-only CUDA algorithms that fault on purpose, for the GPU check's fault-isolation test
// (//tests/gpu:gpu_check_faults_test): linked only into //tests/gpu:gpu_check_emulated_with_faults, never into a
// server or the real check.
//   cuda.activation.fault_trap           __trap() in every thread: on a GPU a sticky cudaErrorLaunchFailure that
//                                        leaves the context unusable (emulated with sticky faults on, as the check
//                                        sets them), so the phase must continue in a new process
//   cuda.activation.fault_out_of_bounds  a store to address 16: on a GPU a sticky cudaErrorIllegalAddress; in the
//                                        emulation (host memory) a SIGSEGV that kills the process mid-case
// Both implement exactly one problem of the shared list (37 FP32 elements, ReLU) and score 0, so nothing but the
// check's every-algorithm loop ever runs them, and the cases after them show that the report goes on.
#include "kernels/common/status_macros.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

__global__ void TrapKernel(float* y) {
  __trap();
  y[threadIdx.x] = 0.0f;  // not reached
}

// y, address: the output (unused) and the bad address written instead of it.
__global__ void OutOfBoundsKernel(float* y, uintptr_t address) {
  if (threadIdx.x == 0) *reinterpret_cast<volatile float*>(address) = y == nullptr ? 0.0f : 1.0f;
}

absl::Status FaultProblemOnly(const ActivationProblem& problem) {
  if (problem.count == 37 && problem.dtype == DataType::kFloat32 && problem.activation == Activation::Relu()) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError("fault injection: only the 37-element FP32 ReLU problem");
}

template <bool kTrap>
class FaultingActivation final : public ActivationAlgorithm {
 public:
  absl::string_view name() const override {
    return kTrap ? "cuda.activation.fault_trap" : "cuda.activation.fault_out_of_bounds";
  }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ActivationProblem& problem) const override { return FaultProblemOnly(problem); }
  absl::Status Run(const ActivationProblem& problem, const ActivationArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(CanImplement(problem));
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    float* y = static_cast<float*>(args.y);
    if constexpr (kTrap) {
      CONVOY_RETURN_IF_CUDA_ERROR(CONVOY_LAUNCH_KERNEL(TrapKernel, dim3(1), dim3(32), 0, stream, y));
    } else {
      CONVOY_RETURN_IF_CUDA_ERROR(
          CONVOY_LAUNCH_KERNEL(OutOfBoundsKernel, dim3(1), dim3(32), 0, stream, y, uintptr_t{16}));
    }
    return absl::OkStatus();
  }
  int HeuristicScore(const ActivationProblem&) const override { return 0; }
};

using FaultTrap = FaultingActivation<true>;
using FaultOutOfBounds = FaultingActivation<false>;
CONVOY_REGISTER_ALGORITHM(ActivationOp, FaultTrap);
CONVOY_REGISTER_ALGORITHM(ActivationOp, FaultOutOfBounds);

}  // namespace
}  // namespace convoy::cuda
