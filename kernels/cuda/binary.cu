// CUDA binary element-wise op with broadcast and activation: y = act(a OP b), OP in add/sub/mul/div; b has a's shape,
// is [N, C] (per image and channel, squeeze-excitation), [C] or a scalar; FP32/FP16/BF16 (computed in FP32), NCHW and
// NHWC; y may alias a. Four elements per vector access of a and y when aligned (b is gathered per element: it is a
// broadcast operand and stays in cache), the remainder one by one.
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

// b's index of flat element i of a is ((i / div0) % mod0) * mul0 + ((i / div1) % mod1) * mul1: one formula for every
// broadcast and layout (see MakeBroadcastTerms), so the kernel has no per-broadcast branches for the compiler to
// unswitch into a copy of the loop each.
struct BinaryParams {
  int64_t count;  // n * c * h * w
  int64_t div0, mod0, mul0, div1, mod1, mul1;
  BinaryOp op;
  Activation activation;
};

__device__ __forceinline__ int64_t BroadcastIndex(int64_t i, const BinaryParams& p) {
  return ((i / p.div0) % p.mod0) * p.mul0 + ((i / p.div1) % p.mod1) * p.mul1;
}

// Selects rather than a switch: every result is cheap next to the memory traffic, and selects keep one loop body.
__device__ __forceinline__ float Combine(float a, float b, BinaryOp op) {
  const float sum = a + (op == BinaryOp::kSub ? -b : b);
  const float product = a * b;
  const float quotient = a / b;
  return op == BinaryOp::kMul ? product : (op == BinaryOp::kDiv ? quotient : sum);
}

// ---- kernel ----
// a, y: [N, C, H, W] or [N, H, W, C] flat (y may alias a); b: see BinaryProblem.
template <typename T, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads)
    BinaryKernel(const T* a, const T* __restrict__ b, T* y, BinaryParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? params.count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    Pack4<T> v = reinterpret_cast<const Pack4<T>*>(a)[p];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float bv = ElementToFloat(b[BroadcastIndex(4 * p + j, params)]);
      v.v[j] = FloatToElement<T>(ApplyActivation(Combine(ElementToFloat(v.v[j]), bv, params.op), params.activation));
    }
    reinterpret_cast<Pack4<T>*>(y)[p] = v;
  }
  for (int64_t i = packs * 4 + first; i < params.count; i += stride) {  // i: flat element index
    const float v = Combine(ElementToFloat(a[i]), ElementToFloat(b[BroadcastIndex(i, params)]), params.op);
    y[i] = FloatToElement<T>(ApplyActivation(v, params.activation));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchBinary(const T* a, const T* b, T* y, const BinaryParams& params, cudaStream_t stream) {
  return LaunchPackedOrScalar(IsPack4Aligned<T>({a, y}), params.count, BinaryKernel<T, true>, BinaryKernel<T, false>,
                              stream, a, b, y, params);
}

// The index terms of BroadcastIndex for the problem's broadcast and layout.
BinaryParams MakeBroadcastTerms(const BinaryProblem& problem) {
  constexpr int64_t kNoWrap = INT64_MAX;
  const int64_t plane = int64_t{problem.h} * problem.w, channels = problem.c;
  const bool nhwc = problem.layout == Layout::kNHWC;
  BinaryParams p{};
  p.div0 = 1, p.mod0 = kNoWrap, p.mul0 = 0, p.div1 = 1, p.mod1 = kNoWrap, p.mul1 = 0;
  switch (problem.broadcast) {
    case BinaryBroadcast::kNone:  // b[i]
      p.mul0 = 1;
      break;
    case BinaryBroadcast::kPerImageChannel:  // b[n * C + c]
      if (nhwc) {
        p.div0 = plane * channels, p.mul0 = channels;  // n * C
        p.mod1 = channels, p.mul1 = 1;                 // + c
      } else {
        p.div0 = plane, p.mul0 = 1;  // i / (H*W) = n * C + c
      }
      break;
    case BinaryBroadcast::kPerChannel:  // b[c]
      p.div0 = nhwc ? 1 : plane, p.mod0 = channels, p.mul0 = 1;
      break;
    case BinaryBroadcast::kScalar:  // b[0]
      break;
  }
  return p;
}

// ---- entry ----
class CudaBinaryElementwise final : public BinaryAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.binary.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const BinaryProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("binary: FP32, FP16 or BF16 only");
    return absl::OkStatus();
  }
  absl::Status Run(const BinaryProblem& problem, const BinaryArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"a", args.a}, {"b", args.b}, {"y", args.y}}); !s.ok()) return s;
    BinaryParams params = MakeBroadcastTerms(problem);
    params.count = problem.desc().num_elements();
    params.op = problem.op;
    params.activation = problem.activation;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchBinary(static_cast<const T*>(args.a), static_cast<const T*>(args.b),
                                       static_cast<T*>(args.y), params, StreamOf(context)),
                          "BinaryKernel");
    });
  }
  int HeuristicScore(const BinaryProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(BinaryElementwiseOp, CudaBinaryElementwise);

}  // namespace
}  // namespace convoy::cuda
