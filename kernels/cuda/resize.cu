// CUDA spatial resize (ONNX Resize over H and W): nearest, linear and cubic, every coordinate transformation,
// antialiased downscaling, FP32/FP16/BF16, NCHW and NHWC. One thread per output element: it maps its output row and
// column to source coordinates and sums the taps of both axes (resize_sampling.h, the arithmetic the CPU reference
// shares), accumulating in FP32 and normalising by the product of the two weight sums. Output writes are coalesced;
// neighbouring threads read neighbouring source elements (the same channel plane in NCHW, the same pixel in NHWC).
#include "kernels/common/resize_sampling.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct ResizeParams {
  int64_t count;  // n * c * out_h * out_w
  int channels;
  ResizeAxis axis_h, axis_w;
  float extrapolation_value;
  bool channels_last;
};

// Offset of source element (n, c, sy, sx) of x [N, C, H, W] or [N, H, W, C].
__device__ __forceinline__ int64_t SourceOffset(const ResizeParams& p, int64_t n, int c, int sy, int sx) {
  return p.channels_last ? ((n * p.axis_h.in + sy) * p.axis_w.in + sx) * p.channels + c
                         : ((n * p.channels + c) * p.axis_h.in + sy) * p.axis_w.in + sx;
}

// ---- kernel ----
// One output element (index i of y): FP32 arithmetic on the converted source elements. Taps with zero weight are
// skipped (they read nothing). Kept out of line from the grid-stride loop: on an H200 (CUDA 13.0), the same
// arithmetic written inline in the loop with the tap loops unguarded computed wrong sums for linear and cubic while
// the emulation was right; this form matches the CPU reference on the device (tests/gpu, docs/cuda_kernels.md).
template <typename T>
__device__ __noinline__ float ResizeOne(const T* x, const ResizeParams& p, int64_t i) {
  int64_t rest = i;
  int c, ox, oy;
  if (p.channels_last) {  // i = ((n * out_h + oy) * out_w + ox) * C + c
    c = static_cast<int>(rest % p.channels), rest /= p.channels;
    ox = static_cast<int>(rest % p.axis_w.out), rest /= p.axis_w.out;
    oy = static_cast<int>(rest % p.axis_h.out), rest /= p.axis_h.out;
  } else {  // i = ((n * C + c) * out_h + oy) * out_w + ox
    ox = static_cast<int>(rest % p.axis_w.out), rest /= p.axis_w.out;
    oy = static_cast<int>(rest % p.axis_h.out), rest /= p.axis_h.out;
    c = static_cast<int>(rest % p.channels), rest /= p.channels;
  }
  const int64_t n = rest;
  const float fy = ResizeSourceCoordinate(p.axis_h, oy), fx = ResizeSourceCoordinate(p.axis_w, ox);
  if (ResizeExtrapolates(p.axis_h, fy) || ResizeExtrapolates(p.axis_w, fx)) return p.extrapolation_value;
  if (p.axis_h.mode == ResizeMode::kNearest) {
    return ElementToFloat(x[SourceOffset(p, n, c, ResizeNearestIndex(p.axis_h, fy), ResizeNearestIndex(p.axis_w, fx))]);
  }
  const ResizeTaps ty = ResizeTapsOf(p.axis_h, fy), tx = ResizeTapsOf(p.axis_w, fx);
  float acc = 0.0f, sum_y = 0.0f, sum_x = 0.0f;
  for (int b = 0; b < tx.count; ++b) sum_x += ResizeTapWeight(p.axis_w, tx, b);
  for (int a = 0; a < ty.count; ++a) {
    const float wy = ResizeTapWeight(p.axis_h, ty, a);
    sum_y += wy;
    if (wy == 0.0f) continue;
    const int sy = ResizeTapIndex(p.axis_h, ty, a);
    float row = 0.0f;
    for (int b = 0; b < tx.count; ++b) {
      const float wx = ResizeTapWeight(p.axis_w, tx, b);
      if (wx != 0.0f) row += wx * ElementToFloat(x[SourceOffset(p, n, c, sy, ResizeTapIndex(p.axis_w, tx, b))]);
    }
    acc += wy * row;
  }
  const float norm = sum_y * sum_x;
  return norm != 0.0f ? acc / norm : 0.0f;
}

// x: [N, C, H, W] or [N, H, W, C]; y: the same with out_h, out_w.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads) ResizeKernel(const T* x, T* y, ResizeParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    y[i] = FloatToElement<T>(ResizeOne(x, p, i));
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchResize(const T* x, T* y, const ResizeParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((ResizeKernel<T>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, x, y, params);
}

// ---- entry ----
class CudaResizeDirect final : public ResizeAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.resize.direct"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ResizeProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("resize: FP32, FP16 or BF16 only");
    return absl::OkStatus();
  }
  absl::Status Run(const ResizeProblem& problem, const ResizeArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    ResizeParams params;
    params.count = int64_t{problem.n} * problem.c * problem.out_h * problem.out_w;
    params.channels = problem.c;
    params.axis_h = ResizeAxisH(problem), params.axis_w = ResizeAxisW(problem);
    params.extrapolation_value = problem.extrapolation_value;
    params.channels_last = problem.layout == Layout::kNHWC;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchResize(static_cast<const T*>(args.x), static_cast<T*>(args.y), params, StreamOf(context)),
          "ResizeKernel");
    });
  }
  int HeuristicScore(const ResizeProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ResizeOp, CudaResizeDirect);

}  // namespace
}  // namespace convoy::cuda
