// CUDA image pre-processing: UINT8 [N, H, W, C] (C <= 4) -> (x / 255 - mean[c]) / stddev[c] (or without the / 255) in
// FP32/FP16/BF16, NCHW or NHWC (NHWC optionally padded with zero channels to dst_c, for a tensor-core stem). The per-channel affine map x * a[c] + b[c] is folded on the host and travels in the
// params struct (no device memory). One thread per output element, so the writes are coalesced in either layout; the
// byte reads are gathered (NCHW) or contiguous (NHWC).
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct PreprocessParams {
  int64_t count;  // n * h * w * out_channels
  int64_t plane;  // h * w
  int channels;   // c of the input
  int out_channels;  // c of the output (channels last only: > channels pads with zeros)
  bool channels_last;
  float a[PreprocessProblem::kMaxChannels];  // multiplier per channel
  float b[PreprocessProblem::kMaxChannels];  // offset per channel
};

// ---- kernel ----
// x: [N, H, W, C] UINT8; y: [N, C, H, W] or [N, H, W, C] of T.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    PreprocessKernel(const uint8_t* __restrict__ x, T* __restrict__ y, PreprocessParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {  // y element
    int c;
    int64_t source;
    if (p.channels_last) {  // i = pixel * out_channels + c
      c = static_cast<int>(i % p.out_channels);
      source = (i / p.out_channels) * p.channels + c;
    } else {  // i = (n * C + c) * H*W + hw
      const int64_t hw = i % p.plane, nc = i / p.plane;
      c = static_cast<int>(nc % p.channels);
      source = ((nc / p.channels) * p.plane + hw) * p.channels + c;
    }
    const float value = c < p.channels ? static_cast<float>(x[source]) * p.a[c] + p.b[c] : 0.0f;  // padding: zeros
    y[i] = FloatToElement<T>(value);
  }
}

// ---- launcher ----
template <typename T>
cudaError_t LaunchPreprocess(const uint8_t* x, T* y, const PreprocessParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((PreprocessKernel<T>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads),
                              0, stream, x, y, params);
}

// ---- entry ----
class CudaPreprocessElementwise final : public PreprocessAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.preprocess.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const PreprocessProblem& problem) const override {
    if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
    if (!IsFloatingPoint(problem.dst_dtype)) return absl::UnimplementedError("preprocess: FP32/FP16/BF16 output only");
    if (problem.output_c() != problem.c && problem.dst_layout != Layout::kNHWC) {
      return absl::UnimplementedError("preprocess: channel padding only into NHWC");
    }
    return absl::OkStatus();
  }
  absl::Status Run(const PreprocessProblem& problem, const PreprocessArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    PreprocessParams params;
    params.plane = int64_t{problem.h} * problem.w;
    params.count = int64_t{problem.n} * params.plane * problem.output_c();
    params.channels = problem.c;
    params.out_channels = problem.output_c();
    params.channels_last = problem.dst_layout == Layout::kNHWC;
    const double unit = problem.scale_to_unit ? 1.0 / 255.0 : 1.0;
    for (int c = 0; c < PreprocessProblem::kMaxChannels; ++c) {
      const bool used = c < problem.c;
      params.a[c] = used ? static_cast<float>(unit / problem.stddev[c]) : 0.0f;
      params.b[c] = used ? static_cast<float>(-double{problem.mean[c]} / problem.stddev[c]) : 0.0f;
    }
    return DispatchFloatType(problem.dst_dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchPreprocess(args.x, static_cast<T*>(args.y), params, StreamOf(context)),
                          "PreprocessKernel");
    });
  }
  int HeuristicScore(const PreprocessProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(PreprocessOp, CudaPreprocessElementwise);

}  // namespace
}  // namespace convoy::cuda
