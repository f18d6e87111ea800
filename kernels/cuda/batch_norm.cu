// CUDA inference batch norm + activation: y = act((x - mean[c]) * gamma[c] / sqrt(var[c] + eps) + beta[c]), FP32/FP16/
// BF16 (computed in FP32), NCHW and NHWC, in place allowed. Element-wise over the flat tensor with the channel derived
// from the index; four elements per vector access when aligned, the rest one by one. No workspace: the per-channel
// factors are recomputed per element from the (cached) statistics, which costs less than a second pass.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct BatchNormParams {
  int64_t count;       // n * c * h * w
  int64_t plane;       // h * w
  int channels;        // c
  bool channels_last;  // NHWC: c = i % C; NCHW: c = (i / (H*W)) % C
  float epsilon;
  Activation activation;
  const float* gamma;  // [C]
  const float* beta;   // [C]
  const float* mean;   // [C]
  const float* var;    // [C]
};

__device__ __forceinline__ float NormalizeOne(float x, int64_t i, const BatchNormParams& p) {
  const int c = static_cast<int>(p.channels_last ? i % p.channels : (i / p.plane) % p.channels);  // channel of i
  const float scale = p.gamma[c] / sqrtf(p.var[c] + p.epsilon);
  return ApplyActivation((x - p.mean[c]) * scale + p.beta[c], p.activation);
}

// ---- kernel ----
// x, y: [N, C, H, W] or [N, H, W, C] flat (y may alias x).
template <typename T, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads) BatchNormKernel(const T* x, T* y, BatchNormParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? params.count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    Pack4<T> v = reinterpret_cast<const Pack4<T>*>(x)[p];
#pragma unroll
    for (int j = 0; j < 4; ++j) v.v[j] = FloatToElement<T>(NormalizeOne(ElementToFloat(v.v[j]), 4 * p + j, params));
    reinterpret_cast<Pack4<T>*>(y)[p] = v;
  }
  for (int64_t i = packs * 4 + first; i < params.count; i += stride) {  // i: flat element index
    y[i] = FloatToElement<T>(NormalizeOne(ElementToFloat(x[i]), i, params));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchBatchNorm(const T* x, T* y, const BatchNormParams& params, cudaStream_t stream) {
  return LaunchPackedOrScalar(IsPack4Aligned<T>({x, y}), params.count, BatchNormKernel<T, true>,
                              BatchNormKernel<T, false>, stream, x, y, params);
}

// ---- entry ----
class CudaBatchNormElementwise final : public BatchNormAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.batch_norm.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const BatchNormProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("batch_norm: FP32, FP16 or BF16 only");
    return absl::OkStatus();
  }
  absl::Status Run(const BatchNormProblem& problem, const BatchNormArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x},
                                             {"gamma", args.gamma},
                                             {"beta", args.beta},
                                             {"mean", args.mean},
                                             {"var", args.var},
                                             {"y", args.y}});
        !s.ok()) {
      return s;
    }
    BatchNormParams params;
    params.count = problem.desc().num_elements();
    params.plane = int64_t{problem.h} * problem.w;
    params.channels = problem.c;
    params.channels_last = problem.layout == Layout::kNHWC;
    params.epsilon = problem.epsilon;
    params.activation = problem.activation;
    params.gamma = args.gamma, params.beta = args.beta, params.mean = args.mean, params.var = args.var;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchBatchNorm(static_cast<const T*>(args.x), static_cast<T*>(args.y), params, StreamOf(context)),
          "BatchNormKernel");
    });
  }
  int HeuristicScore(const BatchNormProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(BatchNormOp, CudaBatchNormElementwise);

}  // namespace
}  // namespace convoy::cuda
