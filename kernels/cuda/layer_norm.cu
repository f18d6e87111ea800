// CUDA layer normalization along the middle axis of [outer, axis, inner], FP32/FP16/BF16 computed in FP32: the mean,
// then the variance of the deviations (two passes over the column, as the CPU kernel), then
// y = (x - mean) * inv_std_dev * scale + bias, and with write_stats the column's mean and inv_std_dev
// (inv_std_dev = rsqrtf(variance + epsilon), 2 ulp). Two algorithms:
//
//   cuda.layer_norm.warp_per_row     inner == 1 (ONNX LayerNormalization, NHWC channels): one warp per row, lanes
//                                    stride the row, the sums combined with __shfl_xor_sync; 4 rows per block.
//   cuda.layer_norm.strided_columns  any inner: one thread per (outer, inner) column walking the axis with stride
//                                    inner (neighbouring threads read neighbouring addresses): NCHW channels.
#include <cmath>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct LayerNormParams {
  int64_t outer, axis, inner;
  float inv_axis;  // 1 / axis, computed on the host (no division in the kernels: see kernel_resources.py)
  float epsilon;
  bool has_bias, write_stats;
};

__device__ __forceinline__ float LayerNormWarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;  // in every lane
}

inline constexpr int kLayerNormRowsPerBlock = 4;

// ---- kernels ----
// x, y: [outer, axis] (inner == 1); mean, inv_std_dev: [outer]. The warp is uniform in `row`, so all lanes reach the
// shuffles together.
template <typename T>
__global__ void __launch_bounds__(kLayerNormRowsPerBlock * 32)
    LayerNormWarpPerRowKernel(const T* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ bias,
                              T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ inv_out,
                              LayerNormParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * kLayerNormRowsPerBlock;
  const float inv_axis = p.inv_axis;
  for (int64_t row = int64_t{blockIdx.x} * kLayerNormRowsPerBlock + threadIdx.x / 32; row < p.outer; row += warps) {
    const T* in = x + row * p.axis;  // [axis]
    T* out = y + row * p.axis;       // [axis]
    float sum = 0.0f;
    for (int64_t a = lane; a < p.axis; a += 32) sum += ElementToFloat(in[a]);
    const float mean = LayerNormWarpSum(sum) * inv_axis;
    float squares = 0.0f;
    for (int64_t a = lane; a < p.axis; a += 32) {
      const float d = ElementToFloat(in[a]) - mean;
      squares += d * d;
    }
    const float inv_std_dev = rsqrtf(LayerNormWarpSum(squares) * inv_axis + p.epsilon);
    for (int64_t a = lane; a < p.axis; a += 32) {
      const float b = p.has_bias ? bias[a] : 0.0f;
      out[a] = FloatToElement<T>((ElementToFloat(in[a]) - mean) * inv_std_dev * scale[a] + b);
    }
    if (p.write_stats && lane == 0) {
      mean_out[row] = FloatToElement<T>(mean);
      inv_out[row] = FloatToElement<T>(inv_std_dev);
    }
  }
}

// x, y: [outer, axis, inner]; mean, inv_std_dev: [outer, inner]; one thread per column (o, i).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    LayerNormColumnsKernel(const T* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ bias,
                           T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ inv_out, LayerNormParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const float inv_axis = p.inv_axis;
  for (int64_t column = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; column < p.outer * p.inner;
       column += stride) {
    const int64_t o = column / p.inner, i = column % p.inner;
    const int64_t base = o * p.axis * p.inner + i;  // element (o, 0, i)
    float sum = 0.0f;
    for (int64_t a = 0; a < p.axis; ++a) sum += ElementToFloat(x[base + a * p.inner]);
    const float mean = sum * inv_axis;
    float squares = 0.0f;
    for (int64_t a = 0; a < p.axis; ++a) {
      const float d = ElementToFloat(x[base + a * p.inner]) - mean;
      squares += d * d;
    }
    const float inv_std_dev = rsqrtf(squares * inv_axis + p.epsilon);
    for (int64_t a = 0; a < p.axis; ++a) {
      const float b = p.has_bias ? bias[a] : 0.0f;
      y[base + a * p.inner] = FloatToElement<T>((ElementToFloat(x[base + a * p.inner]) - mean) * inv_std_dev * scale[a] + b);
    }
    if (p.write_stats) {
      mean_out[column] = FloatToElement<T>(mean);
      inv_out[column] = FloatToElement<T>(inv_std_dev);
    }
  }
}

