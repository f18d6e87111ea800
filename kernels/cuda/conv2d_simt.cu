// cuda.conv2d.direct_simt: the CUDA fallback that implements EVERY valid conv2d (both layouts, any filter, stride,
// dilation, asymmetric padding, groups, FP32/FP16/BF16), so every problem has a CUDA algorithm. One thread per
// output element, FP32 accumulation over C/g x R x S, fused epilogue, one store. Slow next to the tensor-core
// algorithms: it is there for shapes nothing else takes (C = 3 stems in NCHW, odd channel counts, groups).
#include "kernels/cuda/conv2d_direct_common.cuh"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(256) Conv2dSimtKernel(DirectConvParams<T> params) {
  const DirectConvShape& shape = params.shape;
  const int c_per_group = shape.c / shape.groups, k_per_group = shape.k / shape.groups;
  for (int64_t index = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; index < shape.outputs;
       index += int64_t{gridDim.x} * blockDim.x) {
    int n, k, p, q;  // output [N, K, P, Q] (logical)
    DecomposeOutputIndex(shape, index, n, k, p, q);
    const int group = k / k_per_group;
    float acc = 0.0f;
    for (int r = 0; r < shape.r; ++r) {
      const int h = p * shape.stride_h - shape.pad_h + r * shape.dilation_h;  // input [H]
      if (h < 0 || h >= shape.h) continue;
      for (int s = 0; s < shape.s; ++s) {
        const int w = q * shape.stride_w - shape.pad_w + s * shape.dilation_w;  // input [W]
        if (w < 0 || w >= shape.w) continue;
        for (int cg = 0; cg < c_per_group; ++cg) {  // channel within the group [C/g]
          const int c = group * c_per_group + cg;   // input [C]
          int64_t x_offset, w_offset;
          if (shape.nhwc) {
            x_offset = ((int64_t{n} * shape.h + h) * shape.w + w) * shape.c + c;          // [N, H, W, C]
            w_offset = ((int64_t{k} * shape.r + r) * shape.s + s) * c_per_group + cg;   // [K, R, S, C/g]
          } else {
            x_offset = ((int64_t{n} * shape.c + c) * shape.h + h) * shape.w + w;          // [N, C, H, W]
            w_offset = ((int64_t{k} * c_per_group + cg) * shape.r + r) * shape.s + s;   // [K, C/g, R, S]
          }
          acc += ElementToFloat<T>(params.x[x_offset]) * ElementToFloat<T>(params.w[w_offset]);
        }
      }
    }
    params.y[index] = FloatToElement<T>(ApplyFusedEpilogue(params.epilogue, acc, k, index));
  }
}

template <typename T>
cudaError_t LaunchConv2dSimt(const DirectConvParams<T>& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL(Conv2dSimtKernel<T>, DirectConvGrid(params.shape.outputs), dim3(256), 0, stream,
                              params);
}

class CudaConv2dDirectSimt final : public Conv2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.conv2d.direct_simt"; }
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CanImplement(const Conv2dProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
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
    return LaunchForFloatType(problem.dtype, "LaunchConv2dSimt", [&](auto tag) {
      using T = decltype(tag);
      return LaunchConv2dSimt(MakeDirectConvParams<T>(problem, args), stream);
    });
  }

  int HeuristicScore(const Conv2dProblem& problem) const override { return 1; }
  // One thread per output, every product exact in FP32: what the other CUDA algorithms are verified against.
  bool TrustedForVerification() const override { return true; }
};

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dDirectSimt);

}  // namespace
}  // namespace convoy::cuda
