// CUDA split along channels: copies each channel range of x into its output, any dtype (moved as raw bits), NCHW and NHWC, uneven parts. One launch per
// part (each a grid-stride copy; all are stream-ordered and graph-capturable); NCHW parts are contiguous runs of
// part_channels*H*W elements per image, NHWC parts runs of part_channels per pixel.
#include "kernels/cuda/channel_slice.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

// ---- kernel ----
// part: [N, Cp, H, W] or [N, H, W, Cp]; whole: the same with C = total_channels.
template <typename U>
__global__ void __launch_bounds__(kElementwiseThreads)
    SplitPartKernel(U* __restrict__ part, const U* __restrict__ whole, ChannelSliceParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < params.count; i += stride) {  // part element
    part[i] = whole[ChannelSliceOffset(i, params)];
  }
}

// ---- launcher ----
template <typename U>
cudaError_t LaunchSplitPart(U* part, const U* whole, const ChannelSliceParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((SplitPartKernel<U>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, part, whole, params);
}

// ---- entry ----
class CudaSplitCopy final : public SplitAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.split.copy"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const SplitProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const SplitProblem& problem, const SplitArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}}); !s.ok()) return s;
    return ForEachChannelSlice(problem, args.outputs, "outputs", [&](size_t j, const ChannelSliceParams& params) {
      return DispatchElementSize(problem.dtype, [&](auto tag) {
        using U = decltype(tag);
        return LaunchStatus(LaunchSplitPart(static_cast<U*>(args.outputs[j]), static_cast<const U*>(args.x), params,
                                            StreamOf(context)),
                            "SplitPartKernel");
      });
    });
  }
  int HeuristicScore(const SplitProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(SplitOp, CudaSplitCopy);

}  // namespace
}  // namespace convoy::cuda
