// CUDA INT8 element-wise add ("cuda.quantized_add.elementwise"): QuantizedAddProblem (problems.h), the residual add of
// a QDQ plan between two 8-bit tensors, written 8-bit. Each element is computed as cpu.quantized_add.elementwise
// (kernels/cpu/quantized_add.h) computes it, which is onnxruntime's x86 QLinearAdd:
//
//   ra = a_scale / y_scale, rb = b_scale / y_scale, fixed = y_zp - fma(ra, a_zp, rb * b_zp)   (host, once per Run)
//   y  = saturate(rint(fma(a, ra, fma(b, rb, fixed))))                                        (device, per element)
//
// The arithmetic is quantized_add_arithmetic.cuh's (shared with the INT8 convolution's fused add): the constants
// formed on the host with the same C++ operations as the CPU's, the device's two FMAs written as __fmaf_rn and the
// rounding as rintf (half to even), so neither nvcc nor the emulation can contract or reorder them: the bytes equal
// the CPU's bit for bit. Flat over the buffers: any layout, as long as both operands and the
// output share it; four bytes per access when every pointer allows it. y may equal a or b (each element is read
// before it is written, by the same thread).
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/quantized_add_arithmetic.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

template <typename A, typename B, typename Y>
__device__ __forceinline__ Y QuantizedAddElement(A a, B b, const QuantizedAddConstants& k) {
  return static_cast<Y>(QuantizedAddValue(static_cast<float>(a), static_cast<float>(b), k));
}

// ---- kernel ----
// a: [count] of A; b: [count] of B; y: [count] of Y (may alias a or b: no __restrict__).
template <typename A, typename B, typename Y, bool kPacked>
__global__ void __launch_bounds__(kElementwiseThreads)
    QuantizedAddKernel(const A* a, const B* b, Y* y, int64_t count, QuantizedAddConstants k) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t packs = kPacked ? count / 4 : 0;
  for (int64_t p = first; p < packs; p += stride) {  // p: pack index, elements [4p, 4p + 4)
    const Pack4<A> a4 = reinterpret_cast<const Pack4<A>*>(a)[p];
    const Pack4<B> b4 = reinterpret_cast<const Pack4<B>*>(b)[p];
    Pack4<Y> y4;
#pragma unroll
    for (int j = 0; j < 4; ++j) y4.v[j] = QuantizedAddElement<A, B, Y>(a4.v[j], b4.v[j], k);
    reinterpret_cast<Pack4<Y>*>(y)[p] = y4;
  }
  for (int64_t i = packs * 4 + first; i < count; i += stride) y[i] = QuantizedAddElement<A, B, Y>(a[i], b[i], k);
}

// ---- launcher ----
template <typename A, typename B, typename Y>
cudaError_t LaunchQuantizedAdd(const A* a, const B* b, Y* y, int64_t count, const QuantizedAddConstants& k,
                               cudaStream_t stream) {
  const bool packed = IsPack4Aligned<uint8_t>({a, b, y});
  return LaunchPackedOrScalar(packed, count, QuantizedAddKernel<A, B, Y, true>, QuantizedAddKernel<A, B, Y, false>,
                              stream, a, b, y, count, k);
}

// fn(T{}) with T = uint8_t for UINT8, int8_t for INT8 (Validate admits no other type).
template <typename Fn>
absl::Status DispatchByteType(DataType type, Fn&& fn) {
  if (type == DataType::kUInt8) return fn(uint8_t{});
  return fn(int8_t{});
}

// ---- entry ----
class CudaQuantizedAddElementwise final : public QuantizedAddAlgorithm {
 public:
  absl::string_view name() const override { return "cuda.quantized_add.elementwise"; }
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const QuantizedAddProblem& problem) const override { return problem.Validate(); }
  absl::Status Run(const QuantizedAddProblem& problem, const QuantizedAddArgs& args, Workspace,
                   const ExecutionContext& context) const override {
    if (absl::Status s = CheckArgs(problem, {{"a", args.a}, {"b", args.b}, {"y", args.y}}); !s.ok()) return s;
    const QuantizedAddConstants params = MakeQuantizedAddConstants(problem);
    return DispatchByteType(problem.a_type, [&](auto a_tag) {
      return DispatchByteType(problem.b_type, [&](auto b_tag) {
        return DispatchByteType(problem.y_type, [&](auto y_tag) {
          using A = decltype(a_tag);
          using B = decltype(b_tag);
          using Y = decltype(y_tag);
          return LaunchStatus(LaunchQuantizedAdd(static_cast<const A*>(args.a), static_cast<const B*>(args.b),
                                                 static_cast<Y*>(args.y), problem.count, params, StreamOf(context)),
                              "QuantizedAddKernel");
        });
      });
    });
  }
  int HeuristicScore(const QuantizedAddProblem&) const override { return 10; }
};

CONVOY_REGISTER_ALGORITHM(QuantizedAddOp, CudaQuantizedAddElementwise);

}  // namespace
}  // namespace convoy::cuda
