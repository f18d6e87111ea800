// CUDA 2-D transposed convolution ("cuda.conv_transpose2d.direct"), FP32/FP16/BF16 with FP32 accumulation, NCHW or
// NHWC activations, filter [C, K/groups, R, S]: one thread per output element gathers the input elements whose
// filter taps reach it (oy + pad_top - r * dilation_h a non-negative multiple of stride_h, likewise for x), the
// same arithmetic as cpu.conv_transpose2d.direct. Direct rather than implicit GEMM: the transposed convolutions of
// segmentation and super-resolution heads are few and small next to the encoder's convolutions.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct ConvTransposeParams {
  int count;  // N * K * out_h * out_w (below 2^31: CanImplement; 32-bit index arithmetic has no division call)
  int n, c, h, w, k, r, s, out_h, out_w, pad_top, pad_left, stride_h, stride_w, dilation_h, dilation_w, groups;
  bool nhwc, has_bias;
};

// ---- kernel ----
// x: [N, C, H, W] (or NHWC); w: [C, K/groups, R, S]; y: [N, K, out_h, out_w] (or NHWC).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    ConvTranspose2dKernel(const T* __restrict__ x, const T* __restrict__ w, const float* __restrict__ bias,
                          T* __restrict__ y, ConvTransposeParams p) {
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  const int c_per_group = p.c / p.groups, k_per_group = p.k / p.groups;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < p.count; i += stride) {  // y position
    int rest = i;
    int ox, oy, k;
    if (p.nhwc) {
      k = static_cast<int>(rest % p.k), rest /= p.k;
      ox = static_cast<int>(rest % p.out_w), rest /= p.out_w;
      oy = static_cast<int>(rest % p.out_h), rest /= p.out_h;
    } else {
      ox = static_cast<int>(rest % p.out_w), rest /= p.out_w;
      oy = static_cast<int>(rest % p.out_h), rest /= p.out_h;
      k = static_cast<int>(rest % p.k), rest /= p.k;
    }
    const int n = rest;
    const int g = k / k_per_group, kk = k % k_per_group;
    float acc = p.has_bias ? bias[k] : 0.0f;
    for (int r = 0; r < p.r; ++r) {
      const int ty = oy + p.pad_top - r * p.dilation_h;  // iy * stride_h when a tap reaches oy
      if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= p.h) continue;
      const int iy = ty / p.stride_h;
      for (int s = 0; s < p.s; ++s) {
        const int tx = ox + p.pad_left - s * p.dilation_w;
        if (tx < 0 || tx % p.stride_w != 0 || tx / p.stride_w >= p.w) continue;
        const int ix = tx / p.stride_w;
        for (int cc = 0; cc < c_per_group; ++cc) {
          const int c = g * c_per_group + cc;
          const int xi = p.nhwc ? ((n * p.h + iy) * p.w + ix) * p.c + c : ((n * p.c + c) * p.h + iy) * p.w + ix;
          const int wi = ((c * k_per_group + kk) * p.r + r) * p.s + s;
          acc += ElementToFloat(x[xi]) * ElementToFloat(w[wi]);
        }
      }
    }
    y[i] = FloatToElement<T>(acc);
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchConvTranspose2d(const T* x, const T* w, const float* bias, T* y, const ConvTransposeParams& params,
                                  cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((ConvTranspose2dKernel<T>), dim3(GridStrideBlocks(params.count)),
                              dim3(kElementwiseThreads), 0, stream, x, w, bias, y, params);
}

// ---- entry ----
class CudaConvTranspose2dDirect final : public ConvTranspose2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.conv_transpose2d.direct"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ConvTranspose2dProblem& problem) const override {
    if (absl::Status s = problem.Validate(); !s.ok()) return s;
    const int64_t limit = int64_t{1} << 31;
    if (int64_t{problem.n} * problem.k * problem.out_h * problem.out_w >= limit ||
        int64_t{problem.n} * problem.c * problem.h * problem.w >= limit) {
      return absl::UnimplementedError("conv_transpose2d.direct: tensors of 2^31 elements or more");
    }
    return absl::OkStatus();
  }
  absl::Status Run(const ConvTranspose2dProblem& p, const ConvTranspose2dArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(p); !s.ok()) return s;
    if (absl::Status s = CheckArgs(p, {{"x", args.x}, {"w", args.w}, {"y", args.y}}); !s.ok()) return s;
    if (p.has_bias) {
      if (absl::Status s = CheckArgs(p, {{"bias (has_bias)", args.bias}}); !s.ok()) return s;
    }
    const ConvTransposeParams params{p.n * p.k * p.out_h * p.out_w,
                                     p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.out_h, p.out_w, p.pad_top, p.pad_left,
                                     p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.groups,
                                     p.layout == Layout::kNHWC, p.has_bias};
    return DispatchFloatType(p.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchConvTranspose2d(static_cast<const T*>(args.x), static_cast<const T*>(args.w),
                                                args.bias, static_cast<T*>(args.y), params, StreamOf(context)),
                          "ConvTranspose2dKernel");
    });
  }
  int HeuristicScore(const ConvTranspose2dProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ConvTranspose2dOp, CudaConvTranspose2dDirect);

}  // namespace
}  // namespace convoy::cuda
