// CUDA softmax along the middle axis of [outer, axis, inner], max-subtracted, FP32/FP16/BF16 (computed in FP32 with
// expf). Two algorithms:
//
//   cuda.softmax.warp_per_row     inner == 1 ([N, C] classifier heads): one warp per row, lanes stride the row, the
//                                 max and the sum combined with __shfl_xor_sync; 4 rows per 128-thread block.
//   cuda.softmax.strided_columns  any inner: one thread per (outer, inner) column walking the axis with stride inner
//                                 (neighbouring threads read neighbouring addresses). Used for NCHW softmax along C.
#include <cmath>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct SoftmaxParams {
  int64_t outer, axis, inner;
};

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;  // in every lane
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;  // in every lane
}

inline constexpr int kRowsPerBlock = 4;

// ---- kernels ----
// x, y: [outer, axis] (inner == 1). The warp is uniform in `row`, so all lanes reach the shuffles together.
template <typename T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    SoftmaxWarpPerRowKernel(const T* __restrict__ x, T* __restrict__ y, SoftmaxParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * kRowsPerBlock;
  for (int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32; row < p.outer; row += warps) {
    const T* in = x + row * p.axis;  // [axis]
    T* out = y + row * p.axis;       // [axis]
    float max_value = -INFINITY;
    for (int64_t a = lane; a < p.axis; a += 32) max_value = fmaxf(max_value, ElementToFloat(in[a]));
    max_value = WarpMax(max_value);
    float sum = 0.0f;
    for (int64_t a = lane; a < p.axis; a += 32) sum += expf(ElementToFloat(in[a]) - max_value);
    const float inverse = 1.0f / WarpSum(sum);
    for (int64_t a = lane; a < p.axis; a += 32) out[a] = FloatToElement<T>(expf(ElementToFloat(in[a]) - max_value) * inverse);
  }
}

// x, y: [outer, axis, inner]; one thread per column (o, i).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    SoftmaxColumnsKernel(const T* __restrict__ x, T* __restrict__ y, SoftmaxParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t column = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; column < p.outer * p.inner;
       column += stride) {
    const int64_t o = column / p.inner, i = column % p.inner;
    const int64_t base = o * p.axis * p.inner + i;  // element (o, 0, i)
    float max_value = -INFINITY;
    for (int64_t a = 0; a < p.axis; ++a) max_value = fmaxf(max_value, ElementToFloat(x[base + a * p.inner]));
    float sum = 0.0f;
    for (int64_t a = 0; a < p.axis; ++a) sum += expf(ElementToFloat(x[base + a * p.inner]) - max_value);
    const float inverse = 1.0f / sum;
    for (int64_t a = 0; a < p.axis; ++a) {
      y[base + a * p.inner] = FloatToElement<T>(expf(ElementToFloat(x[base + a * p.inner]) - max_value) * inverse);
    }
  }
}

// ---- launchers ----
template <typename T>
cudaError_t LaunchSoftmaxWarpPerRow(const T* x, T* y, const SoftmaxParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((SoftmaxWarpPerRowKernel<T>), dim3(GridStrideBlocks(params.outer, kRowsPerBlock)),
                              dim3(kRowsPerBlock * 32), 0, stream, x, y, params);
}

template <typename T>
cudaError_t LaunchSoftmaxColumns(const T* x, T* y, const SoftmaxParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((SoftmaxColumnsKernel<T>), dim3(GridStrideBlocks(params.outer * params.inner)),
                              dim3(kElementwiseThreads), 0, stream, x, y, params);
}

absl::Status CheckSoftmaxProblem(const SoftmaxProblem& problem) {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("softmax: FP32, FP16 or BF16 only");
  return absl::OkStatus();
}

// ---- entries ----
class CudaSoftmaxWarpPerRow final : public SoftmaxAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.softmax.warp_per_row"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const SoftmaxProblem& problem) const override {
    if (absl::Status s = CheckSoftmaxProblem(problem); !s.ok()) return s;
    if (problem.inner != 1) return absl::UnimplementedError("warp_per_row: inner must be 1 ([N, C] rows)");
    return absl::OkStatus();
  }
  absl::Status Run(const SoftmaxProblem& problem, const SoftmaxArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const SoftmaxParams params{problem.outer, problem.axis, problem.inner};
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchSoftmaxWarpPerRow(static_cast<const T*>(args.x), static_cast<T*>(args.y), params,
                                                  StreamOf(context)),
                          "SoftmaxWarpPerRowKernel");
    });
  }
  int HeuristicScore(const SoftmaxProblem&) const override { return 20; }
};

class CudaSoftmaxStridedColumns final : public SoftmaxAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.softmax.strided_columns"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const SoftmaxProblem& problem) const override { return CheckSoftmaxProblem(problem); }
  absl::Status Run(const SoftmaxProblem& problem, const SoftmaxArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const SoftmaxParams params{problem.outer, problem.axis, problem.inner};
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(LaunchSoftmaxColumns(static_cast<const T*>(args.x), static_cast<T*>(args.y), params,
                                               StreamOf(context)),
                          "SoftmaxColumnsKernel");
    });
  }
  int HeuristicScore(const SoftmaxProblem& problem) const override { return problem.inner == 1 ? 5 : 10; }
};

CONVOY_REGISTER_ALGORITHM(SoftmaxOp, CudaSoftmaxWarpPerRow);
CONVOY_REGISTER_ALGORITHM(SoftmaxOp, CudaSoftmaxStridedColumns);

}  // namespace
}  // namespace convoy::cuda
