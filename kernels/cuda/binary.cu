// CUDA binary element-wise op with broadcast and activation: y = act(a OP b), OP in add/sub/mul/div; b has a's shape,
// is [N, C] (per image and channel, squeeze-excitation), [C] or a scalar; FP32/FP16/BF16 (computed in FP32), NCHW and
// NHWC; y may alias a. Four elements per vector access of a and y when aligned (b is gathered per element: it is a
// broadcast operand and stays in cache), the remainder one by one.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct BinaryParams {
  int64_t count;  // n * c * h * w
  int64_t plane;  // h * w
  int channels;   // c
  bool channels_last;
  BinaryOp op;
  BinaryBroadcast broadcast;
  Activation activation;
};

// Index into b of flat element i of a.
__device__ __forceinline__ int64_t BroadcastIndex(int64_t i, const BinaryParams& p) {
  switch (p.broadcast) {
    case BinaryBroadcast::kNone:
      return i;
    case BinaryBroadcast::kPerImageChannel: {
      if (!p.channels_last) return i / p.plane;  // NCHW: i / (H*W) = n * C + c
      const int64_t image_size = p.plane * p.channels;
      return (i / image_size) * p.channels + i % p.channels;  // NHWC: n * C + c
    }
    case BinaryBroadcast::kPerChannel:
      return p.channels_last ? i % p.channels : (i / p.plane) % p.channels;
    case BinaryBroadcast::kScalar:
      return 0;
  }
  return 0;
}

__device__ __forceinline__ float Combine(float a, float b, BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
  }
  return a;
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
      const float bv = LoadAsFloat(b[BroadcastIndex(4 * p + j, params)]);
      v.v[j] = FloatAsElement<T>(ApplyActivation(Combine(LoadAsFloat(v.v[j]), bv, params.op), params.activation));
    }
    reinterpret_cast<Pack4<T>*>(y)[p] = v;
  }
  for (int64_t i = packs * 4 + first; i < params.count; i += stride) {  // i: flat element index
    const float v = Combine(LoadAsFloat(a[i]), LoadAsFloat(b[BroadcastIndex(i, params)]), params.op);
    y[i] = FloatAsElement<T>(ApplyActivation(v, params.activation));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchBinary(const T* a, const T* b, T* y, const BinaryParams& params, cudaStream_t stream) {
  const bool packed = IsPack4Aligned<T>({a, y});
  const unsigned blocks = GridStrideBlocks(packed ? params.count / 4 + 3 : params.count);
  if (packed) {
    return CONVOY_LAUNCH_KERNEL((BinaryKernel<T, true>), dim3(blocks), dim3(kElementwiseThreads), 0, stream, a, b, y,
                                params);
  }
  return CONVOY_LAUNCH_KERNEL((BinaryKernel<T, false>), dim3(blocks), dim3(kElementwiseThreads), 0, stream, a, b, y,
                              params);
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
    BinaryParams params;
    params.count = problem.desc().num_elements();
    params.plane = int64_t{problem.h} * problem.w;
    params.channels = problem.c;
    params.channels_last = problem.layout == Layout::kNHWC;
    params.op = problem.op;
    params.broadcast = problem.broadcast;
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
