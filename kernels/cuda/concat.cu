// CUDA concat along channels: copies each input into its channel range of y, any dtype (moved as raw bits), NCHW and NHWC, uneven parts. One launch per
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
    ConcatPartKernel(const U* __restrict__ part, U* __restrict__ whole, ChannelSliceParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < params.count; i += stride) {  // part element
    whole[ChannelSliceOffset(i, params)] = part[i];
  }
}

// ---- launcher ----
template <typename U>
cudaError_t LaunchConcatPart(const U* part, U* whole, const ChannelSliceParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((ConcatPartKernel<U>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, part, whole, params);
}

// ---- entry ----
class CudaConcatCopy final : public ConcatAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.concat.copy"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ConcatProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ConcatProblem& problem, const ConcatArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CheckArgs(problem, {{"y", args.y}}); !s.ok()) return s;
    return ForEachChannelSlice(problem, args.inputs, "inputs", [&](size_t j, const ChannelSliceParams& params) {
      return DispatchElementSize(problem.dtype, [&](auto tag) {
        using U = decltype(tag);
        return LaunchStatus(LaunchConcatPart(static_cast<const U*>(args.inputs[j]), static_cast<U*>(args.y), params,
                                             StreamOf(context)),
                            "ConcatPartKernel");
      });
    });
  }
  int HeuristicScore(const ConcatProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ConcatOp, CudaConcatCopy);

}  // namespace
}  // namespace convoy::cuda
