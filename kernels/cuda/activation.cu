// CUDA activation over a flat array: y[i] = act(x[i]), FP32/FP16/BF16 (computed in FP32), in place allowed.
// Grid-stride; four elements per vector load/store when x and y are aligned for it (checked per Run), the
// remainder (count % 4) element by element.
#include "kernels/common/epilogue.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct ActivationParams {
  int64_t count;  // elements of x and y
  Activation activation;
};

// ---- kernel ----
// x, y: [count] (y may alias x, so neither is __restrict__).
template <typename T, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads) ActivationKernel(const T* x, T* y, ActivationParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? params.count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    Pack4<T> v = reinterpret_cast<const Pack4<T>*>(x)[p];
#pragma unroll
    for (int j = 0; j < 4; ++j) v.v[j] = FloatToElement<T>(ApplyActivation(ElementToFloat(v.v[j]), params.activation));
    reinterpret_cast<Pack4<T>*>(y)[p] = v;
  }
  for (int64_t i = packs * 4 + first; i < params.count; i += stride) {  // i: element index
    y[i] = FloatToElement<T>(ApplyActivation(ElementToFloat(x[i]), params.activation));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchActivation(const T* x, T* y, const ActivationParams& params, cudaStream_t stream) {
  return LaunchPackedOrScalar(IsPack4Aligned<T>({x, y}), params.count, ActivationKernel<T, true>,
                              ActivationKernel<T, false>, stream, x, y, params);
}

// ---- entry ----
class CudaActivationElementwise final : public ActivationAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.activation.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ActivationProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("activation: FP32, FP16 or BF16 only");
    return absl::OkStatus();
  }
  absl::Status Run(const ActivationProblem& problem, const ActivationArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const ActivationParams params{problem.count, problem.activation};
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchActivation(static_cast<const T*>(args.x), static_cast<T*>(args.y), params, StreamOf(context)),
          "ActivationKernel");
    });
  }
  int HeuristicScore(const ActivationProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ActivationOp, CudaActivationElementwise);

}  // namespace
}  // namespace convoy::cuda
