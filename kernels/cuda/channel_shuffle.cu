// CUDA channel shuffle (ShuffleNet): y[:, j * g + i] = x[:, i * (C / g) + j], any dtype (moved as raw bits), NCHW and
// NHWC. One thread per output element (writes coalesced); NCHW reads are whole planes moved between channels, NHWC
// reads a permutation within each pixel's channel vector.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct ChannelShuffleParams {
  int64_t count;  // n * c * h * w
  int64_t plane;  // h * w
  int channels;   // c
  int groups;     // g
  bool channels_last;
};

// ---- kernel ----
// x, y: [N, C, H, W] or [N, H, W, C].
template <typename U>
__global__ void __launch_bounds__(kElementwiseThreads)
    ChannelShuffleKernel(const U* __restrict__ x, U* __restrict__ y, ChannelShuffleParams params) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int per_group = params.channels / params.groups;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < params.count; i += stride) {  // y element
    const int out_c = static_cast<int>(params.channels_last ? i % params.channels
                                                            : (i / params.plane) % params.channels);
    const int in_c = (out_c % params.groups) * per_group + out_c / params.groups;  // y[j*g + i] = x[i*(C/g) + j]
    const int64_t delta = int64_t{in_c - out_c} * (params.channels_last ? 1 : params.plane);
    y[i] = x[i + delta];
  }
}

// ---- launcher ----
template <typename U>
cudaError_t LaunchChannelShuffle(const U* x, U* y, const ChannelShuffleParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((ChannelShuffleKernel<U>), dim3(GridStrideBlocks(params.count)),
                              dim3(kElementwiseThreads), 0, stream, x, y, params);
}

// ---- entry ----
class CudaChannelShuffleCopy final : public ChannelShuffleAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.channel_shuffle.copy"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ChannelShuffleProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ChannelShuffleProblem& problem, const ChannelShuffleArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    if (args.x == args.y) return absl::InvalidArgumentError(problem.ToString() + ": cannot shuffle in place");
    ChannelShuffleParams params;
    params.plane = int64_t{problem.h} * problem.w;
    params.count = int64_t{problem.n} * problem.c * params.plane;
    params.channels = problem.c;
    params.groups = problem.groups;
    params.channels_last = problem.layout == Layout::kNHWC;
    return DispatchElementSize(problem.dtype, [&](auto tag) {
      using U = decltype(tag);
      return LaunchStatus(LaunchChannelShuffle(static_cast<const U*>(args.x), static_cast<U*>(args.y), params,
                                               StreamOf(context)),
                          "ChannelShuffleKernel");
    });
  }
  int HeuristicScore(const ChannelShuffleProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ChannelShuffleOp, CudaChannelShuffleCopy);

}  // namespace
}  // namespace convoy::cuda
