// CUDA unary element-wise functions ("cuda.unary.elementwise"): unary_function.h's ApplyUnary (the CPU kernel's
// function) over a flat buffer, one grid-stride loop, FP32/FP16/BF16 computed in FP32; in place allowed.
#include "kernels/common/unary_function.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct UnaryParams {
  int64_t count;
  UnaryKind kind;
  float alpha, beta;
};

// ---- kernel ----
// x, y: [count].
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads) UnaryKernel(const T* x, T* y, UnaryParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    y[i] = FloatToElement<T>(ApplyUnary(ElementToFloat(x[i]), p.kind, p.alpha, p.beta));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchUnary(const T* x, T* y, const UnaryParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((UnaryKernel<T>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, x, y, params);
}

// ---- entry ----
class CudaUnaryElementwise final : public UnaryAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.unary.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const UnaryProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const UnaryProblem& p, const UnaryArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(p); !s.ok()) return s;
    if (absl::Status s = CheckArgs(p, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const UnaryParams params{p.count, p.kind, p.alpha, p.beta};
    return DispatchFloatType(p.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchUnary(static_cast<const T*>(args.x), static_cast<T*>(args.y), params,
                                      StreamOf(context)),
                          "UnaryKernel");
    });
  }
  int HeuristicScore(const UnaryProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(UnaryOp, CudaUnaryElementwise);

}  // namespace
}  // namespace convoy::cuda
