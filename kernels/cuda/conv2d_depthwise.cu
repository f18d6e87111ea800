// cuda.conv2d.depthwise_direct: depthwise conv2d (groups == C == K) for NHWC and NCHW, FP32/FP16/BF16, any R x S,
// stride, dilation and padding. One thread per output element in the output's memory order, so in NHWC a warp
// reads 32 consecutive channels of one input pixel per tap (coalesced) and in NCHW 32 consecutive columns; FP32
// accumulation, fused epilogue, one store. Depthwise layers are memory-bound: this is the kernel MobileNet wants.
#include "kernels/cuda/conv2d_direct_common.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(256) Conv2dDepthwiseKernel(DirectConvParams<T> params) {
  const DirectConvShape& shape = params.shape;
  for (int64_t index = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; index < shape.outputs;
       index += int64_t{gridDim.x} * blockDim.x) {
    int n, k, p, q;  // output [N, K, P, Q] (logical); the input channel is k
    DecomposeOutputIndex(shape, index, n, k, p, q);
    float acc = 0.0f;
    for (int r = 0; r < shape.r; ++r) {
      const int h = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;  // input [H]
      if (h < 0 || h >= shape.h) continue;
      for (int s = 0; s < shape.s; ++s) {
        const int w = q * shape.stride_w - shape.pad_w + s * shape.dilation_w;  // input [W]
        if (w < 0 || w >= shape.w) continue;
        int64_t x_offset, w_offset;
        if (shape.nhwc) {
          x_offset = ((int64_t{n} * shape.h + h) * shape.w + w) * shape.c + k;  // [N, H, W, C]
          w_offset = (int64_t{k} * shape.r + r) * shape.s + s;                  // [K, R, S, 1]
        } else {
          x_offset = ((int64_t{n} * shape.c + k) * shape.h + h) * shape.w + w;  // [N, C, H, W]
          w_offset = (int64_t{k} * shape.r + r) * shape.s + s;                  // [K, 1, R, S]
        }
        acc += ElementToFloat<T>(params.x[x_offset]) * ElementToFloat<T>(params.w[w_offset]);
      }
    }
    params.y[index] = FloatToElement<T>(ApplyFusedEpilogue(params.epilogue, acc, k, index));
  }
}

template <typename T>
cudaError_t LaunchConv2dDepthwise(const DirectConvParams<T>& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(Conv2dDepthwiseKernel<T>, DirectConvGrid(params.shape.outputs), dim3(256), 0, stream,
                              params);
}

class CudaConv2dDepthwiseDirect final : public Conv2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.conv2d.depthwise_direct"; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const Conv2dProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!problem.is_depthwise()) return absl::UnimplementedError("needs groups == C == K (depthwise)");
    if (problem.dtype != DataType::kFloat32 && problem.dtype != DataType::kFloat16 &&
        problem.dtype != DataType::kBFloat16) {
      return absl::UnimplementedError("dtype is not FP32/FP16/BF16");
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status can = CanImplement(problem); !can.ok()) return can;
    if (absl::Status checked = CheckConv2dArgs(name(), problem, args); !checked.ok()) return checked;
    const auto stream = static_cast<cudaStream_t>(context.cuda_stream);
    return LaunchForFloatType(problem.dtype, "LaunchConv2dDepthwise", [&](auto tag) {
      using T = decltype(tag);
      return LaunchConv2dDepthwise(MakeDirectConvParams<T>(problem, args), stream);
    });
  }

  int HeuristicScore(const Conv2dProblem& problem) const override { return 50; }
};

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dDepthwiseDirect);

}  // namespace
}  // namespace convoy::cuda
