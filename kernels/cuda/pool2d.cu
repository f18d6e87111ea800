// CUDA 2-D pooling, FP32/FP16/BF16 (accumulated in FP32), NCHW and NHWC. Two algorithms:
//
//   cuda.pool2d.direct         max / average windows (asymmetric padding, stride, dilation, ceil mode,
//                              count_include_pad) and the global modes; one thread per output element, writes
//                              coalesced in either layout.
//   cuda.pool2d.global_reduce  global average / max: NCHW one warp per (n, c) plane, lanes striding over the plane
//                              and combined with __shfl_xor_sync; NHWC one thread per (n, c) walking the pixels
//                              (neighbouring threads read neighbouring channels). Preferred for the global modes.
//
// Windows follow PyTorch: the divisor with count_include_pad is the taps inside the padded input; the taps of a window
// come from kernels/common/pool_window.h, as the CPU algorithm's.
#include <algorithm>
#include <cmath>

#include "kernels/common/pool_window.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct Pool2dParams {
  int64_t count;  // output elements: n * c * p * q
  int channels, h, w, p, q;
  int r, s, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w;
  bool is_max, count_include_pad, channels_last;
};

__device__ __forceinline__ float Combine(float acc, float v, bool is_max) { return is_max ? fmaxf(acc, v) : acc + v; }

// ---- kernels ----
// x: [N, C, H, W] or [N, H, W, C]; y: the same with (P, Q).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    Pool2dDirectKernel(const T* __restrict__ x, T* __restrict__ y, Pool2dParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {  // y element
    int64_t rest = i;
    int c, ox, oy;
    if (p.channels_last) {  // i = ((n * P + oy) * Q + ox) * C + c
      c = static_cast<int>(rest % p.channels), rest /= p.channels;
      ox = static_cast<int>(rest % p.q), rest /= p.q;
      oy = static_cast<int>(rest % p.p), rest /= p.p;
    } else {  // i = ((n * C + c) * P + oy) * Q + ox
      ox = static_cast<int>(rest % p.q), rest /= p.q;
      oy = static_cast<int>(rest % p.p), rest /= p.p;
      c = static_cast<int>(rest % p.channels), rest /= p.channels;
    }
    const int64_t n = rest;
    // The window's taps inside the input, and inside the padded input (count_include_pad divisor).
    const PoolTaps rows = PoolTapsAlong(oy * p.stride_h - p.pad_top, p.r, p.dilation_h, p.h, p.pad_bottom);
    const PoolTaps cols = PoolTapsAlong(ox * p.stride_w - p.pad_left, p.s, p.dilation_w, p.w, p.pad_right);
    float acc = p.is_max ? -INFINITY : 0.0f;
    for (int ty = 0; ty < rows.count; ++ty) {
      const int yy = rows.first + ty * p.dilation_h;  // input row
      for (int tx = 0; tx < cols.count; ++tx) {
        const int xx = cols.first + tx * p.dilation_w;  // input column
        const int64_t source = p.channels_last ? ((n * p.h + yy) * p.w + xx) * p.channels + c
                                               : ((n * p.channels + c) * p.h + yy) * p.w + xx;
        acc = Combine(acc, ElementToFloat(x[source]), p.is_max);
      }
    }
    if (!p.is_max) {
      const int divisor = p.count_include_pad ? rows.padded * cols.padded : rows.count * cols.count;
      acc /= static_cast<float>(divisor);
    }
    y[i] = FloatToElement<T>(acc);
  }
}

inline constexpr int kWarpsPerBlock = 4;

// x: [N*C, H*W] (NCHW); y: [N*C]. One warp per plane; the warp is uniform in `plane`, so all 32 lanes reach the
// shuffles together.
template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    GlobalPoolPlanesKernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t plane_size,
                           bool is_max) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t plane = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; plane < planes; plane += warps) {
    const T* row = x + plane * plane_size;  // [H*W]
    float acc = is_max ? -INFINITY : 0.0f;
    for (int64_t k = lane; k < plane_size; k += 32) acc = Combine(acc, ElementToFloat(row[k]), is_max);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      acc = Combine(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, offset), is_max);
    }
    if (lane == 0) y[plane] = FloatToElement<T>(is_max ? acc : acc / static_cast<float>(plane_size));
  }
}

// x: [N, H*W, C] (NHWC); y: [N, C]. One thread per (n, c).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    GlobalPoolChannelsLastKernel(const T* __restrict__ x, T* __restrict__ y, int64_t images, int channels,
                                 int64_t plane_size, bool is_max) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < images * channels; i += stride) {  // n*C+c
    const int64_t n = i / channels;
    const T* column = x + n * plane_size * channels + i % channels;  // stride C
    float acc = is_max ? -INFINITY : 0.0f;
    for (int64_t k = 0; k < plane_size; ++k) acc = Combine(acc, ElementToFloat(column[k * channels]), is_max);
    y[i] = FloatToElement<T>(is_max ? acc : acc / static_cast<float>(plane_size));
  }
}