// ---- launchers ----
template <typename T>
cudaError_t LaunchLayerNormWarpPerRow(const T* x, const float* scale, const float* bias, T* y, T* mean, T* inv,
                                      const LayerNormParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((LayerNormWarpPerRowKernel<T>),
                              dim3(GridStrideBlocks(params.outer, kLayerNormRowsPerBlock)),
                              dim3(kLayerNormRowsPerBlock * 32), 0, stream, x, scale, bias, y, mean, inv, params);
}

template <typename T>
cudaError_t LaunchLayerNormColumns(const T* x, const float* scale, const float* bias, T* y, T* mean, T* inv,
                                   const LayerNormParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((LayerNormColumnsKernel<T>), dim3(GridStrideBlocks(params.outer * params.inner)),
                              dim3(kElementwiseThreads), 0, stream, x, scale, bias, y, mean, inv, params);
}

// The problem's Validate() error, or INVALID_ARGUMENT naming a null pointer the problem needs.
absl::Status CheckLayerNormArgs(const LayerNormProblem& problem, const LayerNormArgs& args) {
  if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"scale", args.scale}, {"y", args.y}}); !s.ok()) return s;
  if (problem.has_bias) {
    if (absl::Status s = CheckArgs(problem, {{"bias (has_bias)", args.bias}}); !s.ok()) return s;
  }
  if (problem.write_stats) {
    return CheckArgs(problem, {{"mean (write_stats)", args.mean}, {"inv_std_dev (write_stats)", args.inv_std_dev}});
  }
  return absl::OkStatus();
}

LayerNormParams ParamsOf(const LayerNormProblem& p) {
  return LayerNormParams{p.outer, p.axis, p.inner, 1.0f / static_cast<float>(p.axis), p.epsilon, p.has_bias,
                         p.write_stats};
}

// ---- entries ----
class CudaLayerNormWarpPerRow final : public LayerNormAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.layer_norm.warp_per_row"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const LayerNormProblem& problem) const override {
    if (absl::Status s = problem.Validate(); !s.ok()) return s;
    if (problem.inner != 1) return absl::UnimplementedError("warp_per_row: inner must be 1 (contiguous rows)");
    return absl::OkStatus();
  }
  absl::Status Run(const LayerNormProblem& problem, const LayerNormArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckLayerNormArgs(problem, args); !s.ok()) return s;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchLayerNormWarpPerRow(static_cast<const T*>(args.x), args.scale, args.bias, static_cast<T*>(args.y),
                                    static_cast<T*>(args.mean), static_cast<T*>(args.inv_std_dev), ParamsOf(problem),
                                    StreamOf(context)),
          "LayerNormWarpPerRowKernel");
    });
  }
  int HeuristicScore(const LayerNormProblem&) const override { return 20; }
};

class CudaLayerNormStridedColumns final : public LayerNormAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.layer_norm.strided_columns"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const LayerNormProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const LayerNormProblem& problem, const LayerNormArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckLayerNormArgs(problem, args); !s.ok()) return s;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchLayerNormColumns(static_cast<const T*>(args.x), args.scale, args.bias, static_cast<T*>(args.y),
                                 static_cast<T*>(args.mean), static_cast<T*>(args.inv_std_dev), ParamsOf(problem),
                                 StreamOf(context)),
          "LayerNormColumnsKernel");
    });
  }
  int HeuristicScore(const LayerNormProblem& problem) const override { return problem.inner == 1 ? 5 : 10; }
};

CONVOY_REGISTER_ALGORITHM(LayerNormOp, CudaLayerNormWarpPerRow);
CONVOY_REGISTER_ALGORITHM(LayerNormOp, CudaLayerNormStridedColumns);

}  // namespace
}  // namespace convoy::cuda
