// CUDA spatial padding: constant (value), reflect (mirror without repeating the edge) and edge (replicate), FP32/
// FP16/BF16, NCHW and NHWC, asymmetric pads. One thread per output element: output writes are coalesced, reads of the
// interior follow them.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct PadParams {
  int64_t count;  // n * c * out_h * out_w
  int channels, h, w, out_h, out_w;
  int pad_top, pad_left;
  PadMode mode;
  float value;
  bool channels_last;
};

// Source index along one axis of `size`, or -1 for the constant.
__device__ __forceinline__ int PadSource(int i, int size, PadMode mode) {
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kReflect:
      return i < 0 ? -i : 2 * (size - 1) - i;
    case PadMode::kEdge:
      return i < 0 ? 0 : size - 1;
  }
  return -1;
}

// ---- kernel ----
// x: [N, C, H, W] or [N, H, W, C]; y: the same with out_h, out_w.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    PadKernel(const T* __restrict__ x, T* __restrict__ y, PadParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const T constant = FloatToElement<T>(p.value);
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {  // y element
    int64_t rest = i;
    int c, ox, oy;
    if (p.channels_last) {  // i = ((n * out_h + oy) * out_w + ox) * C + c
      c = static_cast<int>(rest % p.channels), rest /= p.channels;
      ox = static_cast<int>(rest % p.out_w), rest /= p.out_w;
      oy = static_cast<int>(rest % p.out_h), rest /= p.out_h;
    } else {  // i = ((n * C + c) * out_h + oy) * out_w + ox
      ox = static_cast<int>(rest % p.out_w), rest /= p.out_w;
      oy = static_cast<int>(rest % p.out_h), rest /= p.out_h;
      c = static_cast<int>(rest % p.channels), rest /= p.channels;
    }
    const int64_t n = rest;
    const int sy = PadSource(oy - p.pad_top, p.h, p.mode), sx = PadSource(ox - p.pad_left, p.w, p.mode);
    if (sy < 0 || sx < 0) {
      y[i] = constant;
      continue;
    }
    const int64_t source = p.channels_last ? ((n * p.h + sy) * p.w + sx) * p.channels + c
                                           : ((n * p.channels + c) * p.h + sy) * p.w + sx;
    y[i] = x[source];
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchPad(const T* x, T* y, const PadParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((PadKernel<T>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, x, y, params);
}

// ---- entry ----
class CudaPadDirect final : public PadAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.pad.direct"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const PadProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("pad: FP32, FP16 or BF16 only");
    return absl::OkStatus();
  }
  absl::Status Run(const PadProblem& problem, const PadArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    PadParams params;
    params.count = int64_t{problem.n} * problem.c * problem.out_h() * problem.out_w();
    params.channels = problem.c, params.h = problem.h, params.w = problem.w;
    params.out_h = problem.out_h(), params.out_w = problem.out_w();
    params.pad_top = problem.pad_top, params.pad_left = problem.pad_left;
    params.mode = problem.mode;
    params.value = problem.value;
    params.channels_last = problem.layout == Layout::kNHWC;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchPad(static_cast<const T*>(args.x), static_cast<T*>(args.y), params, StreamOf(context)),
                          "PadKernel");
    });
  }
  int HeuristicScore(const PadProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(PadOp, CudaPadDirect);

}  // namespace
}  // namespace convoy::cuda