// ---- launchers ----
template <typename T>
cudaError_t LaunchPool2dDirect(const T* x, T* y, const Pool2dParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((Pool2dDirectKernel<T>), dim3(GridStrideBlocks(params.count)),
                              dim3(kElementwiseThreads), 0, stream, x, y, params);
}

template <typename T>
cudaError_t LaunchGlobalPool(const T* x, T* y, const Pool2dProblem& problem, cudaStream_t stream) {
  const bool is_max = problem.mode == PoolMode::kGlobalMax;
  const int64_t plane_size = int64_t{problem.h} * problem.w;
  if (problem.layout == Layout::kNCHW) {
    const int64_t planes = int64_t{problem.n} * problem.c;
    const unsigned blocks = GridStrideBlocks(planes, kWarpsPerBlock);
    return CONVOY_LAUNCH_KERNEL((GlobalPoolPlanesKernel<T>), dim3(blocks), dim3(kWarpsPerBlock * 32), 0, stream, x, y,
                                planes, plane_size, is_max);
  }
  return CONVOY_LAUNCH_KERNEL((GlobalPoolChannelsLastKernel<T>),
                              dim3(GridStrideBlocks(int64_t{problem.n} * problem.c)), dim3(kElementwiseThreads), 0,
                              stream, x, y, int64_t{problem.n}, problem.c, plane_size, is_max);
}

bool IsGlobal(const Pool2dProblem& problem) {
  return problem.mode == PoolMode::kGlobalAverage || problem.mode == PoolMode::kGlobalMax;
}

absl::Status CheckPoolProblem(const Pool2dProblem& problem) {
  if (absl::Status valid = problem.Validate(); !valid.ok()) return valid;
  if (!IsFloatingPoint(problem.dtype)) return absl::UnimplementedError("pool2d: FP32, FP16 or BF16 only");
  if (problem.layout == Layout::kNCHW8c) return absl::UnimplementedError("pool2d: NCHW and NHWC only");
  return absl::OkStatus();
}

// ---- entries ----
class CudaPool2dDirect final : public Pool2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.pool2d.direct"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const Pool2dProblem& problem) const override { return CheckPoolProblem(problem); }
  absl::Status Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const bool global = IsGlobal(problem);
    Pool2dParams params;
    params.channels = problem.c, params.h = problem.h, params.w = problem.w;
    params.p = problem.p(), params.q = problem.q();
    params.count = int64_t{problem.n} * problem.c * params.p * params.q;
    params.r = global ? problem.h : problem.r;
    params.s = global ? problem.w : problem.s;
    params.stride_h = problem.stride_h, params.stride_w = problem.stride_w;
    params.dilation_h = global ? 1 : problem.dilation_h, params.dilation_w = global ? 1 : problem.dilation_w;
    params.pad_top = global ? 0 : problem.pad_top, params.pad_bottom = global ? 0 : problem.pad_bottom;
    params.pad_left = global ? 0 : problem.pad_left, params.pad_right = global ? 0 : problem.pad_right;
    params.is_max = problem.mode == PoolMode::kMax || problem.mode == PoolMode::kGlobalMax;
    params.count_include_pad = problem.count_include_pad;
    params.channels_last = problem.layout == Layout::kNHWC;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchPool2dDirect(static_cast<const T*>(args.x), static_cast<T*>(args.y), params, StreamOf(context)),
          "Pool2dDirectKernel");
    });
  }
  int HeuristicScore(const Pool2dProblem&) const override { return 10; }
};

class CudaPool2dGlobalReduce final : public Pool2dAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.pool2d.global_reduce"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const Pool2dProblem& problem) const override {
    if (absl::Status s = CheckPoolProblem(problem); !s.ok()) return s;
    if (!IsGlobal(problem)) return absl::UnimplementedError("global_reduce: global average / max only");
    return absl::OkStatus();
  }
  absl::Status Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    return DispatchFloatType(problem.dtype, [&](auto tag) {
      using T = decltype(tag);
      return LaunchStatus(
          LaunchGlobalPool(static_cast<const T*>(args.x), static_cast<T*>(args.y), problem, StreamOf(context)),
          "GlobalPool kernel");
    });
  }
  int HeuristicScore(const Pool2dProblem&) const override { return 20; }
};

CONVOY_REGISTER_ALGORITHM(Pool2dOp, CudaPool2dDirect);
CONVOY_REGISTER_ALGORITHM(Pool2dOp, CudaPool2dGlobalReduce);

}  // namespace
}  // namespace convoy::cuda
