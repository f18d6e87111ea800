// CUDA argmax along the middle axis of [outer, axis, inner] (the channels of NCHW or NHWC, ONNX ArgMax, a
// segmentation class map): one thread per output position walks the axis, keeping the best value and index in
// registers (reads coalesced across inner in NCHW; in NHWC each thread reads one pixel's contiguous channels).
// Indices are written as UINT8, INT32, INT64 or a float type.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

struct ArgMaxParams {
  int64_t count;  // outer * inner
  int64_t axis, inner;
  bool select_last_index;
};

template <typename I>
__device__ __forceinline__ I IndexAs(int64_t index) {
  return static_cast<I>(index);
}
template <>
__device__ __forceinline__ __half IndexAs<__half>(int64_t index) {
  return FloatToElement<__half>(static_cast<float>(index));
}
template <>
__device__ __forceinline__ __nv_bfloat16 IndexAs<__nv_bfloat16>(int64_t index) {
  return FloatToElement<__nv_bfloat16>(static_cast<float>(index));
}

// ---- kernel ----
// x: [outer, axis, inner] in T; y: [outer, inner] in I.
template <typename T, typename I>
__global__ void __launch_bounds__(kElementwiseThreads)
    ArgMaxKernel(const T* __restrict__ x, I* __restrict__ y, ArgMaxParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.count; i += stride) {  // y position
    const int64_t o = i / p.inner, in = i % p.inner;
    const T* column = x + o * p.axis * p.inner + in;
    float best = ElementToFloat(column[0]);
    int64_t index = 0;
    for (int64_t a = 1; a < p.axis; ++a) {
      const float v = ElementToFloat(column[a * p.inner]);
      if (v > best || (p.select_last_index && v == best)) best = v, index = a;
    }
    y[i] = IndexAs<I>(index);
  }
}

// ---- launcher ----
template <typename T, typename I>
cudaError_t LaunchArgMax(const T* x, I* y, const ArgMaxParams& params, cudaStream_t stream) {
  return CONVOY_LAUNCH_KERNEL((ArgMaxKernel<T, I>), dim3(GridStrideBlocks(params.count)), dim3(kElementwiseThreads), 0,
                              stream, x, y, params);
}

// Calls fn(I{}) with the index storage type of `dtype`.
template <typename Fn>
absl::Status DispatchIndexType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    default: return DispatchFloatType(dtype, fn);
  }
}

// ---- entry ----
class CudaArgMaxColumns final : public ArgMaxAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.argmax.columns"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const ArgMaxProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const ArgMaxProblem& problem, const ArgMaxArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CanImplement(problem); !s.ok()) return s;
    if (absl::Status s = CheckArgs(problem, {{"x", args.x}, {"y", args.y}}); !s.ok()) return s;
    const ArgMaxParams params{problem.outer * problem.inner, problem.axis, problem.inner, problem.select_last_index};
    return DispatchFloatType(problem.dtype, [&](auto value_tag) {
      using T = decltype(value_tag);
      return DispatchIndexType(problem.index_dtype, [&](auto index_tag) {
        using I = decltype(index_tag);
        return LaunchStatus(
            LaunchArgMax(static_cast<const T*>(args.x), static_cast<I*>(args.y), params, StreamOf(context)),
            "ArgMaxKernel");
      });
    });
  }
  int HeuristicScore(const ArgMaxProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(ArgMaxOp, CudaArgMaxColumns);

}  // namespace
}  // namespace convoy::cuda
